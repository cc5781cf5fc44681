"""weft.nn's tensor-parallel layers (AllToShardedLinear, ShardedToAllLinear,
their quantized forms, shard_linear, shard_inplace) and fully_shard: in a
group of one they are the layers they were made from; under mpirun with two
ranks each rank's share, and the input's gradient, match the whole layer
computed with NumPy weights on one process, and a fully sharded model's
gradients and optimizer step are those of the replicated model with its
gradients averaged over the ranks."""
import os
import textwrap

import numpy as np
import pytest

import weft as mx
import weft.nn as nn
import weft.optimizers as optim
from weft.nn.utils import clip_grad_norm_sharded

dist = mx.distributed


def layer_from(w, b=None):
    lin = nn.Linear(w.shape[1], w.shape[0], bias=b is not None)
    lin.weight = mx.array(w)
    if b is not None:
        lin.bias = mx.array(b)
    return lin


def test_fully_shard_in_a_group_of_one_is_the_module():
    lin = nn.Linear(3, 5)
    assert nn.fully_shard(lin) is lin


def test_group_of_one_is_the_layer():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((12, 64)).astype(np.float32)
    b = rng.standard_normal(12).astype(np.float32)
    x = mx.array(rng.standard_normal((3, 64)).astype(np.float32))
    lin = layer_from(w, b)
    for sharding, cls in (("all-to-sharded", nn.AllToShardedLinear),
                          ("sharded-to-all", nn.ShardedToAllLinear)):
        s = nn.shard_linear(lin, sharding)
        assert type(s) is cls
        np.testing.assert_allclose(np.array(s(x)), np.array(lin(x)), rtol=1e-5, atol=1e-5)
        assert "input_dims=64, output_dims=12, bias=True" in repr(s)
    q = nn.QuantizedLinear.from_linear(lin, group_size=32, bits=8)
    for sharding, cls in (("all-to-sharded", nn.QuantizedAllToShardedLinear),
                          ("sharded-to-all", nn.QuantizedShardedToAllLinear)):
        s = nn.shard_linear(q, sharding)
        assert type(s) is cls
        np.testing.assert_array_equal(np.array(s(x)), np.array(q(x)))
        assert s.trainable_parameters() == {}  # frozen, as MLX's: unfreeze keeps them so
        s.unfreeze()
        assert s.trainable_parameters() == {}
    with pytest.raises(ValueError):
        nn.shard_linear(lin, "rows")
    with pytest.raises(ValueError):
        nn.shard_linear(nn.ReLU(), "all-to-sharded")
    m = layer_from(w, b)
    nn.shard_inplace(m, "all-to-sharded", segments=[0.25, 0.5])
    np.testing.assert_array_equal(np.array(m.weight), w)
    with pytest.raises(ValueError):
        nn.shard_inplace(m, lambda path, a: "bad")
    assert nn.average_gradients is dist.average_gradients
    grads = {"a": mx.array([3.0, 4.0]), "b": [mx.array([12.0])]}
    clipped, norm = clip_grad_norm_sharded(grads, 6.5)
    want, want_norm = optim.clip_grad_norm(grads, 6.5)
    assert norm.item() == want_norm.item() == 13.0
    np.testing.assert_allclose(np.array(clipped["b"][0]), np.array(want["b"][0]))
    with pytest.raises(ValueError):
        clip_grad_norm_sharded(grads, -1.0)


