"""compile: constants in the key, pytrees, state, ids, threads."""
import gc
import threading

import pytest

import weft as mx


def test_compile_replays_and_counts():
    def f(x, y):
        return mx.exp(x) * y + 1

    cf = mx.compile(f)
    x, y = mx.array([0.0, 1.0]), mx.array([2.0, 3.0])
    first = cf(x, y)
    second = cf(x, y)
    assert first.tolist() == second.tolist() == f(x, y).tolist()
    stats = mx.compile_stats(cf)
    assert stats["traces"] == 1 and stats["hits"] == 1
    cf(mx.ones((3,)), mx.ones((3,)))  # a new shape traces again
    assert mx.compile_stats(cf)["traces"] == 2
    assert cf.__name__ == "f"


def test_python_constants_are_part_of_the_key():
    calls = []

    def f(x, scale, mode="add"):
        calls.append((scale, mode))
        return x * scale if mode == "mul" else x + scale

    cf = mx.compile(f)
    x = mx.array([1.0, 2.0])
    assert cf(x, 2.0).tolist() == [3.0, 4.0]
    assert cf(x, 3.0).tolist() == [4.0, 5.0]
    assert cf(x, 3.0, mode="mul").tolist() == [3.0, 6.0]
    assert cf(x, 3.0, mode="mul").tolist() == [3.0, 6.0]
    assert calls == [(2.0, "add"), (3.0, "add"), (3.0, "mul")]


def test_pytree_inputs_and_outputs():
    cf = mx.compile(lambda d: {"sum": d["a"] + d["b"][0], "diff": [d["a"] - d["b"][0]]})
    out = cf({"a": mx.array(3.0), "b": [mx.array(1.0)]})
    assert out["sum"].item() == 4.0 and out["diff"][0].item() == 2.0


def test_declared_state_inputs_and_outputs():
    state = [mx.array(1.0)]

    def step(x):
        state[0] = state[0] * x
        return state[0] + 0

    cf = mx.compile(step, inputs=state, outputs=state)
    for expected in (2.0, 4.0, 8.0):
        assert cf(mx.array(2.0)).item() == expected
        assert state[0].item() == expected
    assert mx.compile_stats(cf)["traces"] == 1


def test_a_new_function_never_replays_an_old_trace():
    # The key is weft's function id, never id(fun): functions made and freed
    # in a loop (so their addresses repeat) each get their own trace.
    results = []
    for k in range(20):
        cf = mx.compile(lambda x, k=k: x + k)
        results.append(cf(mx.array(0.0)).item())
        del cf
        gc.collect()
    assert results == [float(k) for k in range(20)]


def test_compiled_keeps_its_function_alive():
    def make():
        def f(x):
            """doc of f"""
            return x * 2
        return mx.compile(f)

    cf = make()
    gc.collect()
    assert cf(mx.array(2.0)).item() == 4.0 and cf.__doc__ == "doc of f"


def test_disable_compile_calls_directly():
    calls = []

    def f(x):
        calls.append(1)
        return x + 1

    cf = mx.compile(f)
    mx.disable_compile()
    try:
        cf(mx.array(1.0))
        cf(mx.array(1.0))
    finally:
        mx.enable_compile()
    assert len(calls) == 2


def test_compile_errors_come_back_and_retry():
    attempts = []

    def f(x):
        attempts.append(1)
        if len(attempts) == 1:
            raise KeyError("first")
        return x

    cf = mx.compile(f)
    with pytest.raises(KeyError):
        cf(mx.array(1.0))
    assert cf(mx.array(1.0)).item() == 1.0
    # Non-array outputs stay in the output tree (MLX's behaviour) ...
    assert mx.compile(lambda x: (3, None, x))(mx.array(1.0))[:2] == (3, None)

    # ... but arguments must be arrays or constants compile can key on.
    class Opaque:
        value = 1

    with pytest.raises(ValueError, match="Opaque"):
        mx.compile(lambda x, y: x + y.value)(mx.array(1.0), Opaque())


