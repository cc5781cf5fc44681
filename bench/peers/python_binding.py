"""The Python binding's per-call overhead beside MLX's, in one process run:

    python bench/peers/python_binding.py [--threads]

Both frameworks are imported under the same name (`mx`) and timed with the
same code, best of 7 repetitions:
  add_eval    a small add of two 16-float arrays and eval
  item        item() of an evaluated 0-d array
  compiled10  a compiled 10-op element-wise chain on 16 floats, then eval
  graph1000   building a 1,000-node lazy chain (no evaluation)
With --threads: two threads each evaluating a private chain of small ops
(run under WEFT_NUM_THREADS=1 so only the Python threads parallelize): the
speedup of 2 threads over 1, which needs every wait to release the GIL.
weft is imported from the installed wheel (make py-test installs it into
build/py-venv); MLX from the interpreter's environment when it has it.
"""
import importlib
import os
import sys
import threading
import time


def best_of(fn, reps=7):
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_module(mx, n=2000):
    a = mx.array([float(i) for i in range(16)])
    b = mx.array([1.0] * 16)
    mx.eval(a, b)
    s = mx.array(3.0)
    mx.eval(s)

    def add_eval():
        for _ in range(n):
            mx.eval(a + b)

    def item():
        for _ in range(n):
            s.item()

    def chain(x):
        y = x * 1.5 + 0.25
        y = mx.tanh(y) * y
        y = mx.exp(-y * y) + y
        y = mx.maximum(y, 0.1) - 0.05
        return y * y

    compiled = mx.compile(chain)
    mx.eval(compiled(a))

    def compiled10():
        for _ in range(n):
            mx.eval(compiled(a))

    def graph1000():
        for _ in range(n // 100):
            y = a
            for _ in range(1000):
                y = y + 1.0
            del y

    return {
        "add_eval": best_of(add_eval) / n * 1e6,
        "item": best_of(item) / n * 1e6,
        "compiled10": best_of(compiled10) / n * 1e6,
        "graph1000": best_of(graph1000) / (n // 100) * 1e6,
    }


def thread_scaling(mx, seconds_per=0.0):
    def work(rounds):
        x = mx.ones((65536,))
        for _ in range(rounds):
            y = x
            for _ in range(20):
                y = mx.tanh(y * 1.01 + 0.01)
            mx.eval(y)

    rounds = 20
    one = best_of(lambda: work(rounds), 3)

    def two():
        ts = [threading.Thread(target=work, args=(rounds,)) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    both = best_of(two, 3)
    return one, both, 2 * one / both


def main():
    modules = [("weft", importlib.import_module("weft"))]
    try:
        modules.append(("mlx", importlib.import_module("mlx.core")))
    except ImportError as exc:
        print(f"mlx: not importable here ({exc}); weft alone")
    print(f"machine: {os.cpu_count()} cores; WEFT_NUM_THREADS={os.environ.get('WEFT_NUM_THREADS', '')}")
    results = {name: bench_module(mod) for name, mod in modules}
    print(f"{'case':12} " + " ".join(f"{name + ' us':>10}" for name, _ in modules)
          + ("  weft/mlx" if len(modules) > 1 else ""))
    for case in results["weft"]:
        row = f"{case:12} " + " ".join(f"{results[name][case]:10.2f}" for name, _ in modules)
        if len(modules) > 1:
            row += f"  {results['weft'][case] / results['mlx'][case]:8.2f}x"
        print(row)
    if "--threads" in sys.argv:
        for name, mod in modules:
            one, both, speedup = thread_scaling(mod)
            print(f"{name}: 1 thread {one * 1e3:.1f} ms, 2 threads x the same work "
                  f"{both * 1e3:.1f} ms: scaling {speedup:.2f}x")


if __name__ == "__main__":
    main()
