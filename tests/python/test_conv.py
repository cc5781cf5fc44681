"""Convolutions in Python (conv1d/2d/3d, conv_general, conv_transpose1d/2d/3d,
convolve) against NumPy references written with direct loops here."""
import itertools

import numpy as np
import pytest

import weft as mx


def ref_conv_general(x, w, stride, lo, hi, kdil, idil, groups, flip):
    """conv_general by its definition: dilate, pad (negative crops), correlate."""
    s = x.ndim - 2
    n, cin = x.shape[0], x.shape[-1]
    cout, cin_g = w.shape[0], w.shape[-1]
    cout_g = cout // groups
    if flip:
        w = w[(slice(None),) + (slice(None, None, -1),) * s]
    # dilate the input
    dshape = [n] + [(x.shape[1 + d] - 1) * idil[d] + 1 for d in range(s)] + [cin]
    xd = np.zeros(dshape, dtype=np.float64)
    xd[(slice(None),) + tuple(slice(None, None, idil[d]) for d in range(s))] = x
    # pad / crop
    for d in range(s):
        if lo[d] < 0:
            xd = np.take(xd, np.arange(-lo[d], xd.shape[1 + d]), axis=1 + d)
        if hi[d] < 0:
            xd = np.take(xd, np.arange(0, xd.shape[1 + d] + hi[d]), axis=1 + d)
    pads = [(0, 0)] + [(max(lo[d], 0), max(hi[d], 0)) for d in range(s)] + [(0, 0)]
    xp = np.pad(xd, pads)
    ks = w.shape[1:-1]
    out_sp = [(xp.shape[1 + d] - (ks[d] - 1) * kdil[d] - 1) // stride[d] + 1 for d in range(s)]
    y = np.zeros([n] + out_sp + [cout])
    for o in itertools.product(*[range(v) for v in out_sp]):
        for k in itertools.product(*[range(v) for v in ks]):
            pos = tuple(o[d] * stride[d] + k[d] * kdil[d] for d in range(s))
            patch = xp[(slice(None),) + pos]  # (N, Cin)
            for g in range(groups):
                xs = patch[:, g * cin_g:(g + 1) * cin_g]
                ws = w[(slice(g * cout_g, (g + 1) * cout_g),) + k]  # (Cout_g, Cin_g)
                y[(slice(None),) + o + (slice(g * cout_g, (g + 1) * cout_g),)] += xs @ ws.T
    return y


def ref_conv_transpose(x, w, stride, pad, dil, opad, groups):
    """Transposed convolution by scattering: y[i * s - p + k * d] += x[i] w[k]."""
    s = x.ndim - 2
    n = x.shape[0]
    cout, cin_g = w.shape[0], w.shape[-1]
    cout_g = cout // groups
    ks = w.shape[1:-1]
    out_sp = [(x.shape[1 + d] - 1) * stride[d] - 2 * pad[d] + dil[d] * (ks[d] - 1) + 1 + opad[d]
              for d in range(s)]
    y = np.zeros([n] + out_sp + [cout])
    for i in itertools.product(*[range(v) for v in x.shape[1:-1]]):
        for k in itertools.product(*[range(v) for v in ks]):
            pos = tuple(i[d] * stride[d] - pad[d] + k[d] * dil[d] for d in range(s))
            if any(p < 0 or p >= out_sp[d] for d, p in enumerate(pos)):
                continue
            for g in range(groups):
                xs = x[(slice(None),) + i + (slice(g * cin_g, (g + 1) * cin_g),)]
                ws = w[(slice(g * cout_g, (g + 1) * cout_g),) + k]
                y[(slice(None),) + pos + (slice(g * cout_g, (g + 1) * cout_g),)] += xs @ ws.T
    return y


def F64(a):
    return mx.array(a, dtype=mx.float64)


def rand(shape, seed):
    return np.random.default_rng(seed).uniform(-1, 1, shape)


def close(got, want, dtype=mx.float32):
    tol = {mx.float32: 1e-5, mx.float64: 1e-12, mx.float16: 5e-3, mx.bfloat16: 3e-2}[dtype]
    got = np.array(got.astype(mx.float64)) if got.dtype != mx.float64 else np.array(got)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max(initial=0)))


