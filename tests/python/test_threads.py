"""The GIL and threads: nothing that waits holds the GIL, every callback
takes it itself, single flight never hangs on a user lock, and exit and fork
with work in flight are clean. Each scenario has a deadline; a hang fails it."""
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref

import numpy as np
import pytest

import weft as mx
from conftest import DEADLINE


def blocking_kernel(event, ran):
    """A Python kernel that waits (GIL released by Event.wait) until `event`
    is set; it fails if the deadline passes first."""

    def kernel(inputs, output):
        ran.append(threading.get_ident())
        if not event.wait(DEADLINE):
            raise TimeoutError("the event was never set: a thread held the GIL")
        np.frombuffer(output, dtype=np.float32)[:] = np.frombuffer(inputs[0], dtype=np.float32) + 1

    return kernel


def test_eval_releases_the_gil_while_a_kernel_blocks():
    event = threading.Event()
    ran = []
    x = mx.array([1.0, 2.0, 3.0])
    y = mx.custom_kernel(blocking_kernel(event, ran), [x], x.shape, mx.float32)
    result = {}

    def evaluate():
        try:
            result["value"] = (y * 2).tolist()
        except Exception as exc:  # pragma: no cover - reported below
            result["error"] = exc

    t = threading.Thread(target=evaluate)
    t.start()
    # Pure Python on this thread: it runs only if the evaluating thread and
    # the kernel's thread let go of the GIL while they wait.
    while not ran:
        time.sleep(0.001)
    total = 0
    for i in range(100000):
        total += i
    event.set()
    t.join(DEADLINE)
    assert not t.is_alive()
    assert "error" not in result, result.get("error")
    assert result["value"] == [4.0, 6.0, 8.0] and total == 4999950000


def test_python_kernel_errors_reach_the_caller():
    def bad(inputs, output):
        raise ArithmeticError("kernel says no")

    y = mx.custom_kernel(bad, [mx.array([1.0])], (1,), mx.float32)
    with pytest.raises(RuntimeError, match="kernel says no"):
        mx.eval(y)
    assert (mx.array([1.0]) + 1).item() == 2.0


def test_async_eval_and_synchronize_release_the_gil():
    event = threading.Event()
    ran = []
    x = mx.array([0.0])
    y = mx.custom_kernel(blocking_kernel(event, ran), [x], (1,), mx.float32)
    mx.async_eval(y)  # returns at once; the stream's worker runs the kernel
    while not ran:
        time.sleep(0.001)
    assert ran[0] != threading.get_ident()  # a weft thread took the GIL itself
    setter = threading.Timer(0.05, event.set)
    setter.start()
    mx.synchronize()  # waits with the GIL released, so the timer can fire
    assert y.item() == 1.0
    setter.join()


def test_synchronize_raises_an_async_failure_once():
    def bad(inputs, output):
        raise ArithmeticError("async kernel says no")

    y = mx.custom_kernel(bad, [mx.array([1.0])], (1,), mx.float32)
    mx.async_eval(y)
    with pytest.raises(RuntimeError, match="async kernel says no"):
        mx.synchronize()
    mx.synchronize()  # reported once
    with pytest.raises(RuntimeError, match="async kernel says no"):
        mx.eval(y)  # the array keeps its failure
    assert (mx.array([1.0]) + 1).item() == 2.0


def test_dropping_the_last_reference_never_waits():
    event = threading.Event()
    ran = []
    x = mx.array([1.0])
    y = mx.custom_kernel(blocking_kernel(event, ran), [x], (1,), mx.float32)
    t = threading.Thread(target=lambda: mx.eval(y))
    t.start()
    while not ran:
        time.sleep(0.001)
    start = time.monotonic()
    del y  # the evaluating thread still holds its own reference
    gc.collect()
    elapsed = time.monotonic() - start
    event.set()
    t.join(DEADLINE)
    assert not t.is_alive() and elapsed < DEADLINE / 2


