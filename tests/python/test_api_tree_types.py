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
