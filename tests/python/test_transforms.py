"""grad, value_and_grad, vjp, jvp, vmap, custom_function, checkpoint."""
from collections import namedtuple

import numpy as np
import pytest

import weft as mx


def test_grad_and_value_and_grad():
    f = lambda x: mx.sum(x * x * x)
    x = mx.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(np.array(mx.grad(f)(x)), 3 * np.array([1.0, 4.0, 9.0]))
    value, g = mx.value_and_grad(f)(x)
    assert value.item() == 36.0 and g.tolist() == [3.0, 12.0, 27.0]
    # Higher order.
    g2 = mx.grad(lambda x: mx.grad(lambda y: (y * y * y).sum())(x).sum())(x)
    assert g2.tolist() == [6.0, 12.0, 18.0]


def test_argnums_argnames_and_trees():
    def loss(params, x, scale=1.0, *, bias):
        return mx.sum((params["w"] * x + params["b"][0]) * scale) + mx.sum(bias)

    params = {"w": mx.array([1.0, 2.0]), "b": [mx.array(0.5)]}
    x = mx.array([3.0, 4.0])
    bias = mx.array([1.0])
    g = mx.grad(loss)(params, x, bias=bias)
    assert g["w"].tolist() == [3.0, 4.0] and g["b"][0].item() == 2.0
    gp, gx = mx.grad(loss, argnums=(0, 1))(params, x, bias=bias)
    assert gx.tolist() == [1.0, 2.0]
    value, (pos, kw) = mx.value_and_grad(loss, argnums=1, argnames="bias")(params, x, bias=bias)
    assert pos.tolist() == [1.0, 2.0] and kw["bias"].tolist() == [1.0]
    with pytest.raises(ValueError):
        mx.grad(loss, argnums=5)(params, x, bias=bias)


def test_aux_outputs():
    def f(x):
        return (x * x).sum(), {"aux": x + 1}

    (value, aux), g = mx.value_and_grad(f)(mx.array([1.0, 2.0]))
    assert value.item() == 5.0 and aux["aux"].tolist() == [2.0, 3.0] and g.tolist() == [2.0, 4.0]


def test_grad_needs_a_float_scalar():
    with pytest.raises(ValueError):
        mx.grad(lambda x: x * 2)(mx.array([1.0, 2.0]))
    with pytest.raises(ValueError):
        mx.grad(lambda x: x.sum())(1.0)
    assert mx.grad(lambda x: x.sum())(mx.array([1.0])).tolist() == [1.0]


def test_exceptions_in_traced_functions_come_back():
    class Boom(Exception):
        pass

    def f(x):
        raise Boom("inside the trace")

    with pytest.raises(Boom, match="inside the trace") as info:
        mx.grad(f)(mx.array(1.0))
    assert any("raise Boom" in str(entry.statement) for entry in info.traceback)
    assert mx.grad(lambda x: x * 3)(mx.array(1.0)).item() == 3.0


def test_vjp_and_jvp():
    f = lambda x, y: [x * y, mx.sin(x)]
    x, y = mx.array([1.0, 2.0]), mx.array([3.0, 4.0])
    outs, vjps = mx.vjp(f, [x, y], [mx.ones((2,)), mx.zeros((2,))])
    assert outs[0].tolist() == [3.0, 8.0] and vjps[0].tolist() == [3.0, 4.0]
    assert vjps[1].tolist() == [1.0, 2.0]
    outs, jvps = mx.jvp(lambda x: x * x, [x], [mx.ones((2,))])
    assert jvps[0].tolist() == [2.0, 4.0]


def test_vmap_axes():
    x = mx.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    assert mx.vmap(lambda v: v.sum())(x).tolist() == [6.0, 22.0, 38.0]
    assert mx.vmap(lambda v: v.sum(), in_axes=1)(x).tolist() == [12.0, 15.0, 18.0, 21.0]
    out = mx.vmap(lambda a, b: a * b, in_axes=(0, None))(x, mx.array([1.0, 0, 0, 0]))
    assert out.tolist() == [[0, 0, 0, 0], [4, 0, 0, 0], [8, 0, 0, 0]]
    out = mx.vmap(lambda v: v * 2, out_axes=1)(x)
    assert out.shape == (4, 3)
    tree = mx.vmap(lambda d: {"s": d["a"] + d["b"]})({"a": x, "b": x})
    assert tree["s"].shape == (3, 4)
    with pytest.raises(ValueError):
        mx.vmap(lambda a: a, in_axes=(0, 1))(x)


