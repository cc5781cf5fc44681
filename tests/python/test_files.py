"""mx.load / mx.save / mx.savez / mx.savez_compressed / mx.save_gguf / mx.save_safetensors.
NumPy's own .npy/.npz reader and writer and the `gguf` package (llama.cpp's
Python writer and its dequantizers) are the references; corrupt files raise
ValueError."""
import io
import os

import numpy as np
import pytest

import weft as mx

try:
    import gguf
except ImportError:
    gguf = None

DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64")


def sample(dtype, shape=(3, 4)):
    v = np.arange(np.prod(shape)).reshape(shape) % 5
    return (v - 1).astype(dtype) if dtype not in ("bool",) and not dtype.startswith("uint") else v.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_npy_both_ways(tmp_path, dtype):
    a = sample(dtype)
    mx.save(tmp_path / "w", mx.array(a))
    np.testing.assert_array_equal(np.load(tmp_path / "w.npy"), a)
    np.save(tmp_path / "n.npy", a)
    got = mx.load(tmp_path / "n.npy")
    assert got.dtype == getattr(mx, dtype if dtype != "bool" else "bool_")
    np.testing.assert_array_equal(np.array(got), a)


def test_npy_fortran_big_endian_and_scalars(tmp_path):
    a = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    np.save(tmp_path / "f.npy", a)
    np.testing.assert_array_equal(np.array(mx.load(tmp_path / "f.npy")), a)
    b = np.arange(6, dtype=">i4").reshape(2, 3)
    np.save(tmp_path / "b.npy", b)
    np.testing.assert_array_equal(np.array(mx.load(tmp_path / "b.npy")), b)
    np.save(tmp_path / "s.npy", np.float32(2.5))
    assert mx.load(tmp_path / "s.npy").item() == 2.5


@pytest.mark.parametrize("compressed", (False, True))
def test_npz_both_ways(tmp_path, compressed):
    arrays = {f"a{i}": sample(d) for i, d in enumerate(DTYPES)}
    save = mx.savez_compressed if compressed else mx.savez
    save(tmp_path / "w", mx.array(arrays["a1"]), **{k: mx.array(v) for k, v in arrays.items()})
    with np.load(tmp_path / "w.npz") as f:
        np.testing.assert_array_equal(f["arr_0"], arrays["a1"])
        for k, v in arrays.items():
            np.testing.assert_array_equal(f[k], v)
    (np.savez_compressed if compressed else np.savez)(tmp_path / "n.npz", **arrays)
    got = mx.load(tmp_path / "n.npz")
    assert sorted(got) == sorted(arrays)
    for k, v in arrays.items():
        np.testing.assert_array_equal(np.array(got[k]), v)


@pytest.mark.parametrize("shape", ((0,), (0, 3), (3, 0), (2, 0, 4)))
def test_empty_arrays_and_file_objects(tmp_path, shape):
    mx.save(tmp_path / "e.npy", mx.zeros(shape))
    assert mx.load(tmp_path / "e.npy").shape == shape and np.load(tmp_path / "e.npy").shape == shape
    with open(tmp_path / "f.npy", "wb") as f:
        mx.save(f, mx.ones(shape))
    with open(tmp_path / "f.npy", "rb") as f:
        assert mx.load(f, stream=mx.cpu).shape == shape
    with open(tmp_path / "z.npz", "wb") as f:
        mx.savez(f, a=mx.ones(shape), b=mx.ones((2,)))
    with open(tmp_path / "z.npz", "rb") as f:
        got = mx.load(f)
    assert got["a"].shape == shape and got["b"].tolist() == [1.0, 1.0]


def test_corrupt_files_raise_value_error(tmp_path):
    np.save(tmp_path / "a.npy", np.ones((4, 4), np.float32))
    np.savez_compressed(tmp_path / "a.npz", x=np.ones((8, 8)))
    for name in ("a.npy", "a.npz"):
        data = (tmp_path / name).read_bytes()
        for cut in (5, len(data) // 2, len(data) - 1):
            (tmp_path / ("cut_" + name)).write_bytes(data[:cut])
            with pytest.raises(ValueError):
                mx.load(tmp_path / ("cut_" + name))
    with pytest.raises(OSError):
        mx.load(tmp_path / "missing.npy")
    with pytest.raises(ValueError):
        mx.save(tmp_path / "bf", mx.ones((2,), dtype=mx.bfloat16))


def test_gguf_round_trip_with_metadata(tmp_path):
    arrays = {"tok.weight": mx.array(sample("float32")), "h": mx.array(sample("float16")),
              "b": mx.ones((2, 3), dtype=mx.bfloat16)}
    meta = {"general.name": "tiny", "tokens": ["a", "bc", ""], "n": mx.array(7, dtype=mx.uint32),
            "scores": mx.array([0.5, 1.5])}
    mx.save_gguf(tmp_path / "m.gguf", arrays, meta)
    got, got_meta = mx.load(tmp_path / "m.gguf", return_metadata=True)
    for k, v in arrays.items():
        assert got[k].dtype == v.dtype
        np.testing.assert_array_equal(np.array(got[k].astype(mx.float32)), np.array(v.astype(mx.float32)))
    assert got_meta["general.name"] == "tiny" and got_meta["tokens"] == ["a", "bc", ""]
    assert got_meta["n"].item() == 7 and got_meta["scores"].tolist() == [0.5, 1.5]


@pytest.mark.skipif(gguf is None, reason="the gguf package is not importable (pip install gguf)")
def test_gguf_written_by_the_gguf_package(tmp_path):
    rng = np.random.default_rng(0)
    f32 = rng.standard_normal((4, 64)).astype(np.float32)
    f16 = rng.standard_normal((3, 32)).astype(np.float16)
    w = gguf.GGUFWriter(str(tmp_path / "g.gguf"), "llama")
    w.add_uint32("llama.block_count", 2)
    w.add_string("general.name", "from-gguf")
    w.add_array("tokenizer.ggml.tokens", ["<s>", "x"])
    w.add_tensor("f32.weight", f32)
    w.add_tensor("f16.weight", f16)
    quantized = {}
    for qtype in (gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.Q4_0,
                  gguf.GGMLQuantizationType.Q4_1):
        try:
            q = gguf.quants.quantize(f32, qtype)
        except (NotImplementedError, AttributeError):
            continue
        name = f"{qtype.name.lower()}.weight"
        w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qtype)
        quantized[name] = (qtype, gguf.quants.dequantize(q, qtype))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    got, meta = mx.load(tmp_path / "g.gguf", return_metadata=True)
    np.testing.assert_array_equal(np.array(got["f32.weight"]), f32)
    np.testing.assert_array_equal(np.array(got["f16.weight"]), f16)
    assert meta["general.name"] == "from-gguf" and meta["tokenizer.ggml.tokens"] == ["<s>", "x"]
    assert meta["llama.block_count"].item() == 2
    assert quantized, "the gguf package quantized nothing"
    for name, (qtype, want) in quantized.items():
        prefix = name[: -len(".weight")]
        bits = 8 if qtype == gguf.GGMLQuantizationType.Q8_0 else 4
        d = mx.dequantize(got[name], got[prefix + ".scales"], got[prefix + ".biases"], 32, bits)
        # weft rounds code * scale, then the sum, to float16 (MLX's layout)
        np.testing.assert_allclose(np.array(d.astype(mx.float32)), want, rtol=2e-3, atol=2e-3 * np.abs(want).max())