def test_output_trees_may_differ_by_dtype():
    state = [mx.array(1.0)]

    def f(y):
        x = state[0]
        if y.dtype == mx.float32:
            state[0] = 2 * y
            return [x, y]
        state[0] = state[0] * 2
        return {"sum": x + y}

    cf = mx.compile(f, inputs=state, outputs=state)
    for _ in range(3):
        assert isinstance(cf(mx.array(1.0)), list)
        assert isinstance(cf(mx.array(1)), dict)
    assert state[0].item() == 4.0


def test_grad_of_compiled_and_compiled_grad():
    f = lambda x: (x * x).sum()
    x = mx.array([1.0, 2.0])
    assert mx.grad(mx.compile(f))(x).tolist() == [2.0, 4.0]
    assert mx.compile(mx.grad(f))(x).tolist() == [2.0, 4.0]


def test_shapeless():
    cf = mx.compile(lambda x: x * 2, shapeless=True)
    assert cf(mx.ones((2,))).tolist() == [2.0, 2.0]
    assert cf(mx.ones((3,))).tolist() == [2.0, 2.0, 2.0]
    assert mx.compile_stats(cf)["traces"] == 1


def test_shapeless_shapes_named_and_derived():
    import numpy as np

    # A literal reshape keeps its target (its -1 inferred again), as in MLX.
    cf = mx.compile(lambda x: x.reshape(x.shape[0] * x.shape[1], -1), shapeless=True)
    assert cf(mx.zeros((2, 3, 4))).shape == (6, 4)
    assert cf(mx.zeros((2, 3, 8))).shape == (6, 8)
    with pytest.raises(ValueError):
        cf(mx.zeros((5, 5, 5)))
    # Shapes derived from the input follow each call.
    g = mx.compile(lambda x: mx.unflatten(mx.flatten(mx.expand_dims(x, 0), 1, 2), -1, (-1, 2)),
                   shapeless=True)
    for shape in [(2, 3), (4, 5), (3, 2)]:
        x = mx.array(np.arange(np.prod(shape), dtype=np.float32).reshape(shape))
        want = np.arange(np.prod(shape), dtype=np.float32).reshape(1, -1, 2)
        assert np.array_equal(np.array(g(x)), want)
    v = mx.compile(lambda a, b: a @ b, shapeless=True)
    assert v(mx.array([1.0, 2.0]), mx.array([3.0, 4.0])).item() == 11.0
    assert v(mx.array([1.0, 2.0, 3.0]), mx.array([1.0, 1.0, 1.0])).item() == 6.0
    assert mx.compile_stats(g)["traces"] == 1 and mx.compile_stats(v)["traces"] == 1