def test_custom_function_rules():
    @mx.custom_function
    def f(x, y):
        return x * y

    @f.vjp
    def f_vjp(primals, cotangent, output):
        x, y = primals
        return 10 * cotangent * y, 10 * cotangent * x

    @f.jvp
    def f_jvp(primals, tangents):
        return primals[1] * tangents[0] * 100

    x, y = mx.array(2.0), mx.array(3.0)
    assert f(x, y).item() == 6.0
    assert mx.grad(f)(x, y).item() == 30.0
    assert mx.jvp(f, [x, y], [mx.array(1.0), mx.array(0.0)])[1][0].item() == 300.0
    assert f.__name__ == "f"
    assert f_vjp is f and f_jvp is f  # the decorators return the custom function

    @mx.custom_function
    def g(x):
        return x

    @g.vjp
    def g(x, dx, out):  # MLX's own pattern: the name stays the custom function
        return dx * 3

    assert mx.grad(lambda x: g(x).sum())(mx.ones((2,))).tolist() == [3.0, 3.0]


def test_custom_function_of_one_argument_gets_it_bare_and_custom_vmap():
    # As MLX: one argument reaches the rules as itself, not a 1-tuple.
    my_exp = mx.custom_function(mx.exp)

    @my_exp.vjp
    def my_exp_vjp(x, ct, out):
        return mx.ones_like(x) * 42

    @my_exp.jvp
    def my_exp_jvp(x, t):
        return mx.ones_like(x) * 7 * t

    @my_exp.vmap
    def my_exp_vmap(x, axis):
        return mx.ones_like(x) * 3, axis

    assert mx.grad(my_exp)(mx.array(1.0)).item() == 42.0
    assert mx.jvp(my_exp, [mx.array(1.0)], [mx.array(1.0)])[1][0].item() == 7.0
    assert mx.vmap(my_exp)(mx.ones(4)).tolist() == [3.0] * 4
    assert mx.vmap(my_exp, in_axes=1)(mx.ones((2, 5))).shape == (5, 2)

    constant = mx.custom_function(lambda x: x * 2)

    @constant.vmap
    def constant_vmap(x, axis):  # an unbatched output: the same for every example
        return mx.array([1.0, 2.0]), None

    np.testing.assert_array_equal(np.array(mx.vmap(constant)(mx.ones((3, 2)))),
                                  np.array([[1.0, 2.0]] * 3))


def test_checkpoint_gives_the_same_gradient():
    f = lambda x: mx.sum(mx.exp(mx.sin(x)) * x)
    x = mx.array([0.1, 0.2, 0.3])
    np.testing.assert_allclose(np.array(mx.grad(mx.checkpoint(f))(x)), np.array(mx.grad(f)(x)),
                               rtol=1e-6)


def test_namedtuple_trees():
    Pair = namedtuple("Pair", "a b")
    g = mx.grad(lambda p: (p.a * p.b).sum())(Pair(mx.array(2.0), mx.array(5.0)))
    assert isinstance(g, Pair) and g.a.item() == 5.0 and g.b.item() == 2.0


def test_stop_gradient():
    assert mx.grad(lambda x: (mx.stop_gradient(x) * x).sum())(mx.array([3.0])).tolist() == [3.0]


def test_vjp_with_respect_to_indices_is_refused_as_in_mlx():
    x = mx.array([1.0, 2.0, 3.0, 4.0])
    idx = mx.array([1, 3])
    cases = [
        (lambda x, i: mx.take(x, i), [x, idx], [mx.ones((2,))]),
        (lambda x, i: mx.take_along_axis(x, i, axis=0), [x[:, None], idx[:, None]],
         [mx.ones((2, 1))]),
        (lambda x, i: x.at[i].add(mx.array([5.0, 6.0])), [x, idx], [mx.ones((4,))]),
        (lambda x, i: mx.put_along_axis(x, i, mx.array([[5.0], [6.0]]), axis=0),
         [x[:, None], idx[:, None]], [mx.ones((4, 1))]),
        # the indices computed from the integer argument
        (lambda x, i: mx.take(x, (i + 1) % 4), [x, idx], [mx.ones((2,))]),
    ]
    for fun, primals, cotangents in cases:
        with pytest.raises(ValueError, match="stop_gradient"):
            mx.vjp(fun, primals, cotangents)
    # Allowed: the indices stopped, or computed from a float argument
    _, (g, gi) = mx.vjp(lambda x, i: mx.take(x, mx.stop_gradient(i)), [x, idx], [mx.ones((2,))])
    assert g.tolist() == [0.0, 1.0, 0.0, 1.0] and gi.tolist() == [0, 0]
    g = mx.grad(lambda w: mx.take(w, mx.argsort(w)[:2]).sum())(mx.array([4.0, 3.0, 2.0, 1.0]))
    assert g.tolist() == [0.0, 0.0, 1.0, 1.0]
    # and so is a second derivative through sort's rule (indices made inside it)
    h = mx.grad(lambda w: mx.grad(lambda v: (mx.sort(v) ** 3).sum())(w).sum())(
        mx.array([3.0, 1.0, 2.0]))
    assert h.tolist() == [18.0, 6.0, 12.0]