def test_payload_destructors_drop_python_objects_from_weft_threads():
    class Kernel:
        def __call__(self, inputs, output):
            np.frombuffer(output, dtype=np.float32)[:] = 7.0

    refs = []
    for _ in range(50):
        k = Kernel()
        refs.append(weakref.ref(k))
        y = mx.custom_kernel(k, [], (4,), mx.float32)
        mx.async_eval(y)  # freed by the worker once computed and dropped
        del k, y
    mx.synchronize()
    gc.collect()
    for _ in range(200):
        if all(r() is None for r in refs):
            break
        time.sleep(0.01)
    assert all(r() is None for r in refs)


def test_single_flight_does_not_hang_on_a_user_lock():
    # Thread B holds L and calls the cold compiled f while thread A traces f,
    # and f's body takes L. B's wait is bounded: it traces for itself.
    lock = threading.RLock()
    a_tracing = threading.Event()
    traced_by = []

    def f(x):
        traced_by.append(threading.current_thread().name)
        if threading.current_thread().name == "A":
            a_tracing.set()
        with lock:
            return x * 3

    cf = mx.compile(f)
    previous = mx.get_compile_wait_timeout()
    mx.set_compile_wait_timeout(0.2)
    results = {}
    try:
        with lock:
            a = threading.Thread(name="A", target=lambda: results.__setitem__("A", cf(mx.array(1.0)).item()))
            a.start()
            assert a_tracing.wait(DEADLINE)
            results["B"] = cf(mx.array(2.0)).item()  # B: this thread, holding L
        a.join(DEADLINE)
    finally:
        mx.set_compile_wait_timeout(previous)
    assert not a.is_alive()
    assert results == {"A": 3.0, "B": 6.0}
    stats = mx.compile_stats(cf)
    assert stats["traces"] == 2 and stats["timeout_traces"] == 1
    assert cf(mx.array(4.0)).item() == 12.0 and mx.compile_stats(cf)["traces"] == 2


def test_threads_evaluating_private_graphs_all_finish():
    errors = []

    def work(seed):
        try:
            x = mx.random.normal((64, 64), key=mx.random.key(seed))
            for _ in range(20):
                x = mx.tanh(x @ x.T * 0.01)
            mx.eval(x)
            assert x.shape == (64, 64)
        except Exception as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    assert not any(t.is_alive() for t in threads) and not errors


def test_streams_from_any_thread():
    s = mx.new_stream(mx.cpu)
    out = {}

    def use():
        with mx.stream(s):
            out["v"] = (mx.ones((3,)) * 2).sum().item()
        out["other"] = mx.add(mx.ones((2,)), 1, stream=s).tolist()

    t = threading.Thread(target=use)
    t.start()
    t.join(DEADLINE)
    assert out == {"v": 6.0, "other": [2.0, 2.0]}
    mx.synchronize(s)
    with pytest.raises(ValueError):
        mx.add(1, 2, stream=mx.Device(mx.gpu, 0))


