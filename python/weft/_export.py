"""export_function, import_function, exporter and export_to_dot, as in
mlx.core, on weft's export and import (weft.h, "export and import").

Inputs follow MLX's conventions: positional arrays and keyword arrays, or a
single tuple/list of arrays and/or a dict of arrays. Each trace in a file
is tagged with its layout (how many positional arrays, which keyword
names, sorted), so a call with keywords in any order finds it; within a
tag weft picks the trace whose dtypes and shapes match (any shapes of the
same ranks for a shapeless export). Imported functions return a tuple of
arrays.

Not supported: exporting to a callback instead of a file (MLX's
export_function(callback, ...)), and functions that use custom kernels or
custom functions (their rules are Python callbacks a file cannot hold):
weft raises ValueError for the first and weft's error naming the primitive
for the second.
"""
import json
import os
import weakref

from . import _core
from ._tree import flatten

array = _core.array


def _invalid_inputs(where):
    return ValueError(
        f"[{where}] Inputs can either be a variable number of positional and keyword arrays "
        "or a single tuple and/or dictionary of arrays.")


def _all_arrays(values):
    return all(isinstance(v, array) for v in values)


def _array_dict(obj):
    return (isinstance(obj, dict) and all(isinstance(k, str) for k in obj)
            and _all_arrays(obj.values()))


def _inputs(args, kwargs, where):
    """(positional arrays, keyword arrays) of a call, under MLX's rules."""
    if not args:
        if not _all_arrays(kwargs.values()):
            raise _invalid_inputs(where)
        return [], dict(kwargs)
    if isinstance(args[0], array):
        if not _all_arrays(args) or not _all_arrays(kwargs.values()):
            raise _invalid_inputs(where)
        return list(args), dict(kwargs)
    if kwargs or len(args) > 2:
        raise _invalid_inputs(where)
    if len(args) == 1:
        if isinstance(args[0], (list, tuple)) and _all_arrays(args[0]):
            return list(args[0]), {}
        if _array_dict(args[0]):
            return [], dict(args[0])
        raise _invalid_inputs(where)
    if isinstance(args[0], (list, tuple)) and _all_arrays(args[0]) and _array_dict(args[1]):
        return list(args[0]), dict(args[1])
    raise _invalid_inputs(where)


def _layout(positional, keywords):
    """(tag, flat inputs, keyword names) of a call."""
    names = tuple(sorted(keywords))
    tag = json.dumps({"args": len(positional), "kwargs": list(names)})
    return tag, positional + [keywords[k] for k in names], names


def _file_path(file, metadata):
    if metadata is not None and not isinstance(metadata, str):
        raise TypeError("[export_function] metadata must be a string or None")
    if isinstance(file, (str, os.PathLike)):
        return os.fspath(file)
    if callable(file):
        raise ValueError("[export_function] exporting to a callback is not supported by weft; "
                         "give a file path")
    raise TypeError("[export_function] file must be a path")


class FunctionExporter:
    """Exports traces of one function to one file: call it with example
    inputs once per signature, then close it (or use it as a context
    manager). Made by exporter()."""

    def __init__(self, file, fun, shapeless=False, metadata=None):
        path = _file_path(file, metadata)
        self._fun = fun
        self._current = (0, ())  # the layout of the call being traced
        # The body reaches the exporter through a weak reference: weft's
        # handle (invisible to the garbage collector) then holds nothing
        # that leads back here, so an exporter in a cycle with fun (fun
        # closing over a dict that holds the exporter) is collected.
        exporter_ref = weakref.ref(self)

        def body(xs):
            ex = exporter_ref()
            nargs, names = ex._current
            out = ex._fun(*xs[:nargs], **dict(zip(names, xs[nargs:])))
            if isinstance(out, array):
                return [out]
            if isinstance(out, (list, tuple)) and _all_arrays(out):
                return list(out)
            raise ValueError("[export_function] Outputs can be either a single array, a tuple, "
                             "or a list of arrays.")

        self._handle = _core._exporter_new(path, _core.Function(body), bool(shapeless),
                                           metadata or "")

    def __call__(self, *args, **kwargs):
        positional, keywords = _inputs(args, kwargs, "export_function")
        tag, flat, names = _layout(positional, keywords)
        self._current = (len(positional), names)
        _core._exporter_add(self._handle, tag, flat)

    def close(self):
        _core._exporter_close(self._handle)

    def __enter__(self):
        return self

    def __exit__(self, exc_type=None, exc_value=None, traceback=None):
        self.close()


def exporter(file, fun, *, shapeless=False, metadata=None):
    """A FunctionExporter writing traces of fun to file."""
    return FunctionExporter(file, fun, shapeless, metadata)


def export_function(file, fun, *args, shapeless=False, metadata=None, **kwargs):
    """Traces fun on the example inputs and writes it to file (weft's format)."""
    positional, keywords = _inputs(args, kwargs, "export_function")
    ex = FunctionExporter(file, fun, shapeless, metadata)
    try:
        ex(*positional, **keywords)
    except BaseException:
        ex.close()
        try:
            os.remove(os.fspath(file))
        except OSError:
            pass
        raise
    ex.close()


def import_function(file, return_metadata=False):
    """The function in file, called with the inputs it was exported with (any
    shapes for a shapeless export); it returns a tuple of arrays."""
    metadata, traces = _core._import_function(file)
    # One Function per tag serves all its traces; compiled for fused replays
    # unless one of them is shapeless.
    shapeless = {}
    functions = {}
    for tag, fn, trace_shapeless in traces:
        functions[tag] = fn
        shapeless[tag] = shapeless.get(tag, False) or trace_shapeless
    by_tag = {tag: fn if shapeless[tag] else _core._compile(fn, False)
              for tag, fn in functions.items()}

    def imported(*args, **kwargs):
        positional, keywords = _inputs(args, kwargs, "import_function::call")
        tag, flat, _ = _layout(positional, keywords)
        fn = by_tag.get(tag)
        if fn is None:
            raise ValueError("[import_function::call] No imported function found which matches "
                             "the given positional and keyword arguments.")
        return tuple(fn(flat))

    if return_metadata:
        return imported, metadata
    return imported


def export_to_dot(file, *args, **kwargs):
    """Writes the graph computing the given arrays (positional trees, keyword
    arrays named by their keyword) as Graphviz DOT to file (a path or an
    object with write()). Arrays still to run are boxes labelled with their
    primitive; evaluated arrays are leaves (evaluation drops their inputs).
    Another thread must not evaluate the graph meanwhile."""
    arrays, names = [], []
    for leaf in flatten(args)[0]:
        arrays.append(leaf)
        names.append(None)
    for name, value in kwargs.items():
        if not isinstance(value, array):
            raise ValueError("[export_to_dot] keyword arguments must be arrays")
        arrays.append(value)
        names.append(name)
    text = _core._graph_to_dot(arrays, names)
    if isinstance(file, (str, os.PathLike)):
        with open(file, "w") as f:
            f.write(text)
    elif hasattr(file, "write"):
        file.write(text)
    else:
        raise ValueError("[export_to_dot] Accepts file-like objects or strings to be used as "
                         "filenames.")
