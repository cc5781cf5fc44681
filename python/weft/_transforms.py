"""grad, value_and_grad, vjp, jvp, vmap, custom_function, checkpoint over
pytrees, on weft's C transforms (weft._core: flat lists of arrays)."""
import functools

from . import _core
from ._tree import flatten, replace_leaves, unflatten

array = _core.array


def _as_list(out):
    """A function's output as (leaves, treedef); leaves must be arrays."""
    leaves, treedef = flatten(out)
    for leaf in leaves:
        if not isinstance(leaf, array):
            raise ValueError(
                f"transformed functions must return arrays (or trees of arrays), got {type(leaf).__name__}")
    return leaves, treedef


def _check_arrays(leaves, what):
    for leaf in leaves:
        if not isinstance(leaf, array):
            raise ValueError(f"{what} must be arrays (or trees of arrays), got {type(leaf).__name__}")


def vjp(fun, primals, cotangents):
    """(outputs, vjps): fun(*primals) and the cotangents pulled back to the primals."""
    primals = list(primals)
    cotangents = list(cotangents)
    _check_arrays(primals, "vjp primals")

    def flat(xs):
        return _as_list(fun(*xs))[0]

    return _core._vjp(_core.Function(flat), primals, cotangents)


def jvp(fun, primals, tangents):
    """(outputs, jvps): fun(*primals) and the tangents pushed forward."""
    primals = list(primals)
    tangents = list(tangents)
    _check_arrays(primals, "jvp primals")

    def flat(xs):
        return _as_list(fun(*xs))[0]

    return _core._jvp(_core.Function(flat), primals, tangents)


def _normalize_argnums(argnums, argnames):
    """(sorted argnums, argnames) checked as MLX does when the transform is
    made: ints only, none negative or repeated, at least one of the two."""
    if argnames is None:
        argnames = []
    elif isinstance(argnames, str):
        argnames = [argnames]
    else:
        argnames = list(argnames)
    for name in argnames:
        if not isinstance(name, str):
            raise TypeError(f"argnames must be strings, got {type(name).__name__}")
    if argnums is None:
        argnums = [] if argnames else [0]
    elif isinstance(argnums, int) and not isinstance(argnums, bool):
        argnums = [argnums]
    elif isinstance(argnums, (list, tuple)):
        for i in argnums:
            if not isinstance(i, int) or isinstance(i, bool):
                raise TypeError(f"argnums must be ints, got {type(i).__name__}")
        argnums = list(argnums)
    else:
        raise TypeError(f"argnums must be an int or a sequence of ints, got {type(argnums).__name__}")
    if not argnums and not argnames:
        raise ValueError("gradient with respect to no argument requested")
    if any(i < 0 for i in argnums):
        raise ValueError(f"cannot differentiate negative argument index {min(argnums)}")
    if len(set(argnums)) != len(argnums):
        raise ValueError(f"argnums {argnums} repeat an index")
    return sorted(argnums), argnames


def _restore_untouched(trees, tracers, originals):
    """Where the differentiated function left a traced argument in the
    caller's containers, put the caller's array back; what it wrote stays
    (MLX's behaviour: a function may update model state in place)."""
    current, _ = flatten(trees)
    if len(current) != len(tracers):
        return
    restored = [o if c is t else c for c, t, o in zip(current, tracers, originals)]
    replace_leaves(trees, restored)


def _check_value(out, scalar_only):
    """The differentiated value: an array, or (value_and_grad) a tuple whose
    first entry is one; of shape () either way."""
    first = out
    if not isinstance(out, array):
        if scalar_only or not isinstance(out, tuple) or not out or not isinstance(out[0], array):
            what = "a scalar array" if scalar_only else \
                "a scalar array or a tuple whose first entry is a scalar array"
            raise ValueError(f"the function to differentiate must return {what}, "
                             f"got {type(out).__name__}")
        first = out[0]
    if first.ndim != 0:
        raise ValueError(f"the function to differentiate must return a scalar; its output has "
                         f"shape {first.shape}")