WORKER = textwrap.dedent(
    """
    import os
    import numpy as np
    import weft as mx
    import weft.nn as nn
    world = mx.distributed.init(strict=True)
    r, n = world.rank(), world.size()
    rng = np.random.default_rng(7)  # the same weights on every rank
    w = rng.standard_normal((3 * 8, 128)).astype(np.float32)  # a fused q, k, v
    b = rng.standard_normal(3 * 8).astype(np.float32)
    x = rng.standard_normal((5, 128)).astype(np.float32)
    lin = nn.Linear(128, 24)
    lin.weight, lin.bias = mx.array(w), mx.array(b)
    # all-to-sharded, 3 segments: this rank's rows of each of q, k and v
    rows = np.concatenate([np.arange(s * 8 + r * 4, s * 8 + r * 4 + 4) for s in range(3)])
    a2s = nn.shard_linear(lin, "all-to-sharded", segments=3)
    np.testing.assert_allclose(np.array(a2s(mx.array(x))), x @ w[rows].T + b[rows],
                               rtol=1e-4, atol=1e-4)
    # the input's gradient of every rank's share summed: the whole layer's
    g = mx.grad(lambda v: (a2s(v) ** 2).sum())(mx.array(x))
    full = 2 * (x @ w.T + b) @ w
    np.testing.assert_allclose(np.array(g), full, rtol=1e-3, atol=1e-3)
    # sharded-to-all: this rank's input columns, the whole output everywhere
    cols = slice(r * 64, (r + 1) * 64)
    s2a = nn.shard_linear(lin, "sharded-to-all")
    np.testing.assert_allclose(np.array(s2a(mx.array(x[:, cols]))), x @ w.T + b,
                               rtol=1e-4, atol=1e-4)
    # a model of both: each share's gradient is the whole model's, cut
    full = nn.Sequential(nn.Linear(128, 64), nn.Linear(64, 16))
    part = nn.Sequential(nn.shard_linear(full.layers[0], "all-to-sharded"),
                         nn.shard_linear(full.layers[1], "sharded-to-all"))
    target = mx.array(rng.standard_normal((5, 16)).astype(np.float32))
    loss = lambda m, v: ((m(v) - target) ** 2).mean()
    l_full, g_full = nn.value_and_grad(full, loss)(full, mx.array(x))
    l_part, g_part = nn.value_and_grad(part, loss)(part, mx.array(x))
    np.testing.assert_allclose(l_part.item(), l_full.item(), rtol=1e-5)
    mine = slice(r * 32, (r + 1) * 32)
    for got, want in ((g_part["layers"][0]["weight"], g_full["layers"][0]["weight"][mine]),
                      (g_part["layers"][0]["bias"], g_full["layers"][0]["bias"][mine]),
                      (g_part["layers"][1]["weight"], g_full["layers"][1]["weight"][:, mine]),
                      (g_part["layers"][1]["bias"], g_full["layers"][1]["bias"])):
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-4, atol=1e-6)
    # quantized: the shares of the quantized layer's dequantized matrix
    q = nn.QuantizedLinear.from_linear(lin, group_size=32, bits=4)
    wq = np.array(mx.dequantize(q.weight, q.scales, q.biases, group_size=32, bits=4))
    qa = nn.shard_linear(q, "all-to-sharded", segments=3)
    np.testing.assert_allclose(np.array(qa(mx.array(x))), x @ wq[rows].T + b[rows],
                               rtol=1e-4, atol=1e-4)
    qs = nn.shard_linear(q, "sharded-to-all")
    np.testing.assert_allclose(np.array(qs(mx.array(x[:, cols]))), x @ wq.T + b,
                               rtol=1e-4, atol=1e-4)
    assert "output_dims=24" in repr(qa) and "input_dims=128" in repr(qs)
    try:
        nn.AllToShardedLinear(16, 5)
    except ValueError:
        pass
    else:
        raise AssertionError("5 outputs split over 2 ranks")
    # a gradient split over the ranks: the global norm, every share scaled alike
    from weft.nn.utils import clip_grad_norm_sharded
    share = {"w": mx.array(np.full(4, 1.0 + r, np.float32))}
    clipped, norm = clip_grad_norm_sharded(share, 1.0)
    total = np.sqrt(sum(4 * (1.0 + k) ** 2 for k in range(n)))
    np.testing.assert_allclose(norm.item(), total, rtol=1e-6)
    np.testing.assert_allclose(np.array(clipped["w"]), (1.0 + r) / (total + 1e-6), rtol=1e-5)
    os.write(1, ("rank %d ok\\n" % r).encode())
    """
)


@pytest.mark.skipif(os.environ.get("WEFT_PY_SANITIZED") == "1",
                    reason="Open MPI under the sanitized interpreter: covered by the C test")
def test_two_ranks_under_mpirun(run_two_ranks):
    run_two_ranks(WORKER)


