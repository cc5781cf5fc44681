"""Tree utilities with mlx.utils' names and behaviour.

A tree is any nesting of lists, tuples (namedtuples and tuple/list
subclasses included) and dicts; everything else is a leaf. Paths name a leaf
by its keys and indices joined with dots ("layers.0.weight").
"""
from . import _tree

__all__ = [
    "tree_map", "tree_map_with_path", "tree_flatten", "tree_unflatten",
    "tree_reduce", "tree_merge",
]


def _is_container(node):
    return isinstance(node, (list, tuple, dict))


def _rebuild(like, children):
    """A container of like's type holding `children` (a list, or a dict for dicts)."""
    if isinstance(like, dict):
        return children if type(like) is dict else type(like)(children)
    if _tree._is_namedtuple(like):
        return type(like)(*children)
    return type(like)(children)


def _items(node):
    return node.items() if isinstance(node, dict) else enumerate(node)


def tree_map(fn, tree, *rest, is_leaf=None):
    """fn applied to every leaf of tree (and the matching leaves of the trees
    in rest, which must have tree's structure at least down to its leaves)."""
    if is_leaf is not None and is_leaf(tree):
        return fn(tree, *rest)
    if isinstance(tree, dict):
        return _rebuild(tree, {k: tree_map(fn, v, *(r[k] for r in rest), is_leaf=is_leaf)
                               for k, v in tree.items()})
    if isinstance(tree, (list, tuple)):
        return _rebuild(tree, [tree_map(fn, v, *(r[i] for r in rest), is_leaf=is_leaf)
                               for i, v in enumerate(tree)])
    return fn(tree, *rest)


def tree_map_with_path(fn, tree, *rest, is_leaf=None, path=None):
    """As tree_map, with fn(path, leaf, *other_leaves); path is the dotted key."""
    def child_path(key):
        return str(key) if path is None else f"{path}.{key}"

    if is_leaf is not None and is_leaf(tree):
        return fn(path, tree, *rest)
    if isinstance(tree, dict):
        return _rebuild(tree, {
            k: tree_map_with_path(fn, v, *(r[k] for r in rest), is_leaf=is_leaf, path=child_path(k))
            for k, v in tree.items()})
    if isinstance(tree, (list, tuple)):
        return _rebuild(tree, [
            tree_map_with_path(fn, v, *(r[i] for r in rest), is_leaf=is_leaf, path=child_path(i))
            for i, v in enumerate(tree)])
    return fn(path, tree, *rest)


def tree_flatten(tree, prefix="", is_leaf=None, destination=None):
    """The leaves as a list of (dotted path, leaf) pairs, in order; into
    `destination` instead when it is given (a list is extended, a dict updated),
    which is returned."""
    pairs = []

    def walk(node, path):
        if _is_container(node) and not (is_leaf is not None and is_leaf(node)):
            for key, child in _items(node):
                walk(child, f"{path}.{key}")
        else:
            pairs.append((path[1:], node))

    try:
        walk(tree, prefix)
    finally:
        walk = None  # a recursive closure refers to itself; without this its frames (and arrays) wait for the gc
    if destination is None:
        return pairs
    if isinstance(destination, dict):
        destination.update(pairs)
    elif isinstance(destination, list):
        destination.extend(pairs)
    else:
        raise ValueError("tree_flatten: destination must be a list or a dict")
    return destination


def _is_index(key):
    """A canonical non-negative integer: '0', '12', not '01' or '-1'."""
    return key.isdigit() and str(int(key)) == key


def tree_unflatten(tree):
    """The inverse of tree_flatten: a list of (path, value) pairs (or a dict of
    them) back to nested dicts and lists. A level whose keys are all integers
    becomes a list (missing indices become empty dicts)."""
    pairs = list(tree.items()) if isinstance(tree, dict) else list(tree)
    if len(pairs) == 1 and pairs[0][0] == "":
        return pairs[0][1]

    groups = {}
    for path, value in pairs:
        head, _, tail = path.partition(".")
        groups.setdefault(head, []).append((tail, value))

    if groups and all(_is_index(k) for k in groups):
        out = []
        for index in sorted(int(k) for k in groups):
            out.extend({} for _ in range(index - len(out)))
            out.append(tree_unflatten(groups[str(index)]))
        return out
    return {k: tree_unflatten(v) for k, v in groups.items()}


def tree_reduce(fn, tree, initializer=None, is_leaf=None):
    """fn(accumulator, leaf) folded over the leaves in order, starting from
    initializer (or from the first leaf when it is None)."""
    accumulator = initializer
    started = initializer is not None

    def walk(node):
        nonlocal accumulator, started
        if _is_container(node) and not (is_leaf is not None and is_leaf(node)):
            for _, child in _items(node):
                walk(child)
        elif started:
            accumulator = fn(accumulator, node)
        else:
            accumulator, started = node, True

    try:
        walk(tree)
    finally:
        walk = None  # a recursive closure refers to itself; without this its frames (and arrays) wait for the gc
    return accumulator


def _is_empty_node(node):
    return node is None or (_is_container(node) and len(node) == 0)


def _same_kind(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        return True
    return isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and type(a) is type(b)


def tree_merge(tree_a, tree_b, merge_fn=None):
    """One tree from two: where only one has a value (the other has None or an
    empty container) that value is kept; containers of the same kind merge
    child by child; two leaves meet in merge_fn(a, b), or are a ValueError
    without one."""
    if tree_a is None:
        return tree_b
    if tree_b is None:
        return tree_a
    if _is_container(tree_a) and _is_container(tree_b) and _same_kind(tree_a, tree_b):
        if isinstance(tree_a, dict):
            keys = list(tree_a) + [k for k in tree_b if k not in tree_a]
            return _rebuild(tree_a, {k: tree_merge(tree_a.get(k), tree_b.get(k), merge_fn)
                                     for k in keys})
        length = max(len(tree_a), len(tree_b))
        a = list(tree_a) + [None] * (length - len(tree_a))
        b = list(tree_b) + [None] * (length - len(tree_b))
        return _rebuild(tree_a, [tree_merge(x, y, merge_fn) for x, y in zip(a, b)])
    a_empty, b_empty = _is_empty_node(tree_a), _is_empty_node(tree_b)
    if a_empty and b_empty:
        raise ValueError("tree_merge: cannot merge empty containers of different kinds")
    if a_empty and not _is_container(tree_b):
        return tree_b
    if b_empty and not _is_container(tree_a):
        return tree_a
    if _is_container(tree_a) or _is_container(tree_b):
        raise ValueError("tree_merge: the trees have different structures")
    if merge_fn is None:
        raise ValueError("tree_merge: both trees have a leaf at the same place; pass merge_fn")
    return merge_fn(tree_a, tree_b)