def test_shapeless_compiled_gradients_follow_each_call():
    import numpy as np

    # The operand broadcast when traced (a) is the full one in the second
    # call, and the other way round: each gradient keeps its operand's shape.
    cg = mx.compile(mx.grad(lambda args: sum(args).sum()), shapeless=True)
    ga, gb = cg((mx.array(0.0), mx.ones((2, 2))))
    assert ga.shape == () and gb.shape == (2, 2) and ga.item() == 4.0
    ga, gb = cg((mx.ones((3, 2)), mx.array(1.0)))
    assert ga.shape == (3, 2) and gb.shape == () and gb.item() == 6.0
    # Batched products whose batch axes broadcast differently per call.
    cm = mx.compile(mx.grad(lambda a, b: (a @ b).mean(), argnums=(0, 1)), shapeless=True)
    rng = np.random.default_rng(1)
    for sa, sb in [((2, 1, 4, 2), (3, 2, 5)), ((3, 1, 4, 2), (2, 2, 5)), ((1, 5, 2), (4, 2, 3))]:
        a = rng.standard_normal(sa).astype(np.float32)
        b = rng.standard_normal(sb).astype(np.float32)
        ga, gb = cm(mx.array(a), mx.array(b))
        # d mean(a @ b) = ones / n @ b^T and a^T @ ones / n, summed to each shape
        n = np.matmul(a, b).size
        ct = np.ones(np.matmul(a, b).shape, np.float32) / n
        want_a = np.matmul(ct, np.swapaxes(b, -1, -2))
        want_b = np.matmul(np.swapaxes(a, -1, -2), ct)
        want_a = want_a.sum(axis=tuple(range(want_a.ndim - a.ndim)))
        want_b = want_b.sum(axis=tuple(range(want_b.ndim - b.ndim)))
        want_a = want_a.sum(axis=tuple(d for d in range(a.ndim) if a.shape[d] == 1), keepdims=True)
        want_b = want_b.sum(axis=tuple(d for d in range(b.ndim) if b.shape[d] == 1), keepdims=True)
        np.testing.assert_allclose(np.array(ga), want_a, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.array(gb), want_b, rtol=1e-5, atol=1e-6)
    # A loss with a mean, a softmax and a layer norm, at several batch sizes,
    # against the uncompiled gradient.
    def loss(w, x):
        h = mx.fast.layer_norm(x @ w, None, None, 1e-5)
        return (mx.softmax(h, axis=-1) * h).sum(axis=-1).mean() + (w * w).mean()

    g = mx.grad(loss)
    cl = mx.compile(g, shapeless=True)
    w = mx.array(rng.standard_normal((4, 3)).astype(np.float32))
    for batch in (2, 7, 1, 16):
        x = mx.array(rng.standard_normal((batch, 4)).astype(np.float32))
        np.testing.assert_allclose(np.array(cl(w, x)), np.array(g(w, x)), rtol=1e-5, atol=1e-6)
    assert mx.compile_stats(cl)["traces"] == 1
    # A slice the function names keeps its bounds at every call (as in MLX),
    # and so does its gradient: zeros around the slice of each call's shape.
    cs = mx.compile(mx.grad(lambda x: (x[1:3] ** 2).sum()), shapeless=True)
    for n in (4, 6, 3):
        x = mx.arange(n, dtype=mx.float32)
        want = np.zeros(n, np.float32)
        want[1:3] = 2 * np.arange(n, dtype=np.float32)[1:3]
        np.testing.assert_array_equal(np.array(cs(x)), want)
    # A gradient whose rule reads the traced shapes (prod's) is refused,
    # never replayed at a stale shape; compiled for fixed shapes it works.
    with pytest.raises(NotImplementedError):
        mx.compile(mx.grad(lambda x: x.prod()), shapeless=True)(mx.ones((3,)))
    assert mx.compile(mx.grad(lambda x: x.prod()))(mx.ones((3,))).tolist() == [1.0, 1.0, 1.0]


def test_shapeless_convolution_follows_the_length():
    import numpy as np

    w = mx.array(np.random.default_rng(0).standard_normal((4, 3, 2)).astype(np.float32))
    f = lambda x: mx.conv1d(x, w, padding=1)
    cf = mx.compile(f, shapeless=True)
    for length in (5, 9, 2):
        x = mx.array(np.random.default_rng(length).standard_normal((2, length, 2)).astype(np.float32))
        assert np.array_equal(np.array(cf(x)), np.array(f(x)))
    assert mx.compile_stats(cf)["traces"] == 1


def test_shapeless_quantized_matmul_follows_the_batch():
    import numpy as np

    w = mx.array(np.random.default_rng(1).standard_normal((64, 128)).astype(np.float32))
    codes, scales, biases = mx.quantize(w, group_size=64, bits=4)
    f = lambda x: mx.quantized_matmul(x, codes, scales, biases, transpose=True, group_size=64,
                                      bits=4)
    cf = mx.compile(f, shapeless=True)
    for rows in (1, 3, 17):
        x = mx.array(np.random.default_rng(rows).standard_normal((rows, 128)).astype(np.float32))
        assert np.array_equal(np.array(cf(x)), np.array(f(x)))
    assert mx.compile_stats(cf)["traces"] == 1


def test_eight_threads_on_a_cold_function_trace_once():
    started = threading.Barrier(8)
    traces = []

    def f(x):
        traces.append(threading.get_ident())
        return mx.tanh(x) * 2

    cf = mx.compile(f)
    results = [None] * 8

    def worker(i):
        started.wait()
        results[i] = cf(mx.array([float(i)])).item()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert len(traces) == 1
    stats = mx.compile_stats(cf)
    assert stats["traces"] == 1 and stats["calls"] == 8
    expected = [mx.tanh(mx.array([float(i)])).item() * 2 for i in range(8)]
    assert results == pytest.approx(expected)


