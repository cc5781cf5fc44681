"""Tensor-parallel linear layers with mlx.nn's API: a Linear (or
QuantizedLinear) whose weight is split over a weft.distributed group, each
process holding and multiplying its part; and fully sharded data
parallelism (fully_shard: each process holds its rows of every parameter,
gathered for a call).

- all-to-sharded: every process has the whole input and computes a slice of
  the output features (weight rows and bias split); the input's gradient is
  summed over the group, since every slice of the output depends on it.
- sharded-to-all: each process has a slice of the input features and
  multiplies it by its columns of the weight; an all_sum gives every
  process the whole output, and the bias (not split) is added once, after.
  The loss computed from that output is the same on every process, and
  gradients are that one loss's (those of the layer before sharding), not
  of the sum over processes that weft.distributed.all_sum differentiates.

A weight made of stacked parts (a fused query/key/value projection) is
split part by part (`segments`: a count of equal parts, or where they end as
indices or fractions), so that each process keeps its share of every part.
"""
import math

import weft as mx

from ..utils import tree_flatten, tree_map_with_path, tree_unflatten
from .layers import Linear
from .module import Module
from .quantized import (
    QuantizedLinear, _check_mode, _matrix_args, _mode_defaults, _quantize_into,
)

_SHARDINGS = ("all-to-sharded", "sharded-to-all")


def _check_sharding(sharding):
    if sharding not in _SHARDINGS:
        raise ValueError(f"sharding '{sharding}' is not supported: use one of {_SHARDINGS}")


def _group_or_world(group):
    return group if group is not None else mx.distributed.init()


def _gradient_summed(group):
    """The identity whose vjp sums the cotangent over the group."""
    if group.size() == 1:
        return lambda x: x

    @mx.custom_function
    def passed(x):
        return x

    @passed.vjp
    def passed(x, cotangent, output):
        return mx.distributed.all_sum(cotangent, group=group)

    return passed


def _replicated_sum(group):
    """all_sum for a result every process then holds alike: its vjp passes
    the cotangent through. weft's all_sum differentiates the sum of every
    process's loss (its vjp is an all_sum); after a sharded-to-all layer the
    processes compute one loss, replicated, and each share's gradient is
    that loss's (as in MLX and in the layer before sharding)."""
    if group.size() == 1:
        return lambda x: x

    @mx.custom_function
    def summed(x):
        return mx.distributed.all_sum(x, group=group)

    @summed.vjp
    def summed(x, cotangent, output):
        return cotangent

    return summed


def _parts(weight, segments, axis):
    """weight split along axis into `segments` (a count, indices, or
    fractions of the axis where parts end)."""
    if isinstance(segments, int) or isinstance(segments[0], int):
        return mx.split(weight, segments, axis=axis)
    length = weight.shape[axis]
    return mx.split(weight, [int(f * length) for f in segments], axis=axis)


def _shard(parameters, predicate, group):
    """The parameter tree with each array predicate(path, array) names cut
    to this process's share: predicate gives None (kept whole), an axis, or
    (axis, segments)."""
    size, rank = group.size(), group.rank()

    def cut(path, value):
        if not isinstance(value, mx.array):
            return value
        rule = predicate(path, value)
        if rule is None:
            return value
        if isinstance(rule, int):
            axis, segments = rule, 1
        elif isinstance(rule, tuple) and len(rule) == 2:
            axis, segments = rule
        else:
            raise ValueError("a sharding predicate returns None, an axis, or (axis, segments)")
        shares = [_parts(part, size, axis)[rank] for part in _parts(value, segments, axis)]
        return mx.contiguous(mx.concatenate(shares, axis=axis))

    return tree_map_with_path(cut, parameters)


def _all_to_sharded(segments):
    def rule(path, value):
        return (-1, segments) if path.endswith("bias") else (max(value.ndim - 2, 0), segments)
    return rule


def _sharded_to_all(segments):
    def rule(path, value):
        return None if path.endswith("bias") else (-1, segments)
    return rule


def _rule_of(sharding, segments):
    if callable(sharding):
        return sharding
    _check_sharding(sharding)
    return _all_to_sharded(segments) if sharding == "all-to-sharded" else _sharded_to_all(segments)


