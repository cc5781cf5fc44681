"""Transforms rebuild the container types of their outputs: list and tuple
subclasses come back as themselves, as namedtuples and dicts do."""
from typing import NamedTuple

import numpy as np

import weft as mx


class Pair(tuple):
    pass


class Stack(list):
    pass


class State(NamedTuple):
    a: mx.array
    b: mx.array


def test_vmap_keeps_sequence_subclasses():
    out = mx.vmap(lambda t: Pair([t[0] + 1, t[1] * 2]))(Pair([mx.array([1, 2]), mx.array([3, 4])]))
    assert type(out) is Pair
    assert out[0].tolist() == [2, 3] and out[1].tolist() == [6, 8]
    out = mx.vmap(lambda s: Stack([s[0] - 1]))(Stack([mx.array([5, 6])]))
    assert type(out) is Stack and out[0].tolist() == [4, 5]
    st = mx.vmap(lambda s: State(s.a + s.b, s.b))(State(mx.array([1, 2]), mx.array([10, 20])))
    assert type(st) is State and st.a.tolist() == [11, 22]


def test_grad_of_subclass_argument():
    g = mx.grad(lambda p: (p[0] * p[1]).sum())(Pair([mx.array([1.0, 2.0]), mx.array([3.0, 4.0])]))
    assert type(g) is Pair
    np.testing.assert_allclose(np.array(g[0]), [3.0, 4.0])
    np.testing.assert_allclose(np.array(g[1]), [1.0, 2.0])


def test_eval_takes_arrays_lists_and_trees():
    """eval and async_eval take arrays and flat lists of them as they are
    (no tree walk) and anything else as trees; either way every array in
    them is evaluated and nothing else is touched."""

    def fresh(n):
        return [mx.array([float(i)]) + 1 for i in range(n)]

    for evaluate in (mx.eval, mx.async_eval):
        a, b, c, d, e, f, g = fresh(7)
        left = mx.array([9.0]) * 2
        evaluate(a, [b, c], (d,), {"e": e}, [f, 3, None], State(g, g), None, "text")
        if evaluate is mx.async_eval:
            mx.eval(a, b, c, d, e, f, g)
        assert all(x._is_evaluated() for x in (a, b, c, d, e, f, g))
        assert [x.item() for x in (a, b, c, d, e, f, g)] == [1, 2, 3, 4, 5, 6, 7]
        assert not left._is_evaluated()
        for x in fresh(3):  # a flat list alone, a tuple alone
            evaluate([x])
            evaluate((x,))
            mx.eval(x)
            assert x._is_evaluated()
        evaluate()
        evaluate([])
