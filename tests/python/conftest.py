"""Shared fixtures of the weft Python tests.

Every test checks on the way out that weft's own memory (bytes held by live
buffers) returns to where it was once the test's arrays are gone: the leak
check of weft's allocations that also runs under ASan (where CPython's own
allocations make LeakSanitizer unusable).
"""
import gc
import os
import time

import pytest

import weft as mx

SANITIZED = os.environ.get("WEFT_PY_SANITIZED") == "1"
# Deadlines are generous under the sanitizers (5-20x slower).
DEADLINE = 60.0 if SANITIZED else 20.0


def _settled_memory():
    """weft's active bytes once its queued work (and the deferred destructors
    that run right after it) is done."""
    mx.synchronize()
    return mx.get_active_memory()


@pytest.fixture(autouse=True)
def weft_memory_returns_to_baseline():
    # A full gc.collect() costs 0.1-0.3 s with pytest's heap on a small
    # machine (twice per test, it was most of the suite's time), so the
    # collector runs only when the bytes have not come back by themselves:
    # first the young generations (a test's own cycles), then everything.
    before = _settled_memory()
    yield
    after = _settled_memory()
    for attempt in range(100):
        if after <= before:
            break
        gc.collect(1 if attempt == 0 else 2)
        if attempt > 1:
            # Deferred destructors run right after the tasks that free them:
            # allow a moment for the last ones.
            time.sleep(0.01)
        after = _settled_memory()
    assert after <= before, f"weft memory grew from {before} to {after} bytes"


@pytest.fixture
def run_two_ranks(tmp_path):
    """run_two_ranks(worker_source): runs the script under `mpirun -np 2` with
    this interpreter and checks that it exits 0 and that both ranks printed
    "rank N ok"."""
    import re
    import shutil
    import subprocess
    import sys

    def run(source):
        if shutil.which("mpirun") is None or not mx.distributed.is_available():
            pytest.fail("mpirun / libmpi.so.40 missing: run scripts/install-deps.sh")
        script = tmp_path / "worker.py"
        script.write_text(source)
        env = dict(os.environ)
        env.pop("OMPI_COMM_WORLD_SIZE", None)
        result = subprocess.run(
            ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
             "--mca", "mpi_yield_when_idle", "1", "-np", "2", sys.executable, str(script)],
            capture_output=True, text=True, timeout=120, env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert sorted(re.findall(r"rank (\d+) ok", result.stdout)) == ["0", "1"], result.stdout

    return run
