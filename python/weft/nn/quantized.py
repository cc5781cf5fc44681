"""Quantized layers (mlx.nn's QuantizedLinear, QuantizedEmbedding and
quantize): weights kept in weft's affine quantized layout (mx.quantize:
uint32 codes, scales and biases per group), multiplied without forming the
float matrix (mx.quantized_matmul). The quantized weights are frozen: only a
bias (and what the user unfreezes) is trained."""
import math

import weft as mx

from ..utils import tree_unflatten
from .layers import Embedding, Linear
from .module import Module

_MODES = ("affine",)


def _check_mode(mode):
    if mode not in _MODES:
        raise ValueError(f"quantization mode '{mode}' is not supported (weft has {_MODES})")


class QuantizedLinear(Module):
    """y = x W^T + b with W quantized to `bits` bits in groups of group_size
    along the input dimension."""

    def __init__(self, input_dims, output_dims, bias=True, group_size=64, bits=4, mode="affine"):
        super().__init__()
        _check_mode(mode)
        self.group_size, self.bits, self.mode = group_size, bits, mode
        scale = math.sqrt(1.0 / input_dims)
        weight = mx.random.uniform(-scale, scale, (output_dims, input_dims))
        self.weight, self.scales, self.biases = mx.quantize(weight, group_size, bits)
        if bias:
            self.bias = mx.zeros((output_dims,))
        self.freeze()

    def unfreeze(self, *args, **kwargs):
        """As Module.unfreeze, but the codes stay frozen (they are integers)."""
        super().unfreeze(*args, **kwargs)
        self.freeze(recurse=False, keys=["weight"])
        return self

    def _extra_repr(self):
        out, packed = self.weight.shape
        inp = packed * 32 // self.bits
        return (f"input_dims={inp}, output_dims={out}, bias={'bias' in self}, "
                f"group_size={self.group_size}, bits={self.bits}, mode={self.mode}")

    def __call__(self, x):
        y = mx.quantized_matmul(x, self["weight"], scales=self["scales"], biases=self["biases"],
                                transpose=True, group_size=self.group_size, bits=self.bits)
        if "bias" in self:
            y = y + self["bias"]
        return y

    @classmethod
    def from_linear(cls, linear_layer, group_size=64, bits=4, mode="affine"):
        """A QuantizedLinear holding linear_layer's weight (and bias) quantized."""
        _check_mode(mode)
        output_dims, input_dims = linear_layer.weight.shape
        q = cls.__new__(cls)
        Module.__init__(q)
        q.group_size, q.bits, q.mode = group_size, bits, mode
        q.weight, q.scales, q.biases = mx.quantize(linear_layer.weight, group_size, bits)
        if "bias" in linear_layer:
            q.bias = linear_layer.bias
        q.freeze()
        return q


class QuantizedEmbedding(Module):
    """An Embedding whose table is quantized along dims; rows looked up by
    id are dequantized."""

    def __init__(self, num_embeddings, dims, group_size=64, bits=4, mode="affine"):
        super().__init__()
        _check_mode(mode)
        self.group_size, self.bits, self.mode = group_size, bits, mode
        self.num_embeddings, self.dims = num_embeddings, dims
        table = mx.random.normal((num_embeddings, dims), scale=math.sqrt(1.0 / dims))
        self.weight, self.scales, self.biases = mx.quantize(table, group_size, bits)
        self.freeze()

    def _extra_repr(self):
        return (f"{self.num_embeddings}, {self.dims}, group_size={self.group_size}, "
                f"bits={self.bits}, mode={self.mode}")

    def __call__(self, x):
        return mx.dequantize(self["weight"][x], scales=self["scales"][x],
                             biases=self["biases"][x], group_size=self.group_size, bits=self.bits)

    def as_linear(self, x):
        """x times the (quantized) table transposed, for tied output projections."""
        return mx.quantized_matmul(x, self["weight"], scales=self["scales"],
                                   biases=self["biases"], transpose=True,
                                   group_size=self.group_size, bits=self.bits)

    @classmethod
    def from_embedding(cls, embedding_layer, group_size=64, bits=4, mode="affine"):
        """A QuantizedEmbedding holding embedding_layer's table quantized."""
        _check_mode(mode)
        num_embeddings, dims = embedding_layer.weight.shape
        q = cls.__new__(cls)
        Module.__init__(q)
        q.group_size, q.bits, q.mode = group_size, bits, mode
        q.num_embeddings, q.dims = num_embeddings, dims
        q.weight, q.scales, q.biases = mx.quantize(embedding_layer.weight, group_size, bits)
        q.freeze()
        return q


def _linear_to_quantized(self, group_size=64, bits=4, mode="affine"):
    return QuantizedLinear.from_linear(self, group_size, bits, mode)


def _embedding_to_quantized(self, group_size=64, bits=4, mode="affine"):
    return QuantizedEmbedding.from_embedding(self, group_size, bits, mode)


Linear.to_quantized = _linear_to_quantized
Embedding.to_quantized = _embedding_to_quantized


def quantize(model, group_size=64, bits=4, *, mode="affine", class_predicate=None):
    """Replaces, in place, every sub-module that can be quantized (has a
    to_quantized method: Linear, Embedding) and that class_predicate(path,
    module) accepts (default: all whose last dimension divides into groups).
    The predicate may return a dict of to_quantized's arguments for that
    module instead of True."""
    _check_mode(mode)

    def default_predicate(_, module):
        return module.weight.shape[-1] % group_size == 0

    predicate = class_predicate or default_predicate
    replacements = []
    for path, module in model.named_modules():
        if not hasattr(module, "to_quantized"):
            continue
        choice = predicate(path, module)
        if choice is False or choice is None:
            continue
        options = dict(group_size=group_size, bits=bits, mode=mode)
        if isinstance(choice, dict):
            options.update(choice)
        replacements.append((path, module.to_quantized(**options)))
    if replacements:
        model.update_modules(tree_unflatten(replacements))
    return model
