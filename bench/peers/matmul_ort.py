"""Small-batch products against served weights: weft beside ONNX Runtime's
MatMul with the weight as a constant initializer (ORT packs such a weight
once, when the session is made), one thread each, CPU time, in one run.

Each figure is a chain of 8 products x @ W1 @ W2 ... (W alternately K x N
and N x K, eight distinct weights: 2.4 MB each for 384 x 1536, so they come
from L3 or memory as a served model's do) for the rows M of a serving batch
(16 ... 512) and the layer shapes of a BERT-small encoder. weft packs a
weight once, from its second product on (docs/API.md, Matrix products).

    PYTHONPATH=<a folder holding weft's package> build/bench-venv/bin/python \\
        bench/peers/matmul_ort.py [repeats = 5]

The bench venv (scripts/bench-setup.sh) has ONNX Runtime and onnx but not
weft: put the folder of the wheel that scripts/python-test.sh installs
(build/py-venv/lib/python3.*/site-packages holds it; link its weft folder
into an empty directory) on PYTHONPATH.
"""
import os
import sys
import time

os.environ["WEFT_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_session import one_thread_session  # noqa: E402

import weft as mx  # noqa: E402

SHAPES = [(384, 384), (384, 1536), (1536, 384)]
ROWS = [16, 32, 64, 128, 256, 512]


def ort_chain(weights):
    inits, nodes, prev = [], [], "x"
    for i, w in enumerate(weights):
        inits.append(numpy_helper.from_array(w, "w%d" % i))
        nodes.append(helper.make_node("MatMul", [prev, "w%d" % i], ["y%d" % i]))
        prev = "y%d" % i
    run = one_thread_session(
        "chain", nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m", weights[0].shape[0]])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["m", weights[-1].shape[1]])],
        inits)
    return lambda x: run(x=x)


def weft_chain(weights):
    held = [mx.array(w) for w in weights]

    def run(x):
        y = mx.array(x)
        for w in held:
            y = y @ w
        mx.eval(y)
        return y

    return run


def best_cpu_seconds(fn, x, calls, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(calls):
            fn(x)
        best = min(best, (time.process_time() - start) / calls)
    return best


def main():
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    rng = np.random.default_rng(0)
    load = ", ".join("%.2f" % v for v in os.getloadavg())
    print("# x @ W chains of 8 weights, one thread, CPU time, best of %d; GFLOP/s; load %s"
          % (repeats, load))
    print("%-12s %5s %10s %10s %9s" % ("K x N", "M", "ORT", "weft", "weft/ORT"))
    for k, n in SHAPES:
        weights = [(rng.standard_normal((k, n) if i % 2 == 0 else (n, k)) * 0.05)
                   .astype(np.float32) for i in range(8)]
        theirs, ours = ort_chain(weights), weft_chain(weights)
        for m in ROWS:
            x = rng.standard_normal((m, k)).astype(np.float32)
            if not np.allclose(np.array(ours(x)), theirs(x), rtol=1e-3, atol=1e-4):
                sys.exit("weft and ONNX Runtime disagree at %d x %d, M = %d" % (k, n, m))
            flops = 2.0 * m * k * n * 8
            calls = max(3, int(2e9 / flops))
            t_ort = best_cpu_seconds(theirs, x, calls, repeats)
            t_weft = best_cpu_seconds(ours, x, calls, repeats)
            print("%-12s %5d %10.1f %10.1f %9.2f" % ("%d x %d" % (k, n), m, flops / t_ort * 1e-9,
                                                      flops / t_weft * 1e-9, t_ort / t_weft),
                  flush=True)
    print("# load at the end: %s" % ", ".join("%.2f" % v for v in os.getloadavg()))


main()
