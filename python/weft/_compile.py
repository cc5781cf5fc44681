"""compile(fun, inputs=None, outputs=None, shapeless=False), as mlx.core.compile.

One compiled weft Function per (pytree structure of the arguments, their
non-array constants, declared state): weft's function ids, never reused, are
the cache key; id(fun) never is. The trace body runs with the GIL taken by
weft's callback; the call itself releases it (it may wait for another thread's
trace, bounded by weft's single-flight wait).
"""
import functools
import threading

from . import _core
from ._tree import flatten, key_of, replace_leaves, unflatten

array = _core.array


class _Entry:
    __slots__ = ("function", "out_tree", "n_out")

    def __init__(self):
        self.function = None
        self.out_tree = None
        self.n_out = 0


class _Compiled:
    def __init__(self, fun, inputs, outputs, shapeless):
        functools.update_wrapper(self, fun)
        self._fun = fun
        self._inputs = inputs
        self._outputs = outputs
        self._shapeless = bool(shapeless)
        self._entries = {}
        self._lock = threading.Lock()

    def _state_leaves(self):
        if self._inputs is None:
            return []
        leaves, _ = flatten(self._inputs)
        return [x for x in leaves if isinstance(x, array)]

    def _entry_for(self, treedef, n_args, n_state):
        key = (key_of(treedef), n_state)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                return entry
            entry = _Entry()
            fun, inputs, outputs = self._fun, self._inputs, self._outputs

            def body(xs):
                args, kwargs = unflatten(treedef, xs[:n_args])
                saved = None
                if n_state:
                    saved = self._state_leaves()
                    replace_leaves(inputs, xs[n_args:])
                try:
                    out = fun(*args, **kwargs)
                    out_leaves, out_tree = flatten(out)
                    for leaf in out_leaves:
                        if not isinstance(leaf, array):
                            raise ValueError(
                                "compiled functions must return arrays (or trees of arrays), "
                                f"got {type(leaf).__name__}")
                    entry.out_tree = out_tree
                    entry.n_out = len(out_leaves)
                    if outputs is not None:
                        state_out, _ = flatten(outputs)
                        out_leaves = out_leaves + [x for x in state_out if isinstance(x, array)]
                    return out_leaves
                finally:
                    if saved is not None:
                        replace_leaves(inputs, saved)

            entry.function = _core._compile(_core.Function(body), self._shapeless)
            self._entries[key] = entry
            return entry

    def __call__(self, *args, **kwargs):
        leaves, treedef = flatten((args, kwargs), constants=True)
        state = self._state_leaves()
        entry = self._entry_for(treedef, len(leaves), len(state))
        results = entry.function(leaves + state)
        outs = results[:entry.n_out]
        if self._outputs is not None:
            replace_leaves(self._outputs, results[entry.n_out:])
        return unflatten(entry.out_tree, outs)

    def _stats(self):
        """The weft compile counters of this function, summed over its entries."""
        total = {}
        with self._lock:
            entries = list(self._entries.values())
        for entry in entries:
            for k, v in _core._compile_stats(entry.function).items():
                total[k] = total.get(k, 0) + v
        return total


def compile(fun, inputs=None, outputs=None, shapeless=False):
    """A compiled version of fun: traced once per argument structure,
    constants and dtypes/shapes, cached process-wide, replayed."""
    if not callable(fun):
        raise TypeError("compile expects a callable")
    return _Compiled(fun, inputs, outputs, shapeless)


def disable_compile():
    """Compiled functions call their function directly (process-wide)."""
    _core._set_compile_mode(_core._COMPILE_DISABLED)


def enable_compile():
    """Compiled functions trace and replay again (process-wide)."""
    _core._set_compile_mode(_core._COMPILE_ENABLED)
