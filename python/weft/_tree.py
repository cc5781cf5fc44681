"""Pytrees: nested lists, tuples, namedtuples and dicts whose leaves are arrays.

flatten() returns the leaves and a hashable description of the structure
(`treedef`) that unflatten() turns back into the same containers. Leaves that
are not arrays can be kept as constants inside the treedef (what compile
needs: Python scalars and strings are part of its cache key).
"""
import copy

from . import _core

_LEAF = ("*",)


def _is_namedtuple(obj):
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def flatten(tree, constants=False, is_leaf=None):
    """(leaves, treedef). With constants=True, non-array leaves go into the
    treedef instead of the leaves."""
    leaves = []

    def walk(node):
        if is_leaf is not None and is_leaf(node):
            leaves.append(node)
            return _LEAF
        if isinstance(node, _core.array):
            leaves.append(node)
            return _LEAF
        if _is_namedtuple(node):
            return ("namedtuple", type(node), tuple(walk(x) for x in node))
        if type(node) in (list, tuple):
            return (type(node).__name__, tuple(walk(x) for x in node))
        if isinstance(node, (list, tuple)):
            # a subclass (class Vector(tuple)) is rebuilt as itself
            return ("sequence", type(node), tuple(walk(x) for x in node))
        if isinstance(node, dict):
            keys = tuple(node.keys())
            children = tuple(walk(node[k]) for k in keys)
            if type(node) is dict:
                return ("dict", dict, keys, children)
            # a dict subclass (an nn.Module) is rebuilt as a shallow copy of
            # itself, keeping its attributes, so it need not be constructible
            # without arguments
            return ("dict", type(node), keys, children, node)
        if constants:
            return ("const", _constant_key(node), node)
        leaves.append(node)
        return _LEAF

    try:
        return leaves, walk(tree)
    finally:
        walk = None  # a recursive closure refers to itself; without this its frames (and arrays) wait for the gc


def _constant_key(value):
    """A hashable stand-in for a constant: the value itself when hashable."""
    try:
        hash(value)
        return (type(value), value)
    except TypeError:
        return (type(value), repr(value))


def unflatten(treedef, leaves):
    """The tree described by treedef, with `leaves` in order."""
    it = iter(leaves)

    def build(node):
        if node == _LEAF:
            return next(it)
        kind = node[0]
        if kind == "const":
            return node[2]
        if kind == "list":
            return [build(x) for x in node[1]]
        if kind == "tuple":
            return tuple(build(x) for x in node[1])
        if kind == "namedtuple":
            return node[1](*(build(x) for x in node[2]))
        if kind == "sequence":
            return node[1]([build(x) for x in node[2]])
        if kind == "dict":
            out = {} if node[1] is dict else copy.copy(node[4])
            for k, child in zip(node[2], node[3]):
                out[k] = build(child)
            return out
        return (list if kind == "list" else tuple)(build(x) for x in node[1])

    try:
        return build(treedef)
    finally:
        build = None  # a recursive closure refers to itself; without this its frames (and arrays) wait for the gc


def key_of(treedef):
    """The hashable part of a treedef (constants by value)."""
    if treedef == _LEAF:
        return treedef
    kind = treedef[0]
    if kind == "const":
        return ("const", treedef[1])
    if kind == "dict":
        return ("dict", treedef[1], treedef[2], tuple(key_of(x) for x in treedef[3]))
    if kind in ("namedtuple", "sequence"):
        return (kind, treedef[1], tuple(key_of(x) for x in treedef[2]))
    return (kind, tuple(key_of(x) for x in treedef[1]))


def replace_leaves(tree, new_leaves):
    """Puts new_leaves (in flatten order) into tree's mutable containers in
    place (lists and dicts; tuples are rebuilt in their parent). Returns the
    (possibly new) root. Arrays past the end of new_leaves (added to the
    tree since new_leaves were taken from it) are left as they are."""
    it = iter(new_leaves)

    def walk(node):
        if isinstance(node, _core.array):
            return next(it, node)
        if _is_namedtuple(node):
            return type(node)(*(walk(x) for x in node))
        if isinstance(node, list):
            for i, x in enumerate(node):
                node[i] = walk(x)
            return node
        if isinstance(node, tuple):
            return tuple(walk(x) for x in node)
        if isinstance(node, dict):
            for k in list(node.keys()):
                node[k] = walk(node[k])
            return node
        return node

    try:
        return walk(tree)
    finally:
        walk = None  # a recursive closure refers to itself; without this its frames (and arrays) wait for the gc
