"""Cross-checks weft's safetensors files with the safetensors package.

Usage: check_safetensors.py WEFT_FILE PYTHON_FILE

Reads WEFT_FILE (written by tests/unit/test_safetensors_python.c with
wf_nn_save_safetensors) with safetensors.numpy.load_file and checks every
name, shape, dtype and value against EXPECTED_FROM_WEFT; then writes
PYTHON_FILE with safetensors.numpy.save_file (the tensors of WRITTEN_BY_PYTHON),
which the C test loads with wf_nn_load_safetensors and checks. Exit 0 when
every check passed, 1 otherwise (each failure printed).
"""
import sys

try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file
except ImportError as missing:
    print(f"check_safetensors.py: {missing} in {sys.executable}: run scripts/python-venv.sh "
          "(`make test` runs it) to install numpy and safetensors from PyPI")
    sys.exit(3)

# The tensors the C side writes (keep in step with weft_tensors() there).
EXPECTED_FROM_WEFT = {
    "layer.weight": np.array([[-1.5, 0.0, 0.25], [1.0, 2.5, 1024.0]], dtype=np.float32),
    "layer.bias": np.array([0.1, -2.0, 3.5, 1e300], dtype=np.float64),
    "ids": np.array([[-7, 0], [42, 2147483647]], dtype=np.int32),
    "counts": np.array([-1, 0, 1 << 40], dtype=np.int64),
    "bytes": np.array([0, 1, 127, 128, 255], dtype=np.uint8),
    "mask": np.array([True, False, True], dtype=np.bool_),
    "half": np.array([1.5, -0.25], dtype=np.float16),
    "scalar": np.array(3.25, dtype=np.float32),
    "empty": np.zeros((0, 3), dtype=np.float32),
    "na\u00efve.\u00fcnicode": np.array([7.0], dtype=np.float32),
    'quote"and\\backslash': np.array([-0.5], dtype=np.float32),
}

# The tensors this script writes (keep in step with check_python_file() there).
WRITTEN_BY_PYTHON = {
    "py.f32": (np.arange(12, dtype=np.float32).reshape(3, 4) * 0.25 - 1.0),
    "py.f64": np.array([-0.125, 6.5e-300], dtype=np.float64),
    "py.i64": np.array([[-(1 << 50), 3], [5, 1 << 62]], dtype=np.int64),
    "py.i32": np.array([-2147483648, 17], dtype=np.int32),
    "py.u8": np.array([[200], [7]], dtype=np.uint8),
    "py.bool": np.array([False, True], dtype=np.bool_),
    "py.f16": np.array([0.5, -65504.0, 2.0], dtype=np.float16),
    "py.scalar": np.array(-4.0, dtype=np.float64),
    "py.empty": np.zeros((2, 0), dtype=np.int32),
    "py.\u00e9t\u00e9": np.array([1.0, 2.0], dtype=np.float32),
}

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def check_weft_file(path):
    loaded = load_file(path)
    check(sorted(loaded) == sorted(EXPECTED_FROM_WEFT),
          f"names: got {sorted(loaded)}, want {sorted(EXPECTED_FROM_WEFT)}")
    for name, want in EXPECTED_FROM_WEFT.items():
        got = loaded.get(name)
        if got is None:
            continue
        check(got.dtype == want.dtype, f"{name!r}: dtype {got.dtype}, want {want.dtype}")
        check(got.shape == want.shape, f"{name!r}: shape {got.shape}, want {want.shape}")
        if got.dtype == want.dtype and got.shape == want.shape:
            check(np.array_equal(got, want), f"{name!r}: values {got!r}, want {want!r}")
    with safe_open(path, framework="numpy") as f:
        metadata = f.metadata()
    check(metadata == {"format": "weft"}, f"metadata {metadata!r}, want {{'format': 'weft'}}")


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    weft_path, python_path = sys.argv[1], sys.argv[2]
    check_weft_file(weft_path)
    save_file(WRITTEN_BY_PYTHON, python_path, metadata={"writer": "safetensors.numpy"})
    for message in failures:
        print(f"check_safetensors.py: {message}")
    print(f"check_safetensors.py: {len(EXPECTED_FROM_WEFT)} tensors read, "
          f"{len(WRITTEN_BY_PYTHON)} written, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