def test_shapeless_vmap_follows_each_calls_shapes():
    import numpy as np

    calls = []

    def product(x, y):
        calls.append(1)
        return mx.matmul(x, y)

    vf = mx.vmap(product, in_axes=(0, 1))
    cf = mx.compile(vf, shapeless=True)
    rng = np.random.default_rng(0)
    for xs, ys in [((2, 3, 1, 4, 5), (1, 2, 5, 6)), ((3, 2, 2, 4, 5), (2, 3, 5, 7))]:
        x = mx.array(rng.standard_normal(xs).astype(np.float32))
        y = mx.array(rng.standard_normal(ys).astype(np.float32))
        want = np.matmul(np.array(x), np.moveaxis(np.array(y), 1, 0)[:, None])
        got = cf(x, y)
        assert got.shape == want.shape
        np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-5)
    assert mx.compile_stats(cf)["traces"] == 1


def test_shapeless_identities_and_gathered_products_follow_the_shapes():
    import numpy as np

    # astype to the same dtype is an identity that follows the call's shape
    f = mx.compile(lambda x: x.astype(mx.float32) * 2, shapeless=True)
    for shape in [(2, 3), (4, 1)]:
        assert np.array_equal(np.array(f(mx.ones(shape))), np.full(shape, 2.0, np.float32))
    assert mx.compile_stats(f)["traces"] == 1
    rng = np.random.default_rng(0)
    b = mx.array(rng.standard_normal((4, 16, 8)).astype(np.float32))
    idx = mx.array([0, 1, 2, 3])
    g = mx.compile(lambda x: mx.gather_mm(x, b, lhs_indices=idx, rhs_indices=idx), shapeless=True)
    w = mx.array(rng.standard_normal((4, 8, 64)).astype(np.float32))
    qw, s, bias = mx.quantize(w)
    q = mx.compile(lambda x: mx.gather_qmm(x, qw, s, bias, lhs_indices=idx, rhs_indices=idx,
                                           transpose=True), shapeless=True)
    for rows in [4, 8]:
        x = mx.array(rng.standard_normal((4, rows, 16)).astype(np.float32))
        want = mx.gather_mm(x, b, lhs_indices=idx, rhs_indices=idx)
        np.testing.assert_allclose(np.array(g(x)), np.array(want), rtol=1e-5, atol=1e-5)
        x32 = mx.array(rng.standard_normal((4, rows, 64)).astype(np.float32))
        want = mx.gather_qmm(x32, qw, s, bias, lhs_indices=idx, rhs_indices=idx, transpose=True)
        np.testing.assert_allclose(np.array(q(x32)), np.array(want), rtol=1e-5, atol=1e-4)
    assert mx.compile_stats(g)["traces"] == 1 and mx.compile_stats(q)["traces"] == 1


def test_shapeless_vmap_follows_the_batch_or_is_refused():
    # An unbatched constant (the 2 of x ** 2) is broadcast to each call's
    # batch, not the traced one: a batch of 1 after a batch of 2 gives 1 row.
    c = mx.compile(mx.vmap(lambda x: (x ** 2 + 1).sum()), shapeless=True)
    assert c(mx.ones((2, 3))).tolist() == [6.0, 6.0]
    assert c(mx.ones((1, 3))).tolist() == [6.0]
    assert c(mx.ones((4, 2))).tolist() == [4.0] * 4
    assert mx.compile_stats(c)["traces"] == 1
    # A rule that broadcasts an unbatched operand to the traced batch size
    # (concatenating a constant under vmap) is refused rather than replayed
    # at another batch; compiled without shapeless it works.
    def with_constant(x):
        return mx.concatenate([x, mx.zeros((2,))])

    with pytest.raises(NotImplementedError):
        mx.compile(mx.vmap(with_constant), shapeless=True)(mx.ones((2, 3)))
    got = mx.compile(mx.vmap(with_constant))(mx.ones((2, 3)))
    assert got.tolist() == [[1.0, 1.0, 1.0, 0.0, 0.0]] * 2


