"""weft.utils' tree functions: structure, paths and values checked directly."""
from collections import namedtuple

import numpy as np
import pytest

import weft as mx
from weft.utils import (
    tree_flatten, tree_map, tree_map_with_path, tree_merge, tree_reduce, tree_unflatten,
)

Pair = namedtuple("Pair", ["left", "right"])


class Vector(tuple):
    pass


def test_tree_map_keeps_every_container_type():
    tree = {"a": [1, (2, 3)], "b": Pair(4, 5), "c": Vector([6, 7])}
    out = tree_map(lambda x: x * 10, tree)
    assert out == {"a": [10, (20, 30)], "b": Pair(40, 50), "c": Vector([60, 70])}
    assert type(out["b"]) is Pair and type(out["c"]) is Vector and type(out["a"][1]) is tuple


def test_tree_map_with_several_trees_and_is_leaf():
    a = {"x": [1, 2], "y": 3}
    b = {"x": [10, 20], "y": 30}
    assert tree_map(lambda p, q: p + q, a, b) == {"x": [11, 22], "y": 33}
    # a list counted as one leaf
    counted = tree_map(lambda n: len(n) if isinstance(n, list) else n, a,
                       is_leaf=lambda n: isinstance(n, list))
    assert counted == {"x": 2, "y": 3}


def test_tree_map_over_arrays():
    tree = {"w": mx.array([1.0, 2.0]), "b": [mx.array(3.0)]}
    out = tree_map(lambda x: x * 2, tree)
    np.testing.assert_array_equal(np.array(out["w"]), [2.0, 4.0])
    assert out["b"][0].item() == 6.0


def test_tree_map_with_path_gives_dotted_paths():
    seen = []
    tree_map_with_path(lambda path, x: seen.append((path, x)), {"a": [5, {"b": 6}], "c": 7})
    assert seen == [("a.0", 5), ("a.1.b", 6), ("c", 7)]
    seen = []
    tree_map_with_path(lambda path, x: seen.append(path), Pair(1, 2))
    assert seen == ["0", "1"]


def test_flatten_and_unflatten_round_trip():
    tree = {"layers": [{"w": 1, "b": 2}, {"w": 3}], "head": {"scale": 4}}
    flat = tree_flatten(tree)
    assert flat == [("layers.0.w", 1), ("layers.0.b", 2), ("layers.1.w", 3), ("head.scale", 4)]
    assert tree_unflatten(flat) == tree
    assert tree_unflatten(dict(flat)) == tree


def test_flatten_prefix_destination_and_empty_nodes():
    assert tree_flatten({"a": {}, "b": []}) == []
    assert tree_flatten([1, 2], prefix=".x") == [("x.0", 1), ("x.1", 2)]
    dest = {}
    assert tree_flatten({"a": 1}, destination=dest) is dest and dest == {"a": 1}
    assert tree_flatten(5) == [("", 5)]
    assert tree_unflatten([("", 5)]) == 5
    with pytest.raises(ValueError):
        tree_flatten({"a": 1}, destination="not a container")


def test_unflatten_lists_fill_gaps_and_reject_non_canonical_indices():
    assert tree_unflatten([("2", "c"), ("0", "a")]) == ["a", {}, "c"]
    tree = tree_unflatten([("01", "a"), ("1", "b")])
    assert tree == {"01": "a", "1": "b"}


def test_tree_reduce():
    tree = {"a": [1, 2], "b": {"c": 3, "d": [4]}}
    assert tree_reduce(lambda acc, x: acc + x, tree) == 10
    assert tree_reduce(lambda acc, x: acc + [x], tree, []) == [1, 2, 3, 4]
    total = tree_reduce(lambda acc, x: acc + (len(x) if isinstance(x, list) else x), [[1, 2], 3], 0,
                        is_leaf=lambda n: isinstance(n, list) and n[:1] == [1])
    assert total == 5
    assert tree_reduce(lambda acc, x: acc + x, {}, None) is None


def test_tree_merge():
    assert tree_merge({"a": 1}, {"b": 2}) == {"a": 1, "b": 2}
    assert tree_merge({"l": [1]}, {"l": [None, 2]}) == {"l": [1, 2]}
    assert tree_merge({"a": 1, "b": {}}, {"a": {}, "b": {"c": 2}}) == {"a": 1, "b": {"c": 2}}
    assert tree_merge(Pair(1, 2), Pair(3, 4), lambda x, y: x + y) == Pair(4, 6)
    with pytest.raises(ValueError):
        tree_merge({"a": 1}, {"a": 2})
    with pytest.raises(ValueError):
        tree_merge({}, [])
    with pytest.raises(ValueError):
        tree_merge({"a": [1]}, {"a": {"b": 1}})


def test_trees_free_their_arrays_without_the_garbage_collector():
    # flatten/unflatten walk trees with recursive closures, which refer to
    # themselves: the cycle held every array it had seen until a gc pass.
    import gc

    import weft.nn as nn
    from weft.utils import tree_flatten, tree_reduce

    gc.disable()
    try:
        mx.synchronize()
        before = mx.get_active_memory()
        w = mx.zeros((256, 512))
        mx.eval({"w": [w]})
        tree_flatten({"a": [w]})
        tree_reduce(lambda acc, x: acc + x.size, {"a": w}, 0)
        mx.vmap(lambda t: t["x"] * 2, in_axes={"x": 0})({"x": w})
        model = nn.Linear(256, 128)
        mx.eval(model.parameters())
        model.update_modules({})
        del w, model
        mx.synchronize()
        assert mx.get_active_memory() == before
    finally:
        gc.enable()