def shard_inplace(module, sharding, *, segments=1, group=None):
    """Cuts module's parameters to this process's share in place: sharding
    is "all-to-sharded", "sharded-to-all" or a predicate (path, array) ->
    None | axis | (axis, segments). The module's computation is unchanged:
    it must communicate by itself where that is needed."""
    group = _group_or_world(group)
    module.update(_shard(module.parameters(), _rule_of(sharding, segments), group))


def shard_linear(module, sharding, *, segments=1, group=None):
    """A new sharded layer made from a Linear or QuantizedLinear (which is
    left as it is): AllToShardedLinear, ShardedToAllLinear or their
    quantized forms."""
    _check_sharding(sharding)
    if isinstance(module, Linear):
        cls = AllToShardedLinear if sharding == "all-to-sharded" else ShardedToAllLinear
        return cls.from_linear(module, segments=segments, group=group)
    if isinstance(module, QuantizedLinear):
        cls = (QuantizedAllToShardedLinear if sharding == "all-to-sharded"
               else QuantizedShardedToAllLinear)
        return cls.from_quantized_linear(module, segments=segments, group=group)
    raise ValueError(f"shard_linear takes a Linear or QuantizedLinear, not {type(module).__name__}")


def _split_size(total, group, what):
    if total % group.size() != 0:
        raise ValueError(f"the {what} of size {total} cannot be split over {group.size()} "
                         "processes")
    return total // group.size()


class AllToShardedLinear(Module):
    """y = x W_r^T + b_r: this process's slice of a Linear's outputs, from the
    whole input (output_dims divisible by the group's size)."""

    def __init__(self, input_dims, output_dims, bias=True, group=None):
        super().__init__()
        self.group = _group_or_world(group)
        rows = _split_size(output_dims, self.group, "output")
        scale = math.sqrt(1.0 / input_dims)
        self.weight = mx.random.uniform(-scale, scale, (rows, input_dims))
        if bias:
            self.bias = mx.random.uniform(-scale, scale, (rows,))
        self._gradient_summed = _gradient_summed(self.group)

    def _extra_repr(self):
        rows, inputs = self.weight.shape
        return (f"input_dims={inputs}, output_dims={rows * self.group.size()}, "
                f"bias={'bias' in self}")

    def __call__(self, x):
        x = self._gradient_summed(x)
        if "bias" in self:
            return mx.addmm(self["bias"], x, self["weight"].T)
        return x @ self["weight"].T

    @classmethod
    def from_linear(cls, linear_layer, *, segments=1, group=None):
        group = _group_or_world(group)
        outputs, inputs = linear_layer.weight.shape
        layer = cls(inputs, outputs, "bias" in linear_layer, group)
        layer.update(_shard(linear_layer.parameters(), _all_to_sharded(segments), group))
        return layer


class ShardedToAllLinear(Module):
    """y = all_sum(x_r W_r^T) + b: x_r this process's slice of the input
    features (input_dims divisible by the group's size); every process
    gets the whole output."""

    def __init__(self, input_dims, output_dims, bias=True, group=None):
        super().__init__()
        self.group = _group_or_world(group)
        columns = _split_size(input_dims, self.group, "input")
        scale = math.sqrt(1.0 / input_dims)
        self.weight = mx.random.uniform(-scale, scale, (output_dims, columns))
        if bias:
            self.bias = mx.random.uniform(-scale, scale, (output_dims,))
        self._summed = _replicated_sum(self.group)

    def _extra_repr(self):
        outputs, columns = self.weight.shape
        return (f"input_dims={columns * self.group.size()}, output_dims={outputs}, "
                f"bias={'bias' in self}")

    def __call__(self, x):
        y = self._summed(x @ self["weight"].T)
        return y + self["bias"] if "bias" in self else y

    @classmethod
    def from_linear(cls, linear_layer, *, segments=1, group=None):
        group = _group_or_world(group)
        outputs, inputs = linear_layer.weight.shape
        layer = cls(inputs, outputs, "bias" in linear_layer, group)
        layer.update(_shard(linear_layer.parameters(), _sharded_to_all(segments), group))
        return layer