def test_shapeless_vmap_of_gradients_follows_the_batch():
    import numpy as np

    # mean's count is the same for every example: it stays unbatched, so the
    # gradient of a mean under vmap follows each call's batch and length.
    c = mx.compile(mx.vmap(mx.grad(lambda x: x.mean())), shapeless=True)
    for shape in [(2, 3), (1, 4), (4, 5)]:
        got = c(mx.ones(shape))
        assert got.shape == shape
        np.testing.assert_allclose(np.array(got), np.full(shape, 1 / shape[1]), rtol=1e-6)
    assert mx.compile_stats(c)["traces"] == 1

    # Per-example gradients of unbatched parameters (in_axes None): the
    # parameters' cotangents are summed per example, at each call's batch.
    def loss(w, b, x, y):
        return ((mx.tanh(x @ w + b) - y) ** 2).mean()

    per_example = mx.vmap(mx.grad(loss, argnums=(0, 1)), in_axes=(None, None, 0, 0))
    compiled = mx.compile(per_example, shapeless=True)
    rng = np.random.default_rng(0)
    w = mx.array(rng.standard_normal((4, 3)).astype(np.float32))
    b = mx.array(rng.standard_normal((3,)).astype(np.float32))
    for batch, length in [(2, 5), (3, 7), (1, 2)]:
        x = mx.array(rng.standard_normal((batch, length, 4)).astype(np.float32))
        y = mx.array(rng.standard_normal((batch, length, 3)).astype(np.float32))
        gw, gb = compiled(w, b, x, y)
        assert gw.shape == (batch, 4, 3) and gb.shape == (batch, 3)
        for i in range(batch):
            ew, eb = mx.grad(loss, argnums=(0, 1))(w, b, x[i], y[i])
            np.testing.assert_allclose(np.array(gw[i]), np.array(ew), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(np.array(gb[i]), np.array(eb), rtol=1e-5, atol=1e-6)
    assert mx.compile_stats(compiled)["traces"] == 1



def _position_loss(y):
    # every position of y gets its own gradient: a misplaced cut shows
    return (mx.cumsum(y, axis=0) ** 2).sum()


def _check_shapeless_grad(loss, calls, argnums):
    import numpy as np

    g = mx.grad(loss, argnums=argnums)
    cg = mx.compile(g, shapeless=True)
    rng = np.random.default_rng(3)
    for shapes in calls:
        args = [mx.array(rng.standard_normal(s).astype(np.float32)) for s in shapes]
        want, got = g(*args), cg(*args)
        for w, c in zip(want, got):
            assert c.shape == w.shape
            np.testing.assert_allclose(np.array(c), np.array(w), rtol=1e-5, atol=1e-5)
    assert mx.compile_stats(cg)["traces"] == 1


def test_shapeless_concatenate_pad_and_slice_update_gradients_follow_the_shapes():
    # each operand's part of a concatenation's cotangent is cut at the
    # sizes of the operands before it, read at each call
    _check_shapeless_grad(lambda a, b: _position_loss(mx.concatenate([a, b], axis=0)),
                          [((2, 3), (4, 3)), ((5, 2), (1, 2)), ((1, 4), (3, 4))], (0, 1))
    _check_shapeless_grad(
        lambda a, b, c: _position_loss(mx.concatenate([a, b, c], axis=-1)),
        [((2, 1), (2, 3), (2, 2)), ((3, 4), (3, 1), (3, 2)), ((1, 2), (1, 5), (1, 3))],
        (0, 1, 2))
    # a pad's interior at its fixed low pads, of each call's operand size
    _check_shapeless_grad(
        lambda x: _position_loss(mx.pad(x, ((1, 2), (0, 3)), constant_values=0.5)),
        [((2, 3),), ((5, 1),), ((1, 4),)], (0,))

    # x[1:3] = u keeps its bounds at every call, as the forward does
    def written(x, u):
        y = x * 1
        y[1:3] = u
        return _position_loss(y * y)

    _check_shapeless_grad(written, [((4,), (2,)), ((7,), (2,)), ((3,), (2,))], (0, 1))


def test_shapeless_concatenate_second_order_and_forward_over_reverse():
    import numpy as np

    def grads(a, b):
        return mx.grad(lambda a, b: _position_loss(mx.concatenate([a, b], axis=0)),
                       argnums=(0, 1))(a, b)

    # grad of a function of the gradient: crop_like's own gradient (pad_like)
    second = mx.grad(lambda a, b: sum((g ** 2).sum() for g in grads(a, b)), argnums=(0, 1))
    # jvp of the gradient: crop_like on the tangents
    tangent = lambda a, b, ta, tb: mx.jvp(grads, [a, b], [ta, tb])[1]  # noqa: E731
    c_second = mx.compile(second, shapeless=True)
    c_tangent = mx.compile(tangent, shapeless=True)
    rng = np.random.default_rng(4)
    for la, lb in [(2, 3), (4, 1), (1, 5)]:
        a, b, ta, tb = (mx.array(rng.standard_normal((n, 2)).astype(np.float32))
                        for n in (la, lb, la, lb))
        for want, got in [(second(a, b), c_second(a, b)),
                          (tangent(a, b, ta, tb), c_tangent(a, b, ta, tb))]:
            for w, c in zip(want, got):
                assert c.shape == w.shape
                np.testing.assert_allclose(np.array(c), np.array(w), rtol=1e-5, atol=1e-4)
    assert mx.compile_stats(c_second)["traces"] == 1
    assert mx.compile_stats(c_tangent)["traces"] == 1



def test_shapeless_vmap_of_concatenate_and_pad_gradients_follows_the_batch():
    import numpy as np

    # crop_like under vmap: the examples' cotangents cut at each call's sizes
    def loss(a, b):
        return _position_loss(mx.pad(mx.concatenate([a, b], axis=0), ((1, 2),)))

    g = mx.vmap(mx.grad(loss, argnums=(0, 1)))
    c = mx.compile(g, shapeless=True)
    rng = np.random.default_rng(6)
    for batch, rows_a, rows_b in [(2, 3, 1), (3, 2, 4), (1, 1, 1)]:
        a = mx.array(rng.standard_normal((batch, rows_a)).astype(np.float32))
        b = mx.array(rng.standard_normal((batch, rows_b)).astype(np.float32))
        for want, got in zip(g(a, b), c(a, b)):
            assert got.shape == want.shape
            np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-6)
    assert mx.compile_stats(c)["traces"] == 1


