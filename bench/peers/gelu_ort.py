"""GELU (the erf form) on a 512 x 1536 float32 activation, one thread, CPU
time: weft's nn.gelu (eager and compiled) beside ONNX Runtime's subgraph of
an exported BERT (Mul, Erf, Add, Mul, Mul). Nanoseconds per element, best
of 5 blocks of 200 calls.

    PYTHONPATH=<a folder holding weft's package> build/bench-venv/bin/python \\
        bench/peers/gelu_ort.py

(See bench/peers/matmul_ort.py for PYTHONPATH.)
"""
import math
import os
import sys
import time

os.environ["WEFT_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_session import one_thread_session  # noqa: E402

import weft as mx  # noqa: E402
import weft.nn as nn  # noqa: E402

SHAPE = (512, 1536)


def ort_gelu():
    def const(name, value):
        return numpy_helper.from_array(np.asarray(value, np.float32), name)

    nodes = [helper.make_node("Mul", ["x", "rsqrt2"], ["scaled"]),
             helper.make_node("Erf", ["scaled"], ["erf"]),
             helper.make_node("Add", ["erf", "one"], ["shifted"]),
             helper.make_node("Mul", ["x", "half"], ["halved"]),
             helper.make_node("Mul", ["halved", "shifted"], ["y"])]
    run = one_thread_session(
        "gelu", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(SHAPE))],
        [const("rsqrt2", 1 / math.sqrt(2)), const("one", 1.0), const("half", 0.5)])
    return lambda x: run(x=x)


def best_ns_per_element(fn, elements, calls=200, repeats=5):
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.process_time() - start) / calls)
    return best / elements * 1e9


def main():
    x = (np.random.default_rng(0).standard_normal(SHAPE) * 1.5 - 0.5).astype(np.float32)
    theirs = ort_gelu()
    wx = mx.array(x)
    compiled = mx.compile(nn.gelu)
    if not np.allclose(np.array(nn.gelu(wx)), theirs(x), rtol=1e-5, atol=1e-6):
        raise SystemExit("weft and ONNX Runtime disagree")
    t_ort = best_ns_per_element(lambda: theirs(x), x.size)
    t_eager = best_ns_per_element(lambda: mx.eval(nn.gelu(wx)), x.size)
    t_compiled = best_ns_per_element(lambda: mx.eval(compiled(wx)), x.size)
    print("# gelu of %d x %d float32, one thread, CPU time; load %s" %
          (SHAPE[0], SHAPE[1], ", ".join("%.2f" % v for v in os.getloadavg())))
    print("ns/element: ONNX Runtime %.2f, weft %.2f (compiled %.2f); weft / ORT time %.2f" %
          (t_ort, t_eager, t_compiled, t_eager / t_ort))


main()