def _value_and_grad_impl(fun, argnums, argnames, scalar_only):
    argnums, argnames = _normalize_argnums(argnums, argnames)

    def wrapped(*args, **kwargs):
        if argnums and argnums[-1] >= len(args):
            raise ValueError(f"cannot differentiate argument {argnums[-1]}: the function was "
                             f"called with {len(args)} positional arguments")
        for name in argnames:
            if name not in kwargs:
                raise ValueError(f"cannot differentiate keyword argument '{name}': it was not "
                                 f"passed (keywords given: {sorted(kwargs)})")
        diff_trees = [args[i] for i in argnums] + [kwargs[n] for n in argnames]
        leaves, treedef = flatten(diff_trees)
        _check_arrays(leaves, "arguments to differentiate")
        holder = {}

        def flat(xs):
            # The traced arrays go into the caller's own containers (in place).
            trees = replace_leaves(list(diff_trees), xs)
            new_args = list(args)
            for i, t in zip(argnums, trees):
                new_args[i] = t
            new_kwargs = dict(kwargs)
            for n, t in zip(argnames, trees[len(argnums):]):
                new_kwargs[n] = t
            try:
                out = fun(*new_args, **new_kwargs)
            finally:
                _restore_untouched(trees, xs, leaves)
            _check_value(out, scalar_only)
            # Auxiliary outputs may hold Python values: they travel in the tree.
            out_leaves, out_tree = flatten(out, constants=True)
            holder["tree"] = out_tree
            return out_leaves

        if leaves:
            results = _core._value_and_grad(_core.Function(flat), list(range(len(leaves))))(leaves)
            nout = len(results) - len(leaves)
            values, grads = results[:nout], results[nout:]
        else:
            values, grads = flat([]), []
        value = unflatten(holder["tree"], values)
        grad_trees = unflatten(treedef, grads)
        pos = grad_trees[:len(argnums)]
        pos = None if not pos else pos[0] if len(pos) == 1 else tuple(pos)
        if argnames:
            kw = {n: g for n, g in zip(argnames, grad_trees[len(argnums):])}
            return value, (pos, kw)
        return value, pos

    return wrapped


def value_and_grad(fun, argnums=None, argnames=None):
    """A function returning (fun's value, gradients of its first output)."""
    impl = _value_and_grad_impl(fun, argnums, argnames, scalar_only=False)
    return functools.wraps(fun)(impl)


def grad(fun, argnums=None, argnames=None):
    """A function returning the gradients of fun's scalar output."""
    impl = _value_and_grad_impl(fun, argnums, argnames, scalar_only=True)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        return impl(*args, **kwargs)[1]

    return wrapped


def _flat_axes(tree, axes, what):
    """One axis (or None) per array leaf of `tree`, from `axes`: a prefix of
    tree (an int or None covers a whole subtree; a 1-tuple may stand for the
    axis of an array), MLX's rules. Negative axes count from each leaf's end."""
    flat = []

    def axis_of(x, ax):
        if isinstance(ax, tuple):
            if len(ax) != 1:
                raise ValueError(f"{what}: an axis must be an int or None, got {ax}")
            ax = ax[0]
        if ax is None:
            return None
        if not isinstance(ax, int) or isinstance(ax, bool):
            raise ValueError(f"{what}: an axis must be an int or None, got {type(ax).__name__}")
        norm = ax + x.ndim if ax < 0 else ax
        if not 0 <= norm < x.ndim:
            raise ValueError(f"{what}: axis {ax} is out of range for an array of shape {x.shape}")
        return norm

    def walk(t, ax):
        if isinstance(t, array):
            flat.append(axis_of(t, ax))
            return
        if ax is None or (isinstance(ax, int) and not isinstance(ax, bool)):
            leaves, _ = flatten(t)
            _check_arrays(leaves, "vmap arguments and outputs")
            flat.extend(axis_of(x, ax) for x in leaves)
            return
        if isinstance(t, (list, tuple)) and isinstance(ax, (list, tuple)):
            if len(t) != len(ax):
                raise ValueError(f"{what} has {len(ax)} entries for {len(t)}")
            for x, a in zip(t, ax):
                walk(x, a)
            return
        if isinstance(t, dict) and isinstance(ax, dict):
            if set(t) != set(ax):
                raise ValueError(f"{what} has keys {sorted(ax)} for {sorted(t)}")
            for k in t:
                walk(t[k], ax[k])
            return
        if not isinstance(t, (list, tuple, dict)):
            raise ValueError(f"vmap arguments and outputs must be arrays, got {type(t).__name__}")
        raise ValueError(f"{what} does not match the structure of the arguments")

    try:
        walk(tree, axes)
    finally:
        walk = None  # a recursive closure refers to itself; without this its frames (and arrays) wait for the gc
    return flat