FULLY_SHARDED_WORKER = textwrap.dedent(
    """
    import os
    import numpy as np
    import weft as mx
    import weft.nn as nn
    import weft.optimizers as optim
    from weft.utils import tree_flatten
    world = mx.distributed.init(strict=True)
    r, n = world.rank(), world.size()
    rng = np.random.default_rng(3)
    def make():
        mx.random.seed(11)
        return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4))
    full, wrapped = make(), nn.fully_shard(make())
    assert isinstance(wrapped, nn.FullyShardedModule), type(wrapped)
    whole = dict(tree_flatten(full.parameters()))
    mine = dict(tree_flatten(wrapped.parameters()))
    for path, value in whole.items():
        rows = value.shape[0] // n
        np.testing.assert_array_equal(np.array(mine["module." + path]),
                                      np.array(value)[r * rows:(r + 1) * rows])
    xs = [rng.standard_normal((5, 6)).astype(np.float32) for _ in range(n)]  # rank k's batch
    ts = [rng.standard_normal((5, 4)).astype(np.float32) for _ in range(n)]
    loss = lambda m, x, t: ((m(x) - t) ** 2).mean()
    l_w, g_w = nn.value_and_grad(wrapped, loss)(wrapped, mx.array(xs[r]), mx.array(ts[r]))
    l_f, _ = nn.value_and_grad(full, loss)(full, mx.array(xs[r]), mx.array(ts[r]))
    np.testing.assert_allclose(l_w.item(), l_f.item(), rtol=1e-6)
    # the mean over ranks of each rank's whole gradient, cut to this rank's rows
    avg = {}
    for k in range(n):
        _, g = nn.value_and_grad(full, loss)(full, mx.array(xs[k]), mx.array(ts[k]))
        for path, value in tree_flatten(g):
            avg[path] = avg.get(path, 0) + np.array(value) / n
    got = dict(tree_flatten(g_w))
    assert sorted(got) == sorted("module." + p for p in avg), sorted(got)
    for path, value in avg.items():
        rows = value.shape[0] // n
        np.testing.assert_allclose(np.array(got["module." + path]), value[r * rows:(r + 1) * rows],
                                   rtol=1e-5, atol=1e-6)
    # a step of SGD on the shards is the replicated model's step on the averaged gradient
    opt = optim.SGD(learning_rate=0.5)
    opt.update(wrapped, g_w)
    mx.eval(wrapped.parameters())
    now = dict(tree_flatten(wrapped.parameters()))
    for path, value in whole.items():
        rows = value.shape[0] // n
        want = (np.array(value) - 0.5 * avg[path])[r * rows:(r + 1) * rows]
        np.testing.assert_allclose(np.array(now["module." + path]), want, rtol=1e-5, atol=1e-6)
    # compute_dtype: the gathered parameters are bfloat16 in the forward, shards stay float32
    half = nn.fully_shard(make(), compute_dtype=mx.bfloat16)
    y = half(mx.array(xs[r]).astype(mx.bfloat16))
    assert y.dtype == mx.bfloat16, y.dtype
    assert all(v.dtype == mx.float32 for _, v in tree_flatten(half.parameters()))
    _, gh = nn.value_and_grad(half, lambda m, x: m(x).astype(mx.float32).sum())(
        half, mx.array(xs[r]).astype(mx.bfloat16))
    assert all(v.dtype == mx.float32 for _, v in tree_flatten(gh))
    # wrapped twice is wrapped once; a module with nothing to shard is returned as it is
    assert nn.fully_shard(wrapped) is wrapped
    relu = nn.ReLU()
    assert nn.fully_shard(relu) is relu
    # nested: the inner wrapper keeps its own shards
    outer = nn.fully_shard(nn.Sequential(nn.fully_shard(nn.Linear(6, 8)), nn.Linear(8, 4)))
    assert sorted(p for p, _ in tree_flatten(outer.parameters())) == [
        "module.layers.0.module.bias", "module.layers.0.module.weight",
        "module.layers.1.bias", "module.layers.1.weight"]
    assert outer(mx.array(xs[r])).shape == (5, 4)
    for bad in (nn.Linear(6, 3), nn.LayerNorm(5)):
        try:
            nn.fully_shard(bad)
        except ValueError:
            pass
        else:
            raise AssertionError("an odd axis 0 over two ranks")
    os.write(1, ("rank %d ok\\n" % r).encode())
    """
)


@pytest.mark.skipif(os.environ.get("WEFT_PY_SANITIZED") == "1",
                    reason="Open MPI under the sanitized interpreter: covered by the C test")
def test_fully_shard_under_mpirun(run_two_ranks):
    run_two_ranks(FULLY_SHARDED_WORKER)