class _QuantizedShard(Module):
    """What the two quantized layers share: a random share of `shape`
    quantized as QuantizedLinear's (mx.quantize), frozen, a bias of zeros."""

    def __init__(self, group, shape, input_dims, bias_size, group_size, bits, mode):
        super().__init__()
        _check_mode(mode)
        self.group = group
        self.group_size, self.bits = _mode_defaults(mode, group_size, bits)
        self.mode = mode
        scale = math.sqrt(1.0 / input_dims)
        _quantize_into(self, mx.random.uniform(-scale, scale, shape), self.group_size, self.bits,
                       mode)
        if bias_size is not None:
            self.bias = mx.zeros((bias_size,))
        self.freeze()

    def unfreeze(self, *args, **kwargs):
        """As Module.unfreeze, but the quantized weights stay frozen."""
        super().unfreeze(*args, **kwargs)
        self.freeze(recurse=False)
        return self

    def _product(self, x):
        return mx.quantized_matmul(x, self["weight"], transpose=True, **_matrix_args(self))

    def _dims(self):
        outputs, packed = self.weight.shape
        return outputs, packed * 32 // self.bits

    def _settings_repr(self):
        return f"group_size={self.group_size}, bits={self.bits}, mode={self.mode}"

    @classmethod
    def _from(cls, layer, rule, segments, group):
        group = _group_or_world(group)
        outputs, packed = layer.weight.shape
        made = cls(packed * 32 // layer.bits, outputs, "bias" in layer, layer.group_size,
                   layer.bits, getattr(layer, "mode", "affine"), group)
        made.update(_shard(layer.parameters(), rule(segments), group))
        return made


class QuantizedAllToShardedLinear(_QuantizedShard):
    """AllToShardedLinear with its weight quantized (frozen, as
    QuantizedLinear's)."""

    def __init__(self, input_dims, output_dims, bias=True, group_size=None, bits=None,
                 mode="affine", group=None):
        group = _group_or_world(group)
        rows = _split_size(output_dims, group, "output")
        super().__init__(group, (rows, input_dims), input_dims, rows if bias else None,
                         group_size, bits, mode)
        self._gradient_summed = _gradient_summed(group)

    def _extra_repr(self):
        rows, inputs = self._dims()
        return (f"input_dims={inputs}, output_dims={rows * self.group.size()}, "
                f"bias={'bias' in self}, {self._settings_repr()}")

    def __call__(self, x):
        y = self._product(self._gradient_summed(x))
        return y + self["bias"] if "bias" in self else y

    @classmethod
    def from_quantized_linear(cls, quantized_linear_layer, *, segments=1, group=None):
        return cls._from(quantized_linear_layer, _all_to_sharded, segments, group)


class QuantizedShardedToAllLinear(_QuantizedShard):
    """ShardedToAllLinear with its weight quantized (frozen, as
    QuantizedLinear's); each process's input slice must be whole groups."""

    def __init__(self, input_dims, output_dims, bias=True, group_size=None, bits=None,
                 mode="affine", group=None):
        group = _group_or_world(group)
        columns = _split_size(input_dims, group, "input")
        super().__init__(group, (output_dims, columns), input_dims,
                         output_dims if bias else None, group_size, bits, mode)
        self._summed = _replicated_sum(group)

    def _extra_repr(self):
        outputs, columns = self._dims()
        return (f"input_dims={columns * self.group.size()}, output_dims={outputs}, "
                f"bias={'bias' in self}, {self._settings_repr()}")

    def __call__(self, x):
        y = self._summed(self._product(x))
        return y + self["bias"] if "bias" in self else y

    @classmethod
    def from_quantized_linear(cls, quantized_linear_layer, *, segments=1, group=None):
        return cls._from(quantized_linear_layer, _sharded_to_all, segments, group)


# ------------------------------------------------------------ fully sharded

def _outside_nested_shards(module, key, value):
    """Module.valid_parameter_filter, leaving out modules already wrapped
    (each shards its own parameters)."""
    return (not isinstance(value, FullyShardedModule)
            and Module.valid_parameter_filter(module, key, value))