def test_shapeless_kv_cache_attention_gradient_follows_the_cache_length():
    import numpy as np

    # keys and values appended to a cache whose length changes per call
    def loss(q, k_new, v_new, k_cache, v_cache):
        k = mx.concatenate([k_cache, k_new], axis=0)
        v = mx.concatenate([v_cache, v_new], axis=0)
        p = mx.softmax((q @ k.T) * (1 / np.sqrt(q.shape[-1])), axis=-1)
        return ((p @ v) ** 2).sum()

    _check_shapeless_grad(loss, [((1, 4), (1, 4), (1, 4), (c, 4), (c, 4)) for c in (3, 7, 1)],
                          (0, 1, 2, 3, 4))

    # the same through fused attention with a causal mask over 2 new tokens
    def fused(q, k_new, v_new, k_cache, v_cache):
        k = mx.concatenate([k_cache, k_new], axis=2)
        v = mx.concatenate([v_cache, v_new], axis=2)
        o = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.5, mask="causal")
        return (o * o).sum()

    new, cache = (1, 2, 2, 4), lambda c: (1, 2, c, 4)  # noqa: E731
    _check_shapeless_grad(fused, [(new, new, new, cache(c), cache(c)) for c in (3, 6, 1)],
                          (0, 1, 2, 3, 4))



def test_shapeless_jvp_of_a_python_scalar_branch_follows_the_shape():
    # where(x > 0, x, 0.0): the scalar branch's zero tangent is broadcast to
    # each call's shape, not the traced one
    f = lambda x, t: mx.jvp(lambda x: mx.where(x > 0, x * x, 0.0), [x], [t])[1][0]  # noqa: E731
    c = mx.compile(f, shapeless=True)
    for n in (3, 5, 1):
        x = mx.arange(n, dtype=mx.float32) - 1
        assert c(x, mx.ones((n,))).tolist() == [max(2.0 * (i - 1), 0.0) for i in range(n)]
    assert mx.compile_stats(c)["traces"] == 1


