"""Issue 14 item 6 for a peer: a freshly compiled function (the served MLP of
suite_threads.c, batch 32; jax.jit, mx.compile) called for the first time by
8 Python threads at once, and by 1: the wall time until all have their
checked result, and how many times the Python body ran (a counter in the
traced function: each run is a trace). NumPy has no compiler.

    python first_call.py numpy|jax|mlx
"""
import threading
import time

import numpy as np

import common
import funcs

fw = common.framework_from_argv()
common.versions(fw)
o = funcs.Ops(fw)
w = funcs.serve_weights()
wd = [o.array(a) for a in w]
xs = [common.uniform((32, 784), 100 + i, -3.0, 3.0) for i in range(8)]
xd = [o.array(a) for a in xs]
refs = [funcs.mlp_serve_ref(a, *w) for a in xs]

for threads in (1, 8):
    case = f"first_call/mlp_b32_{threads}t"
    if fw == "numpy":
        common.record(case, "numpy", threads, check="not run: NumPy has no compiler")
        continue
    impl = "jax-jit" if fw == "jax" else "mlx-compiled"
    times, most_traces, problem = [], 0, None
    for _ in range(common.reps(5)):
        counter = {"runs": 0}
        count_lock = threading.Lock()

        def body(x, w1, b1, w2, b2):
            with count_lock:
                counter["runs"] += 1
            return funcs.mlp_serve(x, w1, b1, w2, b2, o)
        if fw == "jax":
            import jax
            f = jax.jit(body)
        else:
            import mlx.core as mx
            f = mx.compile(body)
        barrier = threading.Barrier(threads)
        began, ended, outs = [0.0] * threads, [0.0] * threads, [None] * threads

        def work(i):
            barrier.wait()
            began[i] = time.perf_counter()
            try:
                y = f(xd[i], *wd)
                o.eval(y)
                outs[i] = np.asarray(y)
            except Exception as e:  # reported below
                outs[i] = e
            ended[i] = time.perf_counter()

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        for i in range(threads):
            if isinstance(outs[i], Exception):
                problem = f"thread {i}: {type(outs[i]).__name__}: {outs[i]}"
            elif common.mismatch(outs[i], refs[i], 1e-3, 1e-4):
                problem = f"thread {i}: {common.mismatch(outs[i], refs[i], 1e-3, 1e-4)}"
        times.append(max(ended) - min(began))
        most_traces = max(most_traces, counter["runs"])
    common.record(case, impl, threads, times, check=problem or "ok",
                  note=f"at most {most_traces} trace(s) (Python body runs) per function")
    common.value(case, impl, "traces", most_traces)
