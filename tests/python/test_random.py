"""weft.random (permutation, sample dtypes, the complex normal, random.state as compile
state), median and the cache limit."""
import functools
import threading

import numpy as np
import pytest

import weft as mx


def test_permutation_is_a_permutation_and_keyed():
    key = mx.random.key(7)
    p = mx.random.permutation(1000, key=key)
    assert sorted(p.tolist()) == list(range(1000))
    assert p.tolist() != list(range(1000))
    assert mx.random.permutation(1000, key=key).tolist() == p.tolist()  # same key, same order
    x = mx.arange(12).reshape(3, 4)
    rows = np.array(mx.random.permutation(x, key=key))
    assert sorted(map(tuple, rows)) == sorted(map(tuple, np.arange(12).reshape(3, 4)))
    cols = np.array(mx.random.permutation(x, axis=1, key=key))
    assert np.array_equal(np.sort(cols, axis=1), np.arange(12).reshape(3, 4))
    assert mx.random.permutation(mx.array([[1.5]])).dtype == mx.float32
    with pytest.raises(ValueError):
        mx.random.permutation(mx.array(3))


def test_sample_dtypes_follow_mlx():
    logits = mx.zeros((4, 6))
    assert mx.random.categorical(logits).dtype == mx.uint32
    assert mx.random.categorical(logits, num_samples=3).shape == (4, 3)
    with pytest.raises(ValueError):
        mx.random.categorical(logits, shape=[4, 2], num_samples=2)
    b = mx.random.randint(0, 2, [2000], dtype=mx.bool_, key=mx.random.key(1))
    assert b.dtype == mx.bool_ and set(b.tolist()) == {False, True}
    assert mx.random.randint(0, 5, dtype=None).dtype == mx.int32


def test_complex_normal_has_unit_variance():
    z = np.array(mx.random.normal((20000,), dtype=mx.complex64, key=mx.random.key(3)))
    assert z.dtype == np.complex64
    assert abs(np.var(z.real) - 0.5) < 0.03 and abs(np.var(z.imag) - 0.5) < 0.03
    assert abs(np.mean(z)) < 0.03
    assert mx.random.normal((), dtype=mx.complex64).shape == ()


def test_median_matches_numpy():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    for axis in [None, 0, 1, -1, (0, 2)]:
        for keepdims in [False, True]:
            want = np.median(x, axis=axis, keepdims=keepdims)
            got = np.array(mx.median(mx.array(x), axis=axis, keepdims=keepdims))
            assert got.shape == want.shape
            assert np.allclose(got, want, rtol=1e-6)
    xi = np.array([[3, 1, 2, 8]], dtype=np.int32)
    got = mx.median(mx.array(xi), axis=1)
    assert got.dtype == mx.float32 and got.tolist() == [2.5]
    y = x.copy()
    y[1, 2, 3] = np.nan
    got = np.array(mx.median(mx.array(y), axis=2))
    assert np.isnan(got[1, 2]) and np.allclose(np.delete(got.reshape(-1), 7), np.delete(np.median(y, axis=2).reshape(-1), 7))
    with pytest.raises(ValueError):
        mx.median(mx.zeros((3, 0)), axis=1)
    with pytest.raises(ValueError):
        mx.median(mx.array(x), axis=(0, 0))


def test_random_state_as_compile_state_draws_per_call_per_thread():
    # mlx code passes mx.random.state as compile's inputs/outputs; weft's
    # compiled functions draw from the calling thread's key at every call.
    state = [{"n": mx.array(0.0)}, mx.random.state]

    @functools.partial(mx.compile, inputs=state, outputs=state)
    def step():
        state[0]["n"] = state[0]["n"] + 1.0
        return mx.random.uniform(shape=(4,))

    mx.random.seed(7)
    first, second = np.array(step()), np.array(step())
    assert not np.allclose(first, second)
    assert state[0]["n"].item() == 2.0
    mx.random.seed(7)
    assert np.array_equal(np.array(step()), first)  # the seed replays the draws
    results = {}

    def worker():
        mx.random.seed(7)
        results["thread"] = np.array(step())

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert np.array_equal(results["thread"], first)  # that thread's own key
    assert state[0]["n"].item() == 4.0
    assert repr(mx.random.state) == "weft.random.state"


def test_cache_limit():
    old = mx.set_cache_limit(0)
    a = mx.zeros((4096,))
    mx.eval(a)
    del a
    assert mx.get_cache_memory() == 0
    assert mx.set_cache_limit(old) == 0
    assert mx.set_cache_limit(old) == old
    with pytest.raises(OverflowError):
        mx.set_cache_limit(-1)


def test_multivariate_normal_moments_and_errors():
    n = 100000
    for mean, cov in [([4.0, 7.0], [[2.0, 0.5], [0.5, 1.0]]),
                      ([0.0, 1.0, 2.0], [[1, -1, 0.5], [-1, 1, -0.5], [0.5, -0.5, 1]])]:
        data = np.array(mx.random.multivariate_normal(mx.array(mean), mx.array(cov), shape=(n,),
                                                      key=mx.random.key(3)))
        assert data.shape == (n, len(mean)) and data.dtype == np.float32
        np.testing.assert_allclose(data.mean(axis=0), mean, atol=0.03)
        np.testing.assert_allclose(np.cov(data.T, bias=True), cov, atol=0.03)
    batched = mx.random.multivariate_normal(mx.zeros((3, 2)), mx.eye(2), shape=(4, 3))
    assert batched.shape == (4, 3, 2)
    with pytest.raises(ValueError):
        mx.random.multivariate_normal(mx.zeros(2), mx.eye(2), dtype=mx.float16)
    with pytest.raises(ValueError):
        mx.random.multivariate_normal(mx.zeros((2, 2)), mx.zeros((2, 2)), shape=(3,))
    with pytest.raises(ValueError):
        mx.random.multivariate_normal(mx.zeros(3), mx.eye(2))
    with pytest.raises(ValueError):
        mx.random.multivariate_normal(mx.zeros(2), mx.zeros((2, 3)))