def vmap(fun, in_axes=0, out_axes=0):
    """fun mapped over a batch axis of its inputs (in_axes) and outputs
    (out_axes). With one argument, in_axes describes that argument."""

    @functools.wraps(fun)
    def wrapped(*args):
        leaves, treedef = flatten(list(args))
        _check_arrays(leaves, "vmap arguments")
        axes = _flat_axes(args[0] if len(args) == 1 else args, in_axes, "in_axes")
        if all(a is None for a in axes):
            raise ValueError("vmap needs at least one mapped input (in_axes all None)")
        holder = {}

        def flat(xs):
            out_leaves, out_tree = _as_list(fun(*unflatten(treedef, xs)))
            holder["tree"] = out_tree
            return out_leaves

        outs = _core._vmap(_core.Function(flat), axes)(leaves)
        tree = holder["tree"]
        per_leaf = _flat_axes(unflatten(tree, outs), out_axes, "out_axes")
        moved = []
        for o, ax in zip(outs, per_leaf):
            if ax is None:
                moved.append(o[0])
            elif ax != 0:
                moved.append(_core.moveaxis(o, 0, ax))
            else:
                moved.append(o)
        return unflatten(tree, moved)

    return wrapped


class custom_function:
    """A function with its own vjp, jvp and vmap rules (decorators .vjp,
    .jvp, .vmap), as mlx.core.custom_function. Each decorator returns the
    custom function itself, as MLX's do, so `@f.vjp def f(...)` keeps f."""

    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self._fun = fun
        self._vjp = None
        self._jvp = None
        self._vmap = None

    def vjp(self, rule):
        self._vjp = rule
        return self

    def jvp(self, rule):
        self._jvp = rule
        return self

    def vmap(self, rule):
        self._vmap = rule
        return self

    def __call__(self, *args):
        leaves, treedef = flatten(list(args))
        _check_arrays(leaves, "custom_function arguments")
        n = len(leaves)
        holder = {}

        def forward(xs):
            out_leaves, out_tree = _as_list(self._fun(*unflatten(treedef, xs)))
            holder["tree"] = out_tree
            return out_leaves

        # As MLX: a function of one argument gets that argument (and its
        # tangent or axis) in the rules, not a 1-tuple.
        def one_or_all(values):
            return values[0] if len(args) == 1 else values

        def vjp_rule(xs):
            primals = tuple(unflatten(treedef, xs[:n]))
            m = (len(xs) - n) // 2
            cot = unflatten(holder["tree"], xs[n:n + m])
            outs = unflatten(holder["tree"], xs[n + m:])
            grads = self._vjp(one_or_all(primals), cot, outs)
            if len(args) == 1 or isinstance(grads, array):
                grads = (grads,)
            g_leaves, _ = flatten(list(grads))
            return g_leaves

        def jvp_rule(xs):
            primals = tuple(unflatten(treedef, xs[:n]))
            tangents = tuple(unflatten(treedef, xs[n:]))
            out = self._jvp(one_or_all(primals), one_or_all(tangents))
            return _as_list(out)[0]

        def vmap_rule(xs):
            inputs = tuple(unflatten(treedef, xs))
            axes = tuple(unflatten(treedef, [0] * n))
            outs, out_axes = self._vmap(one_or_all(inputs), one_or_all(axes))
            out_leaves, _ = _as_list(outs)
            per_leaf = _flat_axes(outs, out_axes, "custom_function vmap out_axes")
            batch = xs[0].shape[0] if xs else 1
            # weft takes every output batched at axis 0; an unbatched one (None)
            # is the same for every example
            return [_core.broadcast_to(_core.expand_dims(o, 0), [batch, *o.shape]) if ax is None
                    else o if ax == 0 else _core.moveaxis(o, ax, 0)
                    for o, ax in zip(out_leaves, per_leaf)]

        fn = _core._custom_function(
            _core.Function(forward),
            _core.Function(vjp_rule) if self._vjp else None,
            _core.Function(jvp_rule) if self._jvp else None,
            _core.Function(vmap_rule) if self._vmap else None)
        outs = fn(leaves)
        return unflatten(holder["tree"], outs)


def checkpoint(fun):
    """fun whose intermediates are recomputed in the backward pass."""

    @functools.wraps(fun)
    def wrapped(*args):
        leaves, treedef = flatten(list(args))
        _check_arrays(leaves, "checkpoint arguments")
        holder = {}

        def flat(xs):
            out_leaves, out_tree = _as_list(fun(*unflatten(treedef, xs)))
            holder["tree"] = out_tree
            return out_leaves

        outs = _core._checkpoint(_core.Function(flat))(leaves)
        return unflatten(holder["tree"], outs)

    return wrapped
