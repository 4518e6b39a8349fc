"""Ctrl-C during a long high-precision run raises KeyboardInterrupt promptly."""
import os
import signal
import subprocess
import sys
import time

import pytest

CHILD = r"""
import signal, sys, time, sanpath
# As in an interactive session (a shell's background job inherits SIGINT ignored).
signal.signal(signal.SIGINT, signal.default_int_handler)
m = sanpath.random_model(40, 2, 16, skip=False, mlp="none", layernorm="none", d_ff=0, seed=1)
print("start", flush=True)
t = time.time()
try:
    sanpath.forward(m, INPUT, precision=16387, threads=2)
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted %.2f" % (time.time() - t), flush=True)
# The library works again after an interrupt.
print(sanpath.forward(m, sanpath.random_input(4), precision="double").precision, flush=True)
"""


@pytest.mark.parametrize("input", ["sanpath.random_input(16, seed=1)", "sanpath.random_batch(16, 4, seed=1)"])
def test_keyboard_interrupt(input):
    """One input, and a batch of four on two worker threads."""
    child = CHILD.replace("INPUT", input)
    p = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    assert p.stdout.readline().strip() == "start"
    time.sleep(1.5)
    sent = time.time()
    p.send_signal(signal.SIGINT)
    line = p.stdout.readline().strip()
    latency = time.time() - sent
    assert line.startswith("interrupted"), line
    assert latency < 10, latency
    assert p.stdout.readline().strip() == "double"
    assert p.wait(timeout=60) == 0
