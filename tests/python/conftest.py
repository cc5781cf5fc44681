"""Shared fixtures of the weft Python tests.

Every test checks on the way out that weft's own memory (bytes held by live
buffers) returns to where it was once the test's arrays are gone: the leak
check of weft's allocations that also runs under ASan (where CPython's own
allocations make LeakSanitizer unusable).
"""
import gc
import os

import pytest

import weft as mx

SANITIZED = os.environ.get("WEFT_PY_SANITIZED") == "1"
# Deadlines are generous under the sanitizers (5-20x slower).
DEADLINE = 60.0 if SANITIZED else 20.0


@pytest.fixture(autouse=True)
def weft_memory_returns_to_baseline():
    gc.collect()
    mx.synchronize()
    before = mx.get_active_memory()
    yield
    gc.collect()
    mx.synchronize()
    after = mx.get_active_memory()
    # Deferred destructors run right after the tasks that free them: allow a
    # moment for the last ones.
    for _ in range(100):
        if after <= before:
            break
        import time

        time.sleep(0.01)
        gc.collect()
        after = mx.get_active_memory()
    assert after <= before, f"weft memory grew from {before} to {after} bytes"