def test_thread_local_streams_and_thread_defaults():
    """MLX's per-thread stream functions: a ThreadLocalStream gives each
    thread a stream of its own (released when the thread ends), and
    set_default_stream changes only the calling thread's default."""
    process_default = mx.default_stream(mx.cpu)
    streams_before = mx._core._stream_count()
    tls = mx.new_thread_local_stream(mx.cpu)
    assert repr(tls).startswith("ThreadLocalStream(Device(cpu, 0), ") and tls == tls
    barrier = threading.Barrier(2, timeout=DEADLINE)
    seen = {}

    def use(i):
        with mx.stream(tls):
            mine = mx._core._current_stream()
            barrier.wait()  # both threads hold their streams at once
            y = mx.arange(10) * (i + 1)
            z = mx.add(y, 1, stream=tls)  # stream= takes it too
            assert mx._core._current_stream() == mine
            seen[i] = (mine, z.tolist())

    threads = [threading.Thread(target=use, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    (a, za), (b, zb) = seen[0], seen[1]
    assert a != b and process_default not in (a, b)
    assert za == [k + 1 for k in range(10)] and zb == [2 * k + 1 for k in range(10)]
    del seen, a, b
    gc.collect()
    assert mx._core._stream_count() == streams_before  # ended with their threads

    s = mx.new_stream(mx.cpu)
    other = {}

    def set_here():
        mx.set_default_stream(s)
        other["default"] = mx.default_stream(mx.cpu)
        other["current"] = mx._core._current_stream()
        other["value"] = (mx.ones((3,)) + 1).tolist()  # runs on s
        mx.clear_streams()
        other["after"] = mx.default_stream(mx.cpu)

    t = threading.Thread(target=set_here)
    t.start()
    t.join(DEADLINE)
    assert other == {"default": s, "current": s, "value": [2.0, 2.0, 2.0],
                     "after": process_default}
    assert mx.default_stream(mx.cpu) == process_default  # this thread's is untouched
    assert mx.new_thread_unsafe_stream(mx.cpu) != s
    assert mx.set_wired_limit(1 << 20) == 0
    with pytest.raises(TypeError):
        mx.set_default_stream(3)


def run_python(code, timeout):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_exit_with_work_in_flight_is_clean():
    code = """
        import sys, threading
        import numpy as np
        import weft as mx

        def slow(inputs, output):
            import time
            time.sleep(0.05)
            np.frombuffer(output, dtype=np.float32)[:] = 1.0

        kept = [mx.custom_kernel(slow, [], (8,), mx.float32) for _ in range(20)]
        mx.async_eval(*kept)
        GLOBAL = mx.ones((1000, 1000)) @ mx.ones((1000, 1000))

        def spin():
            while True:
                mx.eval(mx.tanh(mx.ones((256, 256)) * 2).sum())

        threading.Thread(target=spin, daemon=True).start()
        cf = mx.compile(lambda x: x + 1)
        cf(mx.array(1.0))
        sys.exit(7)
    """
    for _ in range(3):
        done = run_python(code, DEADLINE * 3)
        assert done.returncode == 7, done.stderr
        assert "Fatal" not in done.stderr and "Segmentation" not in done.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_while_threads_evaluate():
    code = """
        import os, threading, warnings
        import weft as mx
        warnings.simplefilter("ignore", DeprecationWarning)
        stop = threading.Event()
        # GCC 12's AddressSanitizer does not lock its allocator across fork:
        # a thread inside malloc at that instant can hang the child's next
        # malloc of that size (tests/fork_scenario.h). Under ASan the
        # spinners pause between evaluations while the main thread forks.
        asan = "libasan" in os.environ.get("LD_PRELOAD", "")
        resume = threading.Event()
        resume.set()
        paused = threading.Semaphore(0)

        def spin():
            while not stop.is_set():
                if not resume.is_set():
                    paused.release()
                    resume.wait()
                mx.eval((mx.ones((128, 128)) @ mx.ones((128, 128))).sum())

        threads = [threading.Thread(target=spin) for _ in range(2)]
        for t in threads:
            t.start()
        for _ in range(5):
            if asan:
                resume.clear()
                for _ in threads:
                    paused.acquire()
            pid = os.fork()
            resume.set()
            if pid == 0:
                value = (mx.arange(10) * 2).sum().item()
                os._exit(0 if value == 90 else 3)
            _, status = os.waitpid(pid, 0)
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        stop.set()
        for t in threads:
            t.join()
        print("ok")
    """
    done = run_python(code, DEADLINE * 3)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr


def test_the_readme_example_runs():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "quickstart.py")
    done = subprocess.run([sys.executable, path], capture_output=True, text=True,
                          timeout=DEADLINE * 3)
    assert done.returncode == 0, done.stderr
    assert "'traces': 1" in done.stdout