try:
    import mlx.core as mlx_core
except ImportError:
    mlx_core = None


@pytest.mark.skipif(mlx_core is None, reason="mlx is not importable (pip install mlx mlx-cpu)")
def test_gguf_and_npz_against_mlx(tmp_path):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    h = np.arange(6, dtype=np.float16).reshape(2, 3)
    mlx_core.save_gguf(str(tmp_path / "m.gguf"), {"a": mlx_core.array(a), "h": mlx_core.array(h)},
                       {"name": "x", "toks": ["p", "q"], "n": mlx_core.array(3, dtype=mlx_core.uint32)})
    got, meta = mx.load(tmp_path / "m.gguf", return_metadata=True)
    np.testing.assert_array_equal(np.array(got["a"]), a)
    np.testing.assert_array_equal(np.array(got["h"]), h)
    assert meta["name"] == "x" and meta["toks"] == ["p", "q"] and meta["n"].item() == 3
    mx.save_gguf(tmp_path / "w.gguf", {"a": mx.array(a)}, {"name": "y", "toks": ["r"]})
    theirs, their_meta = mlx_core.load(str(tmp_path / "w.gguf"), return_metadata=True)
    np.testing.assert_array_equal(np.array(theirs["a"]), a)
    assert their_meta["name"] == "y" and their_meta["toks"] == ["r"]
    mx.savez_compressed(tmp_path / "w", x=mx.array(a))
    np.testing.assert_array_equal(np.array(mlx_core.load(str(tmp_path / "w.npz"))["x"]), a)


def test_safetensors_metadata_file_objects_and_fp8(tmp_path):
    path = tmp_path / "m.safetensors"
    mx.save_safetensors(path, {"w": mx.ones((2, 2))}, {"testing": "test", "format": "mlx"})
    arrays, meta = mx.load(path, return_metadata=True)
    assert meta == {"testing": "test", "format": "mlx"}
    np.testing.assert_array_equal(np.array(arrays["w"]), np.ones((2, 2), np.float32))
    assert mx.load(str(path), return_metadata=True)[1] == meta
    long_value = "x" * 10000 + '"\\ é'  # longer than any fixed buffer, escapes, UTF-8
    mx.save_safetensors(path, {"w": mx.ones(1)}, {"long": long_value})
    assert mx.load(path, return_metadata=True)[1] == {"long": long_value}
    mx.save_safetensors(path, {"w": mx.ones(1)})
    assert mx.load(path, return_metadata=True)[1] == {"format": "weft"}
    for bad in ({"testing": 0}, {1: "x"}, ["format", "mlx"]):
        with pytest.raises(TypeError):
            mx.save_safetensors(path, {"w": mx.ones(1)}, bad)
    assert mx.load(path, return_metadata=True)[1] == {"format": "weft"}  # not overwritten
    mx.save_safetensors(tmp_path / "plain", {"w": mx.ones(1)})  # the suffix appended
    assert (tmp_path / "plain.safetensors").exists()
    buffer = io.BytesIO()
    mx.save_safetensors(buffer, {"w": mx.arange(3)}, {"k": "v"})
    buffer.seek(0)
    assert mx.load(buffer, format="safetensors")["w"].tolist() == [0, 1, 2]
    # F8_E4M3 bytes load as uint8 (mx.from_fp8 converts), as MLX loads them
    header = b'{"__metadata__":{"n":3,"s":"t"},"f":{"dtype":"F8_E4M3","shape":[4],' \
             b'"data_offsets":[0,4]}}'
    path.write_bytes(len(header).to_bytes(8, "little") + header + bytes([0x38, 0xB8, 0x7E, 0]))
    arrays, meta = mx.load(path, return_metadata=True)
    assert meta == {"s": "t"}  # values that are not strings are skipped
    assert arrays["f"].dtype == mx.uint8
    assert mx.from_fp8(arrays["f"], dtype=mx.float32).tolist() == [1.0, -1.0, 448.0, 0.0]
