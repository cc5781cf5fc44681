"""Python-object allocation failures inside weft calls (issue 30).

CPython's _testcapi.set_nomemory(start, stop) makes the Python allocations
numbered start .. stop-1 (counted from the call; raw, mem and object
domains) fail. Each scenario runs with its Nth allocation failing for N = 1,
2, 3, ... until it has run cleanly many times in a row (the fault then falls
after the call). Every run must end with MemoryError or with the right
result (checked against NumPy with the hooks off) — never a crash, a
SystemError (an error return without an exception, or the reverse) or a
wrong value — and weft must compute correctly afterwards.

Leaks: the binding's C entry points (array creation, tolist, item, NumPy
export, operators, module ops, indexing, _core._eval), called on arguments
made before the fault is armed, must give back every reference and every
byte of weft memory. Entry points written in Python (mx.eval, grad,
value_and_grad, compile) are checked for outcomes only: CPython 3.11 itself
keeps references when its own allocations fail (list((v,)) keeps one to v
when its 2nd allocation fails; tuple(<genexpr>) keeps the item it was
handed), so no Python code can be leak-free under this injection.

The binding's C allocations through weft (wf__malloc ...) are the C fault
loop's business (tests/unit/test_fault_injection.c).
"""
import gc
import sys

import numpy as np
import pytest

import weft as mx

_testcapi = pytest.importorskip(
    "_testcapi", reason="this Python has no _testcapi (Debian: libpython3.X-testsuite)")

# Enough consecutive clean runs that the fault has fallen after the call.
CLEAN_RUNS_TO_STOP = 15
MAX_N = 2000


@pytest.fixture(autouse=True)
def weft_memory_returns_to_baseline():
    """Replaces conftest's check: the strict sweeps check weft's memory
    themselves, the others cannot (see above)."""
    yield


def is_allocation_failure(exc):
    # threading.Lock() reports a failed allocation as RuntimeError.
    return isinstance(exc, MemoryError) or (
        isinstance(exc, RuntimeError) and "can't allocate lock" in str(exc))


def sweep(fn, check, keep_alive=(), strict=True):
    """Fails allocation N = 1, 2, ... of fn(); check(result) on each success.
    strict: the references to keep_alive and weft's active memory must be
    back where they were. Returns how many runs failed."""
    gc.collect()
    mx.synchronize()
    memory0 = mx.get_active_memory()
    refs0 = [sys.getrefcount(x) for x in keep_alive]
    failures = clean_in_a_row = 0
    for n in range(1, MAX_N):
        _testcapi.set_nomemory(n, n + 1)
        try:
            result = fn()
        except Exception as e:  # noqa: BLE001 - anything else fails the test
            if not is_allocation_failure(e):
                raise
            failures += 1
            clean_in_a_row = 0
            continue
        finally:
            _testcapi.remove_mem_hooks()
        check(result)
        del result
        clean_in_a_row += 1
        if clean_in_a_row == CLEAN_RUNS_TO_STOP:
            break
    else:
        pytest.fail(f"still failing after {MAX_N} injection points")
    gc.collect()
    mx.synchronize()
    if strict:
        assert [sys.getrefcount(x) for x in keep_alive] == refs0
        assert mx.get_active_memory() == memory0
    # weft still computes
    np.testing.assert_array_equal(np.array(mx.array([1.0, 2.0]) * 3), [3.0, 6.0])
    return failures


X = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
Y = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)


def close(expected):
    def check(got):
        np.testing.assert_allclose(np.array(got), expected, rtol=1e-5, atol=1e-6)
    return check


def evaluated(*arrays):
    mx.eval(*arrays)
    return arrays if len(arrays) > 1 else arrays[0]


def test_array_creation():
    nested = X.tolist()
    sweep(lambda: mx.array(nested), close(X), keep_alive=[nested])
    sweep(lambda: mx.array(X), close(X), keep_alive=[X])
    sweep(lambda: mx.array(3.5, dtype=mx.float32), close(np.float32(3.5)))


def test_tolist_item_and_numpy_export():
    a = evaluated(mx.array(X))
    s = evaluated(mx.sum(a))
    sweep(lambda: a.tolist(), lambda got: got == X.tolist() or pytest.fail(got), keep_alive=[a])
    sweep(lambda: s.item(), lambda got: got == pytest.approx(float(X.sum())), keep_alive=[s])
    sweep(lambda: np.array(a), close(X), keep_alive=[a])


def test_operators_module_ops_indexing_and_eval():
    a, b = evaluated(mx.array(X), mx.array(Y))
    keep = [a, b]
    sweep(lambda: a + b, close(X + Y), keep)
    sweep(lambda: a * 2, close(X * 2), keep)
    sweep(lambda: mx.exp(b), close(np.exp(Y)), keep)
    sweep(lambda: mx.sum(a, axis=1, keepdims=True), close(X.sum(1, keepdims=True)), keep)
    sweep(lambda: a[:, ::2], close(X[:, ::2]), keep)
    sweep(lambda: mx._core._eval([a * b], False), lambda got: got is None, keep)


def test_shape_error_stays_a_value_error():
    a, bad = evaluated(mx.array(X), mx.array(np.ones((4,), np.float32)))

    def add():
        try:
            a + bad
        except ValueError:
            return "ValueError"
        return "no error"

    sweep(add, lambda got: got == "ValueError" or pytest.fail(got), [a, bad])


def test_python_level_eval_grad_and_compile():
    x, y = evaluated(mx.array(X), mx.array(Y))
    sweep(lambda: evaluated((x + y) * 2 - mx.exp(y)), close((X + Y) * 2 - np.exp(Y)),
          strict=False)
    grad = mx.grad(lambda t: mx.sum(t * t * t))
    sweep(lambda: grad(x), close(3 * X * X), strict=False)
    vg = mx.value_and_grad(lambda p: mx.sum(p["w"] * p["w"]))

    def check_vg(got):
        value, g = got
        assert value.item() == pytest.approx(float((X * X).sum()), rel=1e-5)
        np.testing.assert_allclose(np.array(g["w"]), 2 * X, rtol=1e-6)

    sweep(lambda: vg({"w": x}), check_vg, strict=False)

    def f(p, q):
        return mx.tanh(p * q + 1.0), mx.sum(p)

    def check_f(got):
        np.testing.assert_allclose(np.array(got[0]), np.tanh(X * Y + 1), rtol=1e-5)
        assert got[1].item() == pytest.approx(float(X.sum()))

    # a fresh compiled function each run: the trace is made under the fault
    sweep(lambda: mx.compile(f)(x, y), check_f, strict=False)
    compiled = mx.compile(f)
    check_f(compiled(x, y))
    sweep(lambda: compiled(x, y), check_f, strict=False)  # replays
