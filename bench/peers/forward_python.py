#!/usr/bin/python3
"""The BERT-base double forward analysis through the Python package, timed as
a user calls it: sanpath.forward(model, input, precision="double",
confirm=False) on the model of bench/common.hpp's make_model(bert_base())
(the same seeded weights: sanpath.random_model with the same spec) and the
random input of make_input(128, 768) (n = 128, seed 2). The C++ side is
analyze/bert/double in bench_forward.cpp. Prints one JSON line
{"times": [seconds per call, ...], "cpu": [process CPU seconds per call, ...]}.

    PYTHONPATH=<build>/python bench/peers/forward_python.py [REPS]
"""
import json
import sys
import time

import sanpath

model = sanpath.random_model(12, 12, 768, d_qk=64, d_v=64, d_ff=3072, std=0.02, bias_std=0.02, seed=1,
                             activation="gelu_tanh", ln_eps=1e-12, skip=True, mlp="residual", layernorm="post")
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
x = sanpath.random_input(128, seed=2)
times, cpu = [], []
for _ in range(reps + 1):  # the first call warms up
    t, c = time.perf_counter(), time.process_time()
    sanpath.forward(model, x, precision="double", confirm=False)
    times.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)  # every thread of the process, as MeasureProcessCPUTime
print(json.dumps({"times": times[1:], "cpu": cpu[1:]}))