def test_shapeless_attention_gradient_follows_the_lengths():
    import numpy as np

    # attention's gradient path (its composition) with derived reshapes and,
    # for "causal", a mask counted from each call's scores
    for mask, kv_heads in [(None, 4), ("causal", 4), ("causal", 2), (None, 1)]:
        def loss(q, k, v, mask=mask):
            o = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.5, mask=mask)
            return _position_loss(o.reshape(-1, 8) * o.reshape(-1, 8))

        calls = [((2, 4, lq, 8), (2, kv_heads, lk, 8), (2, kv_heads, lk, 8))
                 for lq, lk in [(3, 3), (5, 5), (1, 4), (2, 6)]]
        _check_shapeless_grad(loss, calls, (0, 1, 2))
        # forward mode through the attention node's own rule
        tangent = lambda q, k, v: mx.jvp(loss, [q, k, v], [q, k, v])[1][0]  # noqa: E731
        c_tangent = mx.compile(tangent, shapeless=True)
        for shapes in calls:
            args = [mx.array(np.random.default_rng(7).standard_normal(s).astype(np.float32))
                    for s in shapes]
            np.testing.assert_allclose(np.array(c_tangent(*args)), np.array(tangent(*args)),
                                       rtol=1e-4, atol=1e-4)
        assert mx.compile_stats(c_tangent)["traces"] == 1


def test_shapeless_compiled_training_step_follows_the_batch():
    import numpy as np
    from functools import partial
    import weft.nn as nn
    from weft.utils import tree_flatten

    # An embedding, a Linear layer (its bias broadcast to each call's rows)
    # and a layer norm; gradients equal the uncompiled ones at every
    # batch and sequence length, with one trace.
    mx.random.seed(3)
    emb, lin, norm = nn.Embedding(50, 8), nn.Linear(8, 4), nn.LayerNorm(4)
    model = nn.Sequential(emb, lin, norm)
    mx.eval(model.parameters())

    def loss(model, tokens, target):
        return nn.losses.mse_loss(model(tokens), target)

    vg = nn.value_and_grad(model, loss)
    state = [model.state]
    step = partial(mx.compile, inputs=state, outputs=state, shapeless=True)(
        lambda tokens, target: vg(model, tokens, target))
    for batch, length in [(2, 5), (3, 7), (1, 1), (4, 2)]:
        tokens = mx.random.randint(0, 50, (batch, length))
        target = mx.random.normal((batch, length, 4))
        (l, g), (l2, g2) = step(tokens, target), vg(model, tokens, target)
        assert abs(l.item() - l2.item()) <= 1e-6 * max(1.0, abs(l2.item()))
        for (ka, a), (kb, b) in zip(tree_flatten(g), tree_flatten(g2)):
            assert ka == kb and a.shape == b.shape
            np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-5, atol=1e-6)
    assert mx.compile_stats(step)["traces"] == 1


def test_shapeless_take_along_axis_gradient_follows_the_shapes():
    import numpy as np

    # cross_entropy's gather: duplicates, negative indices, either axis.
    rng = np.random.default_rng(5)
    for axis in (0, 1, -1):
        g = mx.grad(lambda a, i: (mx.take_along_axis(a, i, axis=axis) ** 2).sum())
        cg = mx.compile(g, shapeless=True)
        for rows, cols, picks in [(3, 5, 2), (6, 4, 4), (1, 7, 3)]:
            a = mx.array(rng.standard_normal((rows, cols)).astype(np.float32))
            size = rows if axis == 0 else cols
            shape = (picks, cols) if axis == 0 else (rows, picks)
            i = mx.array(rng.integers(-size, size, shape).astype(np.int32))
            np.testing.assert_allclose(np.array(cg(a, i)), np.array(g(a, i)), rtol=1e-6)
        assert mx.compile_stats(cg)["traces"] == 1
    import weft.nn as nn

    ce = mx.compile(mx.grad(lambda x, t: nn.losses.cross_entropy(x, t, reduction="mean")),
                    shapeless=True)
    for batch in (4, 9, 1):
        x = mx.array(rng.standard_normal((batch, 6)).astype(np.float32))
        t = mx.array(rng.integers(0, 6, (batch,)).astype(np.int32))
        p = np.exp(np.array(x)) / np.exp(np.array(x)).sum(-1, keepdims=True)
        p[np.arange(batch), np.array(t)] -= 1
        np.testing.assert_allclose(np.array(ce(x, t)), p / batch, rtol=1e-5, atol=1e-7)
