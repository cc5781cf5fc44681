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
from ._tree import _LEAF, flatten, key_of, replace_leaves, unflatten

array = _core.array


class _Outputs:
    """What the traces learned about their outputs: the output tree and count
    of each input signature (dtypes, and shapes unless shapeless), since one
    function may return differently shaped trees for different dtypes (MLX
    keeps them per trace too). The trace body refers to this and never to
    the compiled Function that calls it: a cycle through the C Function would
    be invisible to Python's garbage collector."""

    __slots__ = ("by_signature", "shapeless")

    def __init__(self, shapeless):
        self.by_signature = {}
        self.shapeless = shapeless

    def signature(self, xs):
        if self.shapeless:
            return tuple((x.dtype, x.ndim) for x in xs)
        return tuple((x.dtype, x.shape) for x in xs)


_CONSTANT_TYPES = (bool, int, float, str, type(None))


def _check_constants(treedef):
    """ValueError for an argument leaf that is neither an array nor a constant
    compile can key on (MLX's rule: floats, ints, strings or None)."""
    if treedef == _LEAF:
        return
    kind = treedef[0]
    if kind == "const":
        if not isinstance(treedef[2], _CONSTANT_TYPES):
            raise ValueError(
                "compile: function arguments must be trees of arrays or constants (floats, "
                f"ints, strings or None), got {type(treedef[2]).__name__}")
        return
    children = treedef[3] if kind == "dict" else treedef[2] if kind in (
        "namedtuple", "sequence") else treedef[1]
    for child in children:
        _check_constants(child)


class _Entry:
    __slots__ = ("function", "outputs")

    def __init__(self, function, outputs):
        self.function = function
        self.outputs = outputs


def _state_leaves(tree):
    if tree is None:
        return []
    leaves, _ = flatten(tree)
    return [x for x in leaves if isinstance(x, array)]


class _Compiled:
    def __init__(self, fun, inputs, outputs, shapeless):
        functools.update_wrapper(self, fun)
        self._fun = fun
        self._inputs = inputs
        self._outputs = outputs
        self._shapeless = bool(shapeless)
        self._entries = {}
        self._lock = threading.Lock()

    def _entry_for(self, treedef, n_args, n_state):
        key = (key_of(treedef), n_state)
        # acquire/release, not `with`: CPython calls a lock's __exit__ with an
        # argument tuple, and when that allocation fails (MemoryError) the lock
        # stays held and every later call waits forever
        # (tests/python/test_python_nomemory.py); release() allocates nothing.
        self._lock.acquire()
        try:
            entry = self._entries.get(key)
            if entry is not None:
                return entry
            _check_constants(treedef)
            learned = _Outputs(self._shapeless)
            fun, inputs, outputs = self._fun, self._inputs, self._outputs

            def body(xs):
                args, kwargs = unflatten(treedef, xs[:n_args])
                saved = None
                if n_state:
                    saved = _state_leaves(inputs)
                    replace_leaves(inputs, xs[n_args:])
                try:
                    out = fun(*args, **kwargs)
                    # Non-array leaves (None, numbers) stay in the tree, as in MLX.
                    out_leaves, out_tree = flatten(out, constants=True)
                    learned.by_signature[learned.signature(xs)] = (out_tree, len(out_leaves))
                    if outputs is not None:
                        state_out, _ = flatten(outputs)
                        out_leaves = out_leaves + [x for x in state_out if isinstance(x, array)]
                    return out_leaves
                finally:
                    if saved is not None:
                        replace_leaves(inputs, saved)

            entry = _Entry(_core._compile(_core.Function(body), self._shapeless), learned)
            self._entries[key] = entry
            return entry
        finally:
            self._lock.release()

    def __call__(self, *args, **kwargs):
        leaves, treedef = flatten((args, kwargs), constants=True)
        state = _state_leaves(self._inputs)
        entry = self._entry_for(treedef, len(leaves), len(state))
        inputs = leaves + state
        results = entry.function(inputs)
        out_tree, count = entry.outputs.by_signature[entry.outputs.signature(inputs)]
        if self._outputs is not None:
            replace_leaves(self._outputs, results[count:])
        return unflatten(out_tree, results[:count])

    def _stats(self):
        """The weft compile counters of this function, summed over its entries."""
        total = {}
        self._lock.acquire()
        try:
            entries = list(self._entries.values())
        finally:
            self._lock.release()
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
