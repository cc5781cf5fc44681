"""Python-object allocation failures inside weft calls (issue 30).

CPython's _testcapi.set_nomemory(start, stop) makes the Python allocations
numbered start .. stop-1 (counted from the call, every domain: raw, mem,
object) fail. Each scenario below runs with its Nth allocation failing for
N = 1, 2, 3, ... until it has run cleanly many times in a row (the fault then
falls after the call). Every run must end with MemoryError or with the right
result (checked against NumPy with the hooks off) — never a crash, a
SystemError (an error return without an exception, or the reverse) or a
wrong value — and weft must compute correctly afterwards. The conftest
fixture checks that weft's own memory returns to its baseline.

The binding's own C allocations (weft's, through wf__malloc) are the C fault
loop's business (tests/unit/test_fault_injection.c); this covers the Python
objects the binding makes: arrays, lists, tuples, floats, closures, trees.
"""
import gc

import numpy as np
import pytest

import weft as mx

_testcapi = pytest.importorskip(
    "_testcapi", reason="this Python has no _testcapi (Debian: libpython3.X-testsuite)")

# Enough consecutive clean runs that the fault has fallen after the call.
CLEAN_RUNS_TO_STOP = 40
MAX_N = 3000


def fail_nth_allocation(fn, n):
    """fn() with the nth Python allocation from now failing: ('ok', result)
    or ('memory', None)."""
    _testcapi.set_nomemory(n, n + 1)
    try:
        result = fn()
    except MemoryError:
        return "memory", None
    finally:
        _testcapi.remove_mem_hooks()
    return "ok", result


def sweep(fn, check):
    """Fails allocation N = 1, 2, ... of fn; check(result) on each success.
    Returns (runs that raised MemoryError, runs that succeeded)."""
    failures = successes = clean_in_a_row = 0
    for n in range(1, MAX_N):
        outcome, result = fail_nth_allocation(fn, n)
        if outcome == "memory":
            failures += 1
            clean_in_a_row = 0
        else:
            check(result)
            successes += 1
            clean_in_a_row += 1
            if clean_in_a_row == CLEAN_RUNS_TO_STOP:
                break
        del result
    else:
        pytest.fail(f"still failing after {MAX_N} injection points")
    gc.collect()
    mx.synchronize()
    # weft still computes
    np.testing.assert_array_equal(np.array(mx.array([1.0, 2.0]) * 3), [3.0, 6.0])
    return failures, successes


X = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
Y = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)


def close(expected):
    def check(got):
        np.testing.assert_allclose(np.array(got), expected, rtol=1e-6, atol=1e-6)
    return check


def test_array_creation_from_lists_and_numpy():
    nested = X.tolist()
    failures, _ = sweep(lambda: mx.array(nested), close(X))
    assert failures > 0  # the fault was reached
    sweep(lambda: mx.array(X), close(X))
    sweep(lambda: mx.array(3.5, dtype=mx.float32), close(np.float32(3.5)))


def test_tolist_and_item():
    a = mx.array(X)
    mx.eval(a)
    failures, _ = sweep(lambda: a.tolist(), lambda got: got == X.tolist() or pytest.fail(got))
    assert failures > 0
    sweep(lambda: mx.sum(a).item(), lambda got: got == pytest.approx(float(X.sum())))
    sweep(lambda: np.array(a), close(X))


def test_ops_indexing_and_eval():
    a, b = mx.array(X), mx.array(Y)

    def ops():
        c = (a + b) * 2 - mx.exp(b)
        d = mx.sum(c[:, ::2], axis=1, keepdims=True)
        mx.eval(c, d)
        return c, d

    c_ref = (X + Y) * 2 - np.exp(Y)

    def check(got):
        np.testing.assert_allclose(np.array(got[0]), c_ref, rtol=1e-5)
        np.testing.assert_allclose(np.array(got[1]), c_ref[:, ::2].sum(1, keepdims=True),
                                   rtol=1e-5)

    failures, _ = sweep(ops, check)
    assert failures > 0


def test_shape_error_stays_an_error():
    a, b = mx.array(X), mx.array(np.ones((4,), np.float32))

    def bad():
        try:
            mx.eval(a + b)
        except ValueError:
            return "ValueError"
        return "no error"

    sweep(bad, lambda got: got == "ValueError" or pytest.fail(got))


def test_grad_and_value_and_grad():
    x = mx.array(X)
    grad = mx.grad(lambda t: mx.sum(t * t * t))
    failures, _ = sweep(lambda: grad(x), close(3 * X * X))
    assert failures > 0
    vg = mx.value_and_grad(lambda p: mx.sum(p["w"] * p["w"]))

    def check(got):
        value, g = got
        assert value.item() == pytest.approx(float((X * X).sum()), rel=1e-5)
        np.testing.assert_allclose(np.array(g["w"]), 2 * X, rtol=1e-6)

    sweep(lambda: vg({"w": x}), check)


def test_compile_trace_and_replay():
    x, y = mx.array(X), mx.array(Y)

    def f(p, q):
        return mx.tanh(p * q + 1.0), mx.sum(p)

    def check(got):
        np.testing.assert_allclose(np.array(got[0]), np.tanh(X * Y + 1), rtol=1e-5)
        assert got[1].item() == pytest.approx(float(X.sum()))

    # A fresh compiled function each run: the trace is built under the fault.
    failures, _ = sweep(lambda: mx.compile(f)(x, y), check)
    assert failures > 0
    compiled = mx.compile(f)
    check(compiled(x, y))
    sweep(lambda: compiled(x, y), check)  # replays
