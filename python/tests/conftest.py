"""Fixtures of the Python test suite: the shared data folder, the CLI, and a
safetensors reader/writer in plain numpy (independent of sanpath's own io).

Environment: SANPATH_SHARED_DIR (default ../shared beside the project),
SANPATH_CLI (the `sanpath` executable; default build/sanpath). A test that
needs either fails, rather than skips, when the variable CI is set.
"""
import json
import os
import struct
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _need(path, what):
    if os.path.exists(path):
        return path
    if os.environ.get("CI"):
        pytest.fail(f"{what} missing: {path}")
    pytest.skip(f"{what} missing: {path}")


@pytest.fixture(scope="session")
def shared():
    return _need(os.environ.get("SANPATH_SHARED_DIR", os.path.join(ROOT, "..", "shared")), "shared folder")


@pytest.fixture(scope="session")
def models(shared):
    return os.path.join(shared, "data", "real-models")


@pytest.fixture(scope="session")
def cli():
    return _need(os.environ.get("SANPATH_CLI", os.path.join(ROOT, "build", "sanpath")), "sanpath CLI")


def run_cli(cli, *args, cwd=None):
    """(exit code, stdout, stderr) of the CLI."""
    r = subprocess.run([cli, *args, "--quiet"] if args and args[0] not in ("graph", "init") else [cli, *args],
                       capture_output=True, text=True, cwd=cwd)
    return r.returncode, r.stdout, r.stderr


def cli_ok(cli, *args):
    """The CLI's stdout; fails the test unless it exits 0."""
    code, out, err = run_cli(cli, *args)
    assert code == 0, err
    return out


def cli_message(cli, *args):
    """The CLI's one-line error message (without "sanpath: error: "); fails the test unless it failed cleanly."""
    code, out, err = run_cli(cli, *args)
    assert code != 0 and out == "" and err.startswith("sanpath: error: "), (code, out, err)
    return err[len("sanpath: error: "):].rstrip("\n")


_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path):
    """{name: float64 array} of a safetensors file (F64/F32/F16/BF16)."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        raw = body[a:b]
        if e["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32).astype(np.float64)
        else:
            arr = np.frombuffer(raw, dtype=np.dtype(_DTYPES[e["dtype"]]).newbyteorder("<")).astype(np.float64)
        out[name] = arr.reshape(e["shape"])
    return out


def write_safetensors(path, tensors):
    """Writes {name: array} as F64 safetensors."""
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f8").tobytes()
        header[name] = {"dtype": "F64", "shape": list(np.shape(a)), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def write_hf_folder(folder, tensors, config):
    os.makedirs(folder, exist_ok=True)
    write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