@pytest.mark.parametrize("dtype", [mx.float32, mx.float64, mx.float16, mx.bfloat16])
def test_conv2d_dtypes(dtype):
    x, w = rand((2, 7, 6, 4), 1), rand((6, 3, 3, 2), 2)
    xa, wa = F64(x).astype(dtype), F64(w).astype(dtype)
    xr, wr = np.array(xa.astype(mx.float64)), np.array(wa.astype(mx.float64))
    y = mx.conv2d(xa, wa, stride=(2, 1), padding=1, dilation=(1, 2), groups=2)
    assert y.dtype == dtype
    close(y, ref_conv_general(xr, wr, (2, 1), (1, 1), (1, 1), (1, 2), (1, 1), 2, False), dtype)


def test_conv1d_defaults_and_keywords():
    x, w = rand((3, 10, 4), 3), rand((5, 3, 4), 4)
    close(mx.conv1d(F64(x), F64(w)),
          ref_conv_general(x, w, (1,), (0,), (0,), (1,), (1,), 1, False), mx.float64)
    y = mx.conv1d(input=F64(x), weight=F64(w), stride=2, padding=2, dilation=2)
    close(y, ref_conv_general(x, w, (2,), (2,), (2,), (2,), (1,), 1, False), mx.float64)


def test_conv3d():
    x, w = rand((1, 4, 5, 3, 2), 5), rand((3, 2, 3, 2, 2), 6)
    y = mx.conv3d(F64(x), F64(w), stride=(1, 2, 1), padding=(1, 0, 1), dilation=1)
    close(y, ref_conv_general(x, w, (1, 2, 1), (1, 0, 1), (1, 0, 1), (1, 1, 1), (1, 1, 1), 1,
                              False), mx.float64)


def test_depthwise_and_one_by_one():
    x = rand((2, 9, 8, 6), 7)
    wd = rand((6, 3, 3, 1), 8)
    close(mx.conv2d(F64(x), F64(wd), padding=1, groups=6),
          ref_conv_general(x, wd, (1, 1), (1, 1), (1, 1), (1, 1), (1, 1), 6, False), mx.float64)
    w1 = rand((10, 1, 1, 6), 9)
    close(mx.conv2d(F64(x), F64(w1)),
          ref_conv_general(x, w1, (1, 1), (0, 0), (0, 0), (1, 1), (1, 1), 1, False), mx.float64)


def test_conv_general_everything():
    x, w = rand((2, 5, 6, 3), 10), rand((4, 2, 3, 3), 11)
    y = mx.conv_general(F64(x), F64(w), stride=[1, 2], padding=([2, 0], [1, 3]),
                        kernel_dilation=[2, 1], input_dilation=[1, 2], flip=True)
    close(y, ref_conv_general(x, w, (1, 2), (2, 0), (1, 3), (2, 1), (1, 2), 1, True), mx.float64)
    # negative padding crops
    y = mx.conv_general(F64(x), F64(w), padding=([-1, 0], [0, -1]))
    close(y, ref_conv_general(x, w, (1, 1), (-1, 0), (0, -1), (1, 1), (1, 1), 1, False),
          mx.float64)


def test_strided_input():
    x, w = rand((2, 6, 5, 3), 12), rand((4, 3, 2, 3), 13)
    xt = mx.swapaxes(F64(np.ascontiguousarray(np.swapaxes(x, 1, 2))), 1, 2)
    close(mx.conv2d(xt, F64(w), padding=(1, 0)),
          ref_conv_general(x, w, (1, 1), (1, 0), (1, 0), (1, 1), (1, 1), 1, False), mx.float64)


@pytest.mark.parametrize("s", [1, 2, 3])
def test_conv_transpose(s):
    shapes = {1: ((2, 5, 4), (6, 3, 2)), 2: ((1, 4, 3, 2), (3, 3, 2, 2)),
              3: ((1, 3, 2, 3, 2), (2, 2, 3, 2, 2))}
    groups = {1: 2, 2: 1, 3: 1}[s]
    xs, ws = shapes[s]
    x, w = rand(xs, 14 + s), rand(ws, 20 + s)
    stride, pad, dil, opad = [2] * s, [1] * s, [1] * s, [1] * s
    fn = {1: mx.conv_transpose1d, 2: mx.conv_transpose2d, 3: mx.conv_transpose3d}[s]
    if s == 1:
        y = fn(F64(x), F64(w), 2, 1, 1, 1, groups)
    else:
        y = fn(F64(x), F64(w), stride=stride, padding=pad, dilation=dil,
               output_padding=opad, groups=groups)
    close(y, ref_conv_transpose(x, w, stride, pad, dil, opad, groups), mx.float64)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("sizes", [(9, 3), (8, 4), (3, 7), (5, 5), (6, 1)])
