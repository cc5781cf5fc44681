"""export_function / import_function / exporter / export_to_dot."""
import gc
import io
import threading
import weakref

import numpy as np
import pytest

import weft as mx


def test_round_trip_positional_and_keyword(tmp_path):
    path = str(tmp_path / "f.wfn")

    def f(x, y, scale=None):
        out = mx.matmul(x, y) + 1
        if scale is not None:
            out = out * scale
        return out, mx.sum(x, axis=1)

    x = mx.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = mx.array(np.ones((3, 2), dtype=np.float32))
    s = mx.array([2.0, 3.0])
    mx.export_function(path, f, x, y, scale=s)
    g = mx.import_function(path)
    out, total = g(x, y, scale=s)
    want, want_total = f(x, y, scale=s)
    assert np.array_equal(np.array(out), np.array(want))
    assert total.tolist() == [3.0, 12.0]
    # The same inputs as a tuple and a dict.
    out2 = g((x, y), {"scale": s})[0]
    assert np.array_equal(np.array(out2), np.array(want))
    with pytest.raises(ValueError):
        g(x, y)  # exported with the keyword
    with pytest.raises(ValueError):
        g(x, mx.ones((4, 2)), scale=s)  # another shape
    with pytest.raises(ValueError):
        g(x, 1.0, scale=s)  # not an array


def test_every_dtype_and_captured_constant(tmp_path):
    path = str(tmp_path / "d.wfn")
    for dtype in [mx.bool_, mx.uint8, mx.int8, mx.int16, mx.int32, mx.int64, mx.uint16,
                  mx.uint32, mx.uint64, mx.float16, mx.bfloat16, mx.float32, mx.float64,
                  mx.complex64]:
        c = mx.array([1, 0, 1]).astype(dtype)
        mx.eval(c)

        def f(x):
            return mx.concatenate([x, c])

        x = mx.array([0, 1, 1]).astype(dtype)
        mx.export_function(path, f, x)
        (out,) = mx.import_function(path)(x)
        assert out.dtype == dtype
        assert mx.array_equal(out, f(x)).item()


def test_exporter_traces_and_shapeless(tmp_path):
    path = str(tmp_path / "s.wfn")

    def f(*xs):
        return sum(xs) * 2

    with mx.exporter(path, f, shapeless=True) as ex:
        ex(mx.array([1.0]))
        ex(mx.array([1.0]), mx.array([2.0]))
    with pytest.raises(RuntimeError):
        ex(mx.array([1.0]))  # closed
    g = mx.import_function(path)
    assert g(mx.array([1.0, 2.0, 3.0]))[0].tolist() == [2.0, 4.0, 6.0]
    assert g(mx.array([1.0, 2.0]), mx.array([3.0, 4.0]))[0].tolist() == [8.0, 12.0]
    with pytest.raises(ValueError):
        g(mx.array([[1.0]]))  # another rank



def test_shapeless_gradient_of_concatenate_and_pad_exports(tmp_path):
    import numpy as np

    # the cotangent's cuts (crop_like) are written and replayed at each call's sizes
    def loss(a, b):
        y = mx.pad(mx.concatenate([a, b], axis=0), ((1, 0), (0, 2)))
        return (mx.cumsum(y, axis=0) ** 2).sum()

    g = mx.grad(loss, argnums=(0, 1))
    path = str(tmp_path / "g.wfn")
    mx.export_function(path, g, mx.ones((2, 3)), mx.ones((1, 3)), shapeless=True)
    imported = mx.import_function(path)
    rng = np.random.default_rng(0)
    for rows_a, rows_b, cols in [(2, 1, 3), (4, 3, 2), (1, 5, 1)]:
        a = mx.array(rng.standard_normal((rows_a, cols)).astype(np.float32))
        b = mx.array(rng.standard_normal((rows_b, cols)).astype(np.float32))
        for want, got in zip(g(a, b), imported(a, b)):
            assert got.shape == want.shape
            np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-6)