def _rows_of_rank(value, group):
    size, rank = group.size(), group.rank()
    rows = value.shape[0] // size
    return mx.contiguous(value[rank * rows:(rank + 1) * rows])


def _gather_parameters(group, full_shapes, compute_dtype):
    """A function from this process's shards (a list, in order) to the whole
    parameters: one all_gather of every shard flattened side by side. Its
    vjp gives each process the rows of the gradient it holds, averaged over
    the group (sum_scatter / size): the gradient of the mean of the
    processes' losses, as average_gradients gives a replicated model."""
    size = group.size()
    lengths = [math.prod(shape) // size for shape in full_shapes]
    ends = [sum(lengths[:i + 1]) for i in range(len(lengths) - 1)]

    def cast(x, dtype):
        return x if dtype is None or x.dtype == dtype else x.astype(dtype)

    @mx.custom_function
    def gather(shards):
        row = mx.concatenate([cast(s.reshape(1, -1), compute_dtype) for s in shards], axis=1)
        every = mx.distributed.all_gather(row, group=group)  # (size, total): rank r's row r
        return [p.reshape(shape) for p, shape in zip(mx.split(every, ends, axis=1), full_shapes)]

    @gather.vjp
    def gather(shards, cotangents, outputs):
        every = mx.concatenate([c.reshape(size, -1) for c in cotangents], axis=1)
        mine = mx.distributed.sum_scatter(every, group=group) / size
        return [cast(p.reshape(s.shape), s.dtype)
                for p, s in zip(mx.split(mine, ends, axis=1), shards)]

    return gather


class FullyShardedModule(Module):
    """`module` with every parameter cut along axis 0 over a group, each
    process holding (and its optimizer updating) only its rows. A call
    gathers the whole parameters (cast to compute_dtype if given), runs the
    module and puts the shards back; the backward pass leaves each process
    the gradient of its rows, averaged over the group. Every parameter's
    first axis must divide by the group's size. Made by fully_shard."""

    def __init__(self, module, group=None, compute_dtype=None):
        super().__init__()
        group = _group_or_world(group)
        flat = tree_flatten(module.filter_and_map(_outside_nested_shards))
        for path, value in flat:
            if value.ndim == 0:
                raise ValueError(f"cannot shard the scalar parameter '{path}'")
            if value.shape[0] % group.size() != 0:
                raise ValueError(f"cannot shard parameter '{path}' of shape {value.shape} over "
                                 f"{group.size()} processes: its axis 0 must divide by that")
        # a plain attribute, not a member: a list member would be a leaf of
        # the module's tree, and the module could not be differentiated
        object.__setattr__(self, "_paths", [path for path, _ in flat])
        self._gather = _gather_parameters(group, [v.shape for _, v in flat], compute_dtype)
        module.update(tree_unflatten([(p, _rows_of_rank(v, group)) for p, v in flat]))
        self.module = module

    def _extra_repr(self):
        return f"num_sharded_params={len(self._paths)}"

    def _with_whole_parameters(self, fn, *args, **kwargs):
        shards = self.module.filter_and_map(_outside_nested_shards)
        whole = self._gather([v for _, v in tree_flatten(shards)])
        self.module.update(tree_unflatten(list(zip(self._paths, whole))))
        try:
            return fn(*args, **kwargs)
        finally:
            self.module.update(shards)

    def __call__(self, *args, **kwargs):
        return self._with_whole_parameters(self.module, *args, **kwargs)

    def as_linear(self, *args, **kwargs):
        """The wrapped module's as_linear (a tied Embedding), with whole parameters."""
        return self._with_whole_parameters(self.module.as_linear, *args, **kwargs)


def fully_shard(module, *, group=None, compute_dtype=None):
    """module wrapped in a FullyShardedModule over group (default: the
    world); module itself when the group has one process, it is wrapped
    already, or it has nothing to shard."""
    group = _group_or_world(group)
    if group.size() == 1 or isinstance(module, FullyShardedModule):
        return module
    wrapped = FullyShardedModule(module, group=group, compute_dtype=compute_dtype)
    return wrapped if wrapped._paths else module