def test_convolve_matches_numpy(mode, sizes):
    a, v = rand(sizes[0], 30), rand(sizes[1], 31)
    close(mx.convolve(F64(a), F64(v), mode=mode), np.convolve(a, v, mode=mode),
          mx.float64)


def test_gradients_against_finite_differences():
    x, w = rand((2, 5, 4, 3), 40), rand((4, 3, 2, 3), 41)
    u = rand((2, 3, 4, 4), 42)

    def loss(x, w):
        y = mx.conv_general(x, w, stride=[2, 1], padding=([1, 0], [1, 2]), kernel_dilation=[1, 2])
        return mx.sum(y * F64(u))

    gx, gw = mx.grad(loss, argnums=(0, 1))(F64(x), F64(w))
    eps = 1e-6
    for arr, g, which in ((x, gx, 0), (w, gw, 1)):
        g = np.array(g)
        for flat in (0, arr.size // 3, arr.size - 1):
            idx = np.unravel_index(flat, arr.shape)
            plus, minus = arr.copy(), arr.copy()
            plus[idx] += eps
            minus[idx] -= eps
            args_p = (plus, w) if which == 0 else (x, plus)
            args_m = (minus, w) if which == 0 else (x, minus)
            fd = (loss(*map(F64, args_p)).item() - loss(*map(F64, args_m)).item()) / (2 * eps)
            assert abs(g[idx] - fd) < 1e-6 * max(1, abs(fd))


def test_vmap_over_weights_and_compile():
    x, ws = rand((2, 6, 3), 50), rand((3, 4, 2, 3), 51)
    f = mx.vmap(lambda w: mx.conv1d(F64(x), w, padding=1), in_axes=0)
    y = f(F64(ws))
    for b in range(3):
        close(y[b], ref_conv_general(x, ws[b], (1,), (1,), (1,), (1,), (1,), 1, False), mx.float64)
    cf = mx.compile(lambda a, b: mx.conv1d(a, b, stride=2))
    for seed in (0, 1):
        xa, wa = rand((2, 9, 3), 60 + seed), rand((4, 3, 3), 70 + seed)
        close(cf(F64(xa), F64(wa)),
              ref_conv_general(xa, wa, (2,), (0,), (0,), (1,), (1,), 1, False), mx.float64)


def test_empty_batch():
    y = mx.conv2d(mx.zeros((0, 5, 5, 2)), mx.ones((3, 3, 3, 2)))
    assert y.shape == (0, 3, 3, 3)


def test_bad_inputs_raise_value_error():
    x, w = mx.ones((1, 5, 5, 4)), mx.ones((6, 3, 3, 4))
    with pytest.raises(ValueError):
        mx.conv2d(mx.ones((1, 5, 5, 4), dtype=mx.int32), w)
    with pytest.raises(ValueError):
        mx.conv2d(x, w, groups=3)
    with pytest.raises(ValueError):
        mx.conv2d(x, w, groups=2)
    with pytest.raises(ValueError):
        mx.conv2d(x, w, stride=0)
    with pytest.raises(ValueError):
        mx.conv2d(x, w, padding=-2)  # crops past the kernel's size
    with pytest.raises(ValueError):
        mx.conv2d(x, w, dilation=(4, 1))
    with pytest.raises(ValueError):
        mx.conv2d(x, w, stride=(1, 1, 1))
    with pytest.raises(ValueError):
        mx.conv2d(mx.ones((1, 5, 4)), mx.ones((6, 3, 4)))
    with pytest.raises(ValueError):
        mx.conv_general(mx.ones((5, 4)), w)
    with pytest.raises(ValueError):
        mx.conv_transpose2d(x, w, stride=-1)
    with pytest.raises(ValueError):
        mx.convolve(mx.ones((2, 2)), mx.ones(3))
    with pytest.raises(ValueError):
        mx.convolve(mx.ones(3), mx.ones(3), mode="middle")
    with pytest.raises(ValueError):
        mx.convolve(mx.ones(0), mx.ones(3))