def test_metadata_and_random(tmp_path):
    path = str(tmp_path / "r.wfn")
    mx.random.seed(3)

    def f():
        return mx.random.uniform(shape=(4,))

    mx.export_function(path, f, metadata='{"v": 1}')
    mx.random.seed(3)
    want = f()
    g, meta = mx.import_function(path, return_metadata=True)
    assert meta == '{"v": 1}'
    assert mx.array_equal(g()[0], want).item()
    assert mx.array_equal(g()[0], want).item()  # the export's numbers, every call
    with pytest.raises(TypeError):
        mx.export_function(path, f, metadata={"v": 1})


def test_errors(tmp_path):
    with pytest.raises(OSError):
        mx.import_function(str(tmp_path / "missing.wfn"))
    bad = tmp_path / "bad.wfn"
    bad.write_bytes(b"WEFTFN\r\n\x01\x00\x00\x00\xff\xff")
    with pytest.raises(OSError, match="not a valid weft function file"):
        mx.import_function(str(bad))
    with pytest.raises(ValueError):
        mx.export_function(str(tmp_path / "o.wfn"), lambda: (mx.zeros((2,)), 1))
    with pytest.raises(ValueError):
        mx.export_function(str(tmp_path / "o.wfn"), lambda x: x, "hi")

    # A Python kernel cannot be written to a file: refused, naming the primitive.
    def kernel(inputs, out):
        out[:] = inputs[0]

    def uses_kernel(x):
        return mx.custom_kernel(kernel, [x], x.shape, mx.float32)

    with pytest.raises(NotImplementedError, match="wf_export_function: .*'custom'"):
        mx.export_function(str(tmp_path / "c.wfn"), uses_kernel, mx.array([1.0]))
    assert not (tmp_path / "c.wfn").exists()


def test_imported_function_from_threads(tmp_path):
    path = str(tmp_path / "t.wfn")
    mx.export_function(path, lambda x: mx.exp(x) + 1, mx.zeros((8,)))
    g = mx.import_function(path)
    x = mx.array(np.linspace(0, 1, 8, dtype=np.float32))
    want = (mx.exp(x) + 1).tolist()
    results = []

    def work():
        for _ in range(20):
            results.append(g(x)[0].tolist() == want)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 80 and all(results)


def test_export_to_dot():
    x = mx.array([1.0, 2.0])
    mx.eval(x)
    y = mx.exp(x + x)
    buf = io.StringIO()
    mx.export_to_dot(buf, y, x=x)
    text = buf.getvalue()
    assert text.startswith("digraph {")
    assert 'label="exp", shape=box' in text and 'label="add", shape=box' in text
    assert 'label="x: float32 (2,)"' in text
    mx.eval(y)
    buf = io.StringIO()
    mx.export_to_dot(buf, y)  # evaluated: a leaf, no edges
    assert "->" not in buf.getvalue()
    # A compiled function's graph has fewer nodes (fused).
    def f(a):
        return mx.exp(a) * 2 + mx.sin(a)

    def count(out):
        b = io.StringIO()
        mx.export_to_dot(b, out)
        return len([t for t in b.getvalue().split() if "label" in t])

    assert count(mx.compile(f)(x)) < count(f(x))
    with pytest.raises(ValueError):
        mx.export_to_dot(42, y)


def test_exporter_in_a_cycle_is_collected(tmp_path):
    path = str(tmp_path / "cycle.wfn")
    d = {}

    def f(x):
        return d["x"] + x

    d["ex"] = mx.exporter(path, f)
    d["x"] = mx.array([1.0, 2.0])
    d["ex"](mx.array([1.0, 1.0]))
    ref = weakref.ref(d["ex"])
    del d, f
    gc.collect()
    assert ref() is None
    # Collecting it closed the file, so it imports.
    assert mx.import_function(path)(mx.array([0.0, 1.0]))[0].tolist() == [1.0, 3.0]
