#!/usr/bin/python3
"""The BERT-base double forward analysis through the Python package, timed as
a user calls it: sanpath.forward(model, input, precision="double",
confirm=False) on the model of `bench_export bert` and the random input of
make_input(128, 768) (n = 128, seed 2). The C++ side is analyze/bert/double in
bench_forward.cpp. Prints one JSON line {"times": [seconds per call, ...]}.

    PYTHONPATH=<build>/python bench/peers/forward_python.py MODEL.safetensors REPS
"""
import json
import sys
import time

import sanpath

model = sanpath.load(sys.argv[1])
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
x = sanpath.random_input(128, seed=2)
times = []
for _ in range(reps + 1):  # the first call warms up
    t = time.perf_counter()
    sanpath.forward(model, x, precision="double", confirm=False)
    times.append(time.perf_counter() - t)
print(json.dumps({"times": times[1:]}))
