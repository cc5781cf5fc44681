"""Issue 14 item 5 for a peer: 1, 2, 4 and 8 Python threads calling the same
compiled function (jax.jit, mx.compile; NumPy runs the ops) on private
inputs, freely and serialized behind one threading.Lock, for the workloads
of suite_threads.c (call10_1024, serve_mlp_b1, serve_mlp_b32). Peers have no
per-thread stream here: their free-running case is reported beside weft's
default-stream one. Every output is checked against the value computed for
the thread's input beforehand (itself checked against float64).

    python threads.py numpy|jax|mlx [seconds per single-thread run = 0.1]
"""
import sys
import threading
import time

import numpy as np

import common
import funcs

fw = common.framework_from_argv()
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 0.1
common.versions(fw)
o = funcs.Ops(fw)
impl = {"numpy": "numpy", "jax": "jax-jit", "mlx": "mlx-compiled"}[fw]


def compiled(f):
    if fw == "jax":
        import jax
        return jax.jit(f)
    if fw == "mlx":
        import mlx.core as mx
        return mx.compile(f)
    return f


def run_threads(call, inputs, expected, threads, calls, lock):
    """Wall seconds (first thread's start to last one's end) and bad calls."""
    barrier = threading.Barrier(threads)
    began, ended, bad = [0.0] * threads, [0.0] * threads, [0] * threads

    def work(i):
        barrier.wait()
        began[i] = time.perf_counter()
        for _ in range(calls):
            try:
                if lock:
                    with lock:
                        y = np.asarray(call(inputs[i]))
                else:
                    y = np.asarray(call(inputs[i]))
                if not np.allclose(y, expected[i], rtol=1e-4, atol=1e-5):
                    bad[i] += 1
            except Exception:  # counted: a peer that fails under threads says so
                bad[i] += 1
        ended[i] = time.perf_counter()

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return max(ended) - min(began), sum(bad)


def measure(name, f, inputs, refs, atol):
    call_f = compiled(f)

    def call(a):
        y = call_f(a)
        o.eval(y)
        return y
    expected = [np.asarray(call(a)) for a in inputs]
    problem = None
    for i, (e, r) in enumerate(zip(expected, refs)):
        bad = common.mismatch(e, r, atol, 1e-4)
        if bad:
            problem = f"thread input {i}: {bad}"
    calls = 0
    if not problem:
        t, _ = run_threads(call, inputs, expected, 1, 20, None)
        calls = max(5, min(5000, int(seconds / (t / 20))))
    for mode, lock in (("default_stream", None), ("serialized", threading.Lock())):
        for threads in (1, 2, 4, 8):
            case = f"threads/{name}_{mode}"
            if problem:
                common.record(case, impl, threads, check=problem)
                continue
            times, check = [], "ok"
            for _ in range(min(3, common.reps(3))):
                t, bad = run_threads(call, inputs, expected, threads, calls, lock)
                if bad:
                    check = f"{bad} of {threads * calls} calls failed or gave a wrong answer"
                    break
                times.append(t)
            common.record(case, impl, threads, times, items=threads * calls, check=check,
                          note="free-running threads" if lock is None else "one lock")


xs = [common.uniform((1024,), 100 + i, -3.0, 3.0) for i in range(8)]
measure("call10_1024", lambda a: funcs.call10(a, o), [o.array(a) for a in xs],
        [funcs.call10_ref(a) for a in xs], 3e-3)
w = funcs.serve_weights()
wd = [o.array(a) for a in w]
for batch in (1, 32):
    xs = [common.uniform((batch, 784), 100 + i, -3.0, 3.0) for i in range(8)]
    measure(f"serve_mlp_b{batch}", lambda a: funcs.mlp_serve(a, *wd, o),
            [o.array(a) for a in xs], [funcs.mlp_serve_ref(a, *w) for a in xs], 1e-3)
