"""An ONNX Runtime session on one thread from a graph's parts, for the peer
scripts that set weft beside ONNX Runtime (matmul_ort.py, gelu_ort.py)."""
import onnxruntime as ort
from onnx import helper


def one_thread_session(name, nodes, inputs, outputs, initializers):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializers)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return lambda **feeds: session.run(None, feeds)[0]
