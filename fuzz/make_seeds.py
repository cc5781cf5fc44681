#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (fuzz/corpus/<target>/seed-*).

api: pseudo-random byte strings (each two bytes are one decision of
tests/unit/test_fuzz_api.c, so any bytes are a program); fixed seeds keep the
files reproducible. safetensors: valid files of every dtype weft reads, an
empty one, one with __metadata__, and a few broken on purpose (offsets past
the end, a header length past the file, bad JSON). npy / npz: files NumPy
writes (every dtype weft reads, big-endian, Fortran order, version 2.0, 0-d,
empty, stored and deflated archives) and a few broken ones. gguf: files the
`gguf` package (llama.cpp's writer) writes: every metadata value type, F32 /
F16 / Q8_0 / Q4_0 / Q4_1 tensors, a custom alignment, version 2, broken
ones. wordpiece: a vocab.txt, a NUL, a text to encode (accents, CJK,
control bytes, broken UTF-8, long words), and vocabs refused on purpose.
bert_config: config.json as Hugging Face writes it, and broken ones. npy,
npz and gguf need NumPy and gguf (build/py-venv has both); only
the files they write are in the repository. Inputs that once failed are
kept beside them under names of their own (crash-*), not written here.
"""
import io
import json
import os
import random
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def api_seeds():
    for i, size in enumerate([16, 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048]):
        rng = random.Random(1000 + i)
        write("api", "seed-%02d" % i, bytes(rng.randrange(256) for _ in range(size)))


def safetensors(tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def safetensors_seeds():
    f32 = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
    write("safetensors", "seed-f32", safetensors({"w": ("F32", [2, 3], f32)}))
    write("safetensors", "seed-mixed", safetensors({
        "a": ("F16", [2], struct.pack("<2e", 1.5, -2)),
        "b": ("BF16", [1], b"\x80\x3f"),
        "c": ("I32", [3], struct.pack("<3i", 7, -8, 9)),
        "d": ("I64", [1], struct.pack("<q", -1)),
        "e": ("U8", [4], b"\x00\x01\x02\xff"),
        "f": ("BOOL", [2], b"\x01\x00"),
        "g": ("F64", [], struct.pack("<d", 3.25)),
    }, metadata={"format": "pt"}))
    write("safetensors", "seed-empty", safetensors({}))
    write("safetensors", "seed-zero-size", safetensors({"z": ("F32", [0, 3], b"")}))
    good = safetensors({"w": ("F32", [2, 3], f32)})
    write("safetensors", "seed-truncated", good[:-4])
    write("safetensors", "seed-header-too-long", struct.pack("<Q", 1 << 40) + good[8:])
    write("safetensors", "seed-bad-json", struct.pack("<Q", 8) + b'{"w": [}')
    bad = json.dumps({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 400]}}).encode()
    write("safetensors", "seed-offsets-past-end", struct.pack("<Q", len(bad)) + bad + f32)


def npy_bytes(array, version=None):
    import numpy as np
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, version=version, allow_pickle=False)
    return buf.getvalue()


def npy_seeds():
    import numpy as np
    rng = np.random.default_rng(0)
    f32 = rng.standard_normal((2, 3)).astype(np.float32)
    write("npy", "seed-f32", npy_bytes(f32))
    write("npy", "seed-i32-big-endian", npy_bytes(np.arange(6, dtype=">i4").reshape(3, 2)))
    write("npy", "seed-f64-fortran", npy_bytes(np.asfortranarray(rng.standard_normal((3, 2)))))
    write("npy", "seed-f16-scalar", npy_bytes(np.array(1.5, dtype=np.float16)))
    write("npy", "seed-bool", npy_bytes(np.array([True, False, True])))
    write("npy", "seed-c64-big-endian", npy_bytes(np.array([1 + 2j, -3j], dtype=">c8")))
    write("npy", "seed-u16-4d", npy_bytes(np.arange(16, dtype=np.uint16).reshape(2, 2, 2, 2)))
    write("npy", "seed-i8-empty", npy_bytes(np.zeros((0, 3), dtype=np.int8)))
    write("npy", "seed-u64-version2", npy_bytes(np.arange(4, dtype=np.uint64), version=(2, 0)))
    good = npy_bytes(f32)
    write("npy", "seed-truncated", good[:-5])
    write("npy", "seed-bad-descr", good.replace(b"<f4", b"<x4"))


def npz_bytes(compressed, **arrays):
    import numpy as np
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def npz_seeds():
    import numpy as np
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1, -2], dtype=">i2")
    write("npz", "seed-stored", npz_bytes(False, a=a, b=b))
    write("npz", "seed-deflated", npz_bytes(True, a=a, b=np.asfortranarray(a.T)))
    write("npz", "seed-empty", npz_bytes(False))
    write("npz", "seed-scalar-deflated", npz_bytes(True, s=np.array(2.5)))
    good = npz_bytes(False, a=a)
    write("npz", "seed-truncated", good[:-30])
    write("npz", "seed-bad-crc", good.replace(b"\x93NUMPY", b"\x93NUMPZ"))


def gguf_bytes(build, alignment=None):
    import gguf
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "seed.gguf")
        w = gguf.GGUFWriter(path, "llama")
        if alignment:
            w.add_custom_alignment(alignment)
        build(w, gguf)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with open(path, "rb") as f:
            return f.read()


def gguf_seeds():
    import numpy as np
    rng = np.random.default_rng(1)
    f32 = rng.standard_normal((2, 32)).astype(np.float32)

    def every_value_type(w, g):
        w.add_uint8("u8", 200)
        w.add_int8("i8", -3)
        w.add_uint16("u16", 60000)
        w.add_int16("i16", -300)
        w.add_uint32("u32", 7)
        w.add_int32("i32", -7)
        w.add_float32("f32", 0.5)
        w.add_bool("flag", True)
        w.add_uint64("u64", 1 << 40)
        w.add_int64("i64", -(1 << 40))
        w.add_float64("f64", 2.25)
        w.add_string("general.name", "seed")
        w.add_array("tokens", ["<s>", "a", ""])
        w.add_array("scores", [0.5, 1.5])
        w.add_tensor("f32.weight", f32)

    def tensors(w, g):
        w.add_tensor("f32.weight", f32)
        w.add_tensor("f16.weight", f32[:1].astype(np.float16))
        w.add_tensor("i32", np.arange(3, dtype=np.int32))
        for qtype in (g.GGMLQuantizationType.Q8_0, g.GGMLQuantizationType.Q4_0,
                      g.GGMLQuantizationType.Q4_1):
            q = g.quants.quantize(f32[:1], qtype)
            w.add_tensor(qtype.name.lower() + ".weight", q, raw_shape=q.shape, raw_dtype=qtype)

    def no_tensors(w, g):
        w.add_uint32("llama.block_count", 1)

    write("gguf", "seed-every-value-type", gguf_bytes(every_value_type))
    good = gguf_bytes(tensors)
    write("gguf", "seed-tensors", good)
    write("gguf", "seed-alignment-64", gguf_bytes(tensors, alignment=64))
    write("gguf", "seed-no-tensors", gguf_bytes(no_tensors))
    write("gguf", "seed-version-2", good[:4] + struct.pack("<I", 2) + good[8:])
    write("gguf", "seed-truncated", good[: len(good) // 2])


# Exported functions (src/compile/export_format.h). dtype numbers: weft.h.
F32, I32 = 6, 2


def wfn_desc(dtype, shape):
    return struct.pack("<BB", dtype, len(shape)) + b"".join(struct.pack("<q", d) for d in shape)


def wfn_string(s):
    return struct.pack("<I", len(s)) + s


def wfn_node(name, params, refs, dtype, shape):
    out = struct.pack("<H", len(name)) + name + struct.pack("<I", len(params)) + params
    out += struct.pack("<I", len(refs)) + b"".join(struct.pack("<BI", k, i) for k, i in refs)
    return out + wfn_desc(dtype, shape)


def wfn_trace(new_consts, inputs, const_refs, nodes, outputs, tag=b"", shapeless=False):
    body = struct.pack("<I", len(new_consts))
    for dtype, shape, raw in new_consts:
        body += wfn_desc(dtype, shape) + struct.pack("<Q", len(raw)) + raw
    body += struct.pack("<B", shapeless) + wfn_string(tag)
    body += struct.pack("<I", len(inputs)) + b"".join(wfn_desc(d, s) for d, s in inputs)
    body += struct.pack("<I", len(const_refs)) + b"".join(struct.pack("<I", i) for i in const_refs)
    body += struct.pack("<I", len(nodes)) + b"".join(nodes)
    body += struct.pack("<I", len(outputs)) + b"".join(struct.pack("<BI", k, i) for k, i in outputs)
    return struct.pack("<IQ", 0x45435254, len(body)) + body


def wfn_file(traces, metadata=b"", version=1):
    return (b"WEFTFN\r\n" + struct.pack("<I", version) + wfn_string(metadata) + b"".join(traces)
            + struct.pack("<I", 0x21444E45))


def export_seeds():
    INPUT, CONST, NODE = 0, 1, 2
    exp = wfn_trace([], [(F32, [3])], [], [wfn_node(b"exp", b"", [(INPUT, 0)], F32, [3])],
                    [(NODE, 0)])
    write("export", "seed-exp", wfn_file([exp], b'{"name": "exp"}'))
    # x (2, 3) + c (2, 3); sum over axis 1 (mask 0b10, keepdims false); transpose.
    c = (F32, [2, 3], struct.pack("<6f", 1, 2, 3, 4, 5, 6))
    add_sum = wfn_trace([c], [(F32, [2, 3])], [0], [
        wfn_node(b"add", b"", [(INPUT, 0), (CONST, 0)], F32, [2, 3]),
        wfn_node(b"sum", struct.pack("<QB", 2, 0), [(NODE, 0)], F32, [2]),
        wfn_node(b"transpose", struct.pack("<i", 2) + struct.pack("<32i", 1, 0, *[0] * 30),
                 [(NODE, 0)], F32, [3, 2]),
    ], [(NODE, 1), (NODE, 2)], tag=b'{"args": 1}')
    # A second trace reuses the pool's constant without writing it again.
    reuse = wfn_trace([], [], [0], [], [(CONST, 0)], tag=b'{"args": 0}')
    write("export", "seed-two-traces", wfn_file([add_sum, reuse]))
    # reshape to (-1,): ndim 1, shape, in_begin, in_end, follows_input.
    reshape = struct.pack("<i", 1) + struct.pack("<32q", -1, *[0] * 31) + bytes(64) + b"\x00"
    flat = wfn_trace([], [(I32, [2, 2])], [], [
        wfn_node(b"reshape", reshape, [(INPUT, 0)], I32, [4]),
        wfn_node(b"multiply", b"", [(NODE, 0), (NODE, 0)], I32, [4]),
    ], [(NODE, 1)])
    write("export", "seed-reshape", wfn_file([flat]))
    shapeless = wfn_trace([], [(F32, [2]), (F32, [1])], [], [
        wfn_node(b"add", b"", [(INPUT, 0), (INPUT, 1)], F32, [2]),
    ], [(NODE, 0), (INPUT, 1)], shapeless=True)
    write("export", "seed-shapeless", wfn_file([shapeless]))
    good = wfn_file([add_sum])
    write("export", "seed-truncated", good[: len(good) // 2])
    write("export", "seed-version-2", wfn_file([exp], version=2))
    write("export", "seed-unknown-primitive",
          wfn_file([wfn_trace([], [(F32, [3])], [], [wfn_node(b"frobnicate", b"", [(INPUT, 0)],
                                                              F32, [3])], [(NODE, 0)])]))
    write("export", "seed-wrong-shape",
          wfn_file([wfn_trace([], [(F32, [3])], [], [wfn_node(b"exp", b"", [(INPUT, 0)], F32,
                                                              [4])], [(NODE, 0)])]))
    write("export", "seed-empty", wfn_file([]))



def export_op_seeds():
    import weft as mx  # the package built from this tree

    x = mx.array([[0.5, -1.0, 2.0], [3.0, 0.25, -0.5]])
    idx = mx.array([[0, 2, 1], [1, 0, 2]])
    w = mx.array([[1.0, 0.0], [0.5, -1.0], [2.0, 1.0]])
    kernel = mx.ones((2, 2, 1))
    functions = {
        "shape-ops": lambda a: (mx.transpose(a).reshape(-1)[1:5:2],
                                mx.concatenate([a, a], axis=0), mx.pad(a, 1),
                                mx.broadcast_to(a[:, None], (2, 4, 3))),
        "reductions": lambda a: (mx.sum(a, axis=1), mx.max(a), mx.var(a, axis=0),
                                 mx.argmax(a, axis=1), mx.softmax(a, axis=-1),
                                 mx.cumsum(a, axis=0), mx.logsumexp(a)),
        "indexing": lambda a: (mx.take_along_axis(a, idx, axis=1), mx.take(a, idx),
                               a[idx[0]], mx.put_along_axis(a, idx, a, axis=1)),
        "linalg": lambda a: (a @ w, mx.addmm(mx.ones((2, 2)), a, w), mx.sort(a, axis=1),
                             mx.topk(a, 2, axis=1), mx.where(a > 0, a, -a)),
        "creation": lambda a: (mx.arange(4) + mx.zeros((4,), dtype=mx.int32), mx.eye(3) * a[0],
                               mx.linspace(0, 1, 3) + a, mx.tril(mx.ones((3, 3)))),
        "conv-norm": lambda a: (mx.conv1d(a[None, :, :1], kernel),
                                mx.fast.layer_norm(a, None, None, 1e-5),
                                mx.fast.rms_norm(a, mx.ones((3,)), 1e-5)),
        "random": lambda a: (mx.random.uniform(shape=(3,), key=mx.random.key(1)) + a,
                             mx.random.normal(shape=(2,))),
    }
    for name, fun in functions.items():
        for shapeless in (False, True):
            path = os.path.join(tempfile.mkdtemp(), "f.wfn")
            try:
                mx.export_function(path, fun, x, shapeless=shapeless)
            except (ValueError, NotImplementedError):
                continue  # an op shapeless export refuses
            with open(path, "rb") as f:
                write("export", "seed-weft-%s%s" % (name, "-shapeless" if shapeless else ""),
                      f.read())
            os.remove(path)


def wordpiece_seeds():
    """A vocab (its specials, whole words, ## pieces, punctuation, a
    non-ASCII entry), a NUL, then a text; and vocabs refused on purpose."""
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "quick", "brown", "fox",
             "play", "##ing", "##ed", "##s", "un", "##aff", "##able", "cafe", ",", ".", "!",
             "?", "'", "a", "b", "##b", "\u4e2d", "\u6587", "1", "##2", "##3"]
    text = "\n".join(vocab).encode() + b"\n"
    texts = [b"The quick brown fox, playing!", b"unaffable Caf\xc3\xa9s?", b"",
             b"\xe4\xb8\xad\xe6\x96\x87 mixed\twith\x01control\x7f",
             b"\xff\xfe broken \xc3 utf-8 \xed\xa0\x80 surrogate", b"a" * 150 + b" b" * 40,
             b"123 1,2.3 '' b'"]
    for i, t in enumerate(texts):
        write("wordpiece", "seed-%02d" % i, text + b"\0" + t)
    write("wordpiece", "seed-crlf", text.replace(b"\n", b"\r\n") + b"\0the fox")
    write("wordpiece", "seed-no-nul", text)
    write("wordpiece", "seed-no-sep", text.replace(b"[SEP]", b"[SEQ]") + b"\0the")
    write("wordpiece", "seed-long-line", text + b"x" * 1100 + b"\n\0the")


def bert_config_seeds():
    """config.json as Hugging Face writes BERT's, and broken ones."""
    good = {"architectures": ["BertModel"], "attention_probs_dropout_prob": 0.1,
            "hidden_act": "gelu", "hidden_size": 384, "initializer_range": 0.02,
            "intermediate_size": 1536, "layer_norm_eps": 1e-12,
            "max_position_embeddings": 512, "model_type": "bert", "num_attention_heads": 12,
            "num_hidden_layers": 6, "pad_token_id": 0, "position_embedding_type": "absolute",
            "torch_dtype": "float32", "transformers_version": "4.8.2", "type_vocab_size": 2,
            "use_cache": True, "vocab_size": 30522, "nested": {"a": [1, 2.5e-3, None, False]},
            "escaped": "quote \" back \\ \u00e9"}
    write("bert_config", "seed-good", json.dumps(good, indent=2).encode())
    write("bert_config", "seed-compact", json.dumps(good, separators=(",", ":")).encode())
    for name, change in [("relu", {"hidden_act": "relu"}),
                         ("relative", {"position_embedding_type": "relative_key"}),
                         ("heads", {"num_attention_heads": 7}), ("float", {"hidden_size": 384.5}),
                         ("negative", {"vocab_size": -1}), ("huge", {"vocab_size": 1e300})]:
        write("bert_config", "seed-" + name, json.dumps(dict(good, **change)).encode())
    write("bert_config", "seed-missing", b'{"hidden_size": 384}')
    write("bert_config", "seed-deep", b'{"x": ' + b"[" * 80 + b"]" * 80 + b"}")
    write("bert_config", "seed-truncated", json.dumps(good).encode()[:200])
    write("bert_config", "seed-empty", b"")


if __name__ == "__main__":
    api_seeds()
    safetensors_seeds()
    wordpiece_seeds()
    bert_config_seeds()
    export_seeds()
    try:
        export_op_seeds()
    except ImportError as e:
        print("make_seeds.py: no exported-function seeds from weft (%s)" % e)
    try:
        npy_seeds()
        npz_seeds()
        gguf_seeds()
    except ImportError as e:
        sys.exit("make_seeds.py: npy, npz and gguf seeds need NumPy and gguf (%s)" % e)