def test_single_argnum_in_a_tuple_gives_a_bare_gradient_and_aux_may_hold_values():
    g = mx.grad(lambda x, y: (x * y).sum(), argnums=(0,))(mx.array(2.0), mx.array(3.0))
    assert isinstance(g, mx.array) and g.item() == 3.0
    (value, aux), g = mx.value_and_grad(lambda x: ((x * x).sum(), {"n": 3, "s": "hi"}))(mx.array(2.0))
    assert value.item() == 4.0 and aux == {"n": 3, "s": "hi"} and g.item() == 4.0


def test_arrays_escaping_a_trace_stay_usable():
    # An intermediate stored by the traced function outlives the transform.
    kept = []

    def f(x):
        y = x * 2
        kept.append(y + 1)
        return y.sum()

    mx.grad(f)(mx.array([1.0, 2.0]))
    assert kept[0].tolist() == [3.0, 5.0]


def test_argument_rules_follow_mlx():
    f = lambda x, y: x * y
    a, b = mx.array(0.5), mx.array(2.0)
    with pytest.raises(ValueError):
        mx.grad(f, argnums=-1)  # negative indices are refused when the transform is made
    with pytest.raises(ValueError):
        mx.grad(f, argnums=[])  # nothing to differentiate
    with pytest.raises(TypeError):
        mx.grad(f, argnums=(None, None))
    with pytest.raises(ValueError):
        mx.grad(f)(x=a, y=b)  # argument 0 was not passed positionally
    pos, kw = mx.grad(f, argnums=[], argnames=["y"])(a, y=b)
    assert pos is None and list(kw) == ["y"] and kw["y"].item() == 0.5
    # grad wants a scalar array; value_and_grad also takes (value, aux...).
    with pytest.raises(ValueError):
        mx.grad(lambda x: (x.sum(), 1))(mx.ones((2,)))
    with pytest.raises(ValueError):
        mx.grad(lambda x: x.sum(keepdims=True))(mx.ones((2, 2)))


def test_writes_into_argument_containers_persist():
    # A function may update its (model's) containers in place while it is
    # differentiated; what it did not write keeps the caller's arrays.
    model = [mx.array(3.0), mx.array(1.0), mx.array(5.0)]
    first, last = model[0], model[2]

    def loss(m):
        m[1] = mx.array(2.0)
        return m[0] * m[0]

    g = mx.grad(loss)(model)
    assert g[0].item() == 6.0
    assert model[1].item() == 2.0
    assert model[0] is first and model[2] is last


def test_put_along_axis_matches_numpy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[1], [0], [3]])
    vals = np.array([[10.0], [20.0], [30.0]], dtype=np.float32)
    want = a.copy()
    np.put_along_axis(want, idx, vals, axis=1)
    got = mx.put_along_axis(mx.array(a), mx.array(idx), mx.array(vals), axis=1)
    assert np.array_equal(np.array(got), want)
    flat_want = a.copy().reshape(-1)
    flat_want[[0, 5]] = [-1, -2]
    got = mx.put_along_axis(mx.array(a), mx.array([0, 5]), mx.array([-1.0, -2.0]))
    assert np.array_equal(np.array(got), flat_want.reshape(3, 4))


def test_vmap_axes_trees_follow_mlx():
    tree = {"a": mx.array(np.ones((2, 3), np.float32)),
            "b": (mx.array(np.full((2, 3), 2.0, np.float32)), mx.array(np.full((3, 2), 3.0, np.float32)))}
    f = lambda t: (t["a"] + t["b"][0]) * t["b"][1]
    # One argument: in_axes describes it (a prefix of its tree).
    out = mx.vmap(f, in_axes={"a": 0, "b": (0, 1)})(tree)
    assert np.array_equal(np.array(out), np.full((2, 3), 9.0, np.float32))
    with pytest.raises(ValueError):
        mx.vmap(f, in_axes={"a": 0, "b": ((0, 0), 0)})(tree)
    # A 1-tuple may stand for an output's axis; negative axes count from the end.
    x = mx.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = mx.vmap(lambda v: v * 2, in_axes=-1, out_axes=(1,))(x)
    assert np.array_equal(np.array(y), np.arange(6, dtype=np.float32).reshape(2, 3) * 2)
    with pytest.raises(ValueError):
        mx.vmap(lambda v: v, in_axes=2)(x)


def test_complex_custom_vjp_is_taken_as_written():
    # The engine applies the adjoint convention through built-in rules only:
    # a custom function's vjp is the user's, as in MLX.
    c = mx.array(1 + 2j, dtype=mx.complex64)

    @mx.custom_function
    def f(z):
        return z * c

    @f.vjp
    def f_vjp(primals, cotangent, output):
        return cotangent * mx.array(5j, dtype=mx.complex64)

    z = mx.array(0.5 + 0.25j, dtype=mx.complex64)
    ct = mx.array(1 + 1j, dtype=mx.complex64)
    (got,) = mx.vjp(f, [z], [ct])[1]
    assert got.item() == (1 + 1j) * 5j
