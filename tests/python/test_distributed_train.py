"""examples/distributed_train.py: two ranks with B rows each (mpirun -np 2)
give, step for step, the losses of one process with 2B rows.

- one process taking the 2B rows as two micro-batches whose losses and
  gradients are added in rank order and halved (what average_gradients'
  all_sum computes): the same bits at every step;
- one process taking the 2B rows at once: the sums over the batch rows (in
  the loss's mean and in every weight gradient's matmul) add the rows in
  another order, so the losses agree to float32 rounding only (measured
  below 1e-5 relative over 30-60 steps, checked to 1e-4; the first step's
  loss, before any update, to 1e-6).
"""
import importlib.util
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import weft as mx

SANITIZED = os.environ.get("WEFT_PY_SANITIZED") == "1"
EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                       "distributed_train.py")

try:
    import sklearn.datasets  # noqa: F401
    HAVE_SKLEARN = True
except ImportError:
    HAVE_SKLEARN = False

pytestmark = [
    pytest.mark.skipif(SANITIZED, reason="training under mpirun: release build only"),
    pytest.mark.skipif(not HAVE_SKLEARN, reason="needs scikit-learn's digits"),
]

BATCH, STEPS = 16, 12


def load_example():
    spec = importlib.util.spec_from_file_location("distributed_train", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_ranks_match_one_process(tmp_path):
    if shutil.which("mpirun") is None or not mx.distributed.is_available():
        pytest.fail("mpirun / libmpi.so.40 missing: run scripts/install-deps.sh")
    out = tmp_path / "losses.npy"
    env = dict(os.environ)
    env.pop("OMPI_COMM_WORLD_SIZE", None)
    result = subprocess.run(
        ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
         "--mca", "mpi_yield_when_idle", "1", "-np", "2", sys.executable, EXAMPLE,
         "--batch", str(BATCH), "--steps", str(STEPS), "--losses", str(out)],
        capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    distributed = np.load(out)
    assert distributed.shape == (STEPS,) and distributed.dtype == np.float32

    example = load_example()
    data = example.load_data()
    emulated, _ = example.train("emulate", 2, BATCH, STEPS, data)
    whole, _ = example.train("whole", 2, BATCH, STEPS, data)
    np.testing.assert_array_equal(emulated.view(np.uint32), distributed.view(np.uint32))
    np.testing.assert_allclose(whole[0], distributed[0], rtol=1e-6)
    np.testing.assert_allclose(whole, distributed, rtol=1e-4)
    assert distributed[-1] < 0.5 * distributed[0]  # it learns
