"""Quantized layers (mlx.nn's QuantizedLinear, QuantizedEmbedding,
QQLinear and quantize): weights kept in weft's quantized layout (mx.quantize: uint32
codes, scales and, in the affine mode, biases per group; the modes mxfp4,
mxfp8 and nvfp4 have uint8 scales and no biases), multiplied without
forming the float matrix (mx.quantized_matmul). The quantized weights are
frozen: only a bias (and what the user unfreezes) is trained."""
import math

import weft as mx

from ..utils import tree_unflatten
from .layers import Embedding, Linear
from .module import Module

_MODES = ("affine", "mxfp4", "mxfp8", "nvfp4")


def _check_mode(mode):
    if mode not in _MODES:
        raise ValueError(f"quantization mode '{mode}' is not supported (weft has {_MODES})")


def _quantize_into(module, weight, group_size, bits, mode):
    """Sets module.weight, .scales (and .biases in the affine mode)."""
    q = mx.quantize(weight, group_size, bits, mode=mode)
    module.weight, module.scales = q[0], q[1]
    if mode == "affine":
        module.biases = q[2]


def _matrix_args(module):
    """quantized_matmul's / dequantize's keyword arguments for module's weights."""
    return dict(scales=module["scales"], biases=module.get("biases"),
                group_size=module.group_size, bits=module.bits, mode=module.mode)


def _mode_defaults(mode, group_size, bits):
    """MLX's defaults per mode for group_size and bits left as None."""
    defaults = {"affine": (64, 4), "mxfp4": (32, 4), "mxfp8": (32, 8), "nvfp4": (16, 4)}[mode]
    return (defaults[0] if group_size is None else group_size,
            defaults[1] if bits is None else bits)


class QuantizedLinear(Module):
    """y = x W^T + b with W quantized to `bits` bits in groups of group_size
    along the input dimension."""

    def __init__(self, input_dims, output_dims, bias=True, group_size=None, bits=None,
                 mode="affine"):
        super().__init__()
        _check_mode(mode)
        group_size, bits = _mode_defaults(mode, group_size, bits)
        self.group_size, self.bits, self.mode = group_size, bits, mode
        scale = math.sqrt(1.0 / input_dims)
        weight = mx.random.uniform(-scale, scale, (output_dims, input_dims))
        _quantize_into(self, weight, group_size, bits, mode)
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
        y = mx.quantized_matmul(x, self["weight"], transpose=True, **_matrix_args(self))
        if "bias" in self:
            y = y + self["bias"]
        return y

    @classmethod
    def from_linear(cls, linear_layer, group_size=None, bits=None, mode="affine"):
        """A QuantizedLinear holding linear_layer's weight (and bias) quantized."""
        _check_mode(mode)
        group_size, bits = _mode_defaults(mode, group_size, bits)
        q = cls.__new__(cls)
        Module.__init__(q)
        q.group_size, q.bits, q.mode = group_size, bits, mode
        _quantize_into(q, linear_layer.weight, group_size, bits, mode)
        if "bias" in linear_layer:
            q.bias = linear_layer.bias
        q.freeze()
        return q


class QuantizedEmbedding(Module):
    """An Embedding whose table is quantized along dims; rows looked up by
    id are dequantized."""

    def __init__(self, num_embeddings, dims, group_size=None, bits=None, mode="affine"):
        super().__init__()
        _check_mode(mode)
        group_size, bits = _mode_defaults(mode, group_size, bits)
        self.group_size, self.bits, self.mode = group_size, bits, mode
        self.num_embeddings, self.dims = num_embeddings, dims
        table = mx.random.normal((num_embeddings, dims), scale=math.sqrt(1.0 / dims))
        _quantize_into(self, table, group_size, bits, mode)
        self.freeze()

    def _extra_repr(self):
        return (f"{self.num_embeddings}, {self.dims}, group_size={self.group_size}, "
                f"bits={self.bits}, mode={self.mode}")

    def __call__(self, x):
        biases = self.get("biases")
        return mx.dequantize(self["weight"][x], scales=self["scales"][x],
                             biases=None if biases is None else biases[x],
                             group_size=self.group_size, bits=self.bits, mode=self.mode)

    def as_linear(self, x):
        """x times the (quantized) table transposed, for tied output projections."""
        return mx.quantized_matmul(x, self["weight"], transpose=True, **_matrix_args(self))

    @classmethod
    def from_embedding(cls, embedding_layer, group_size=None, bits=None, mode="affine"):
        """A QuantizedEmbedding holding embedding_layer's table quantized."""
        _check_mode(mode)
        group_size, bits = _mode_defaults(mode, group_size, bits)
        num_embeddings, dims = embedding_layer.weight.shape
        q = cls.__new__(cls)
        Module.__init__(q)
        q.group_size, q.bits, q.mode = group_size, bits, mode
        q.num_embeddings, q.dims = num_embeddings, dims
        _quantize_into(q, embedding_layer.weight, group_size, bits, mode)
        q.freeze()
        return q


class QQLinear(Module):
    """y = x W^T with the input quantized too (mx.qqmm; modes nvfp4 and
    mxfp8, no bias, as MLX's). Training, W is kept in float and rounded on
    the fly, so it gets gradients; in eval mode it is stored quantized
    (codes and scales) and frozen in that form. train() / eval() switch."""

    def __init__(self, input_dims, output_dims, group_size=None, bits=None, mode="nvfp4"):
        super().__init__()
        if mode not in ("nvfp4", "mxfp8"):
            raise ValueError(f"QQLinear: mode '{mode}' is not supported (nvfp4 or mxfp8)")
        self.group_size, self.bits = _mode_defaults(mode, group_size, bits)
        self.mode = mode
        scale = math.sqrt(1.0 / input_dims)
        self.weight = mx.random.uniform(-scale, scale, (output_dims, input_dims))
        self._quantized = False

    def _extra_repr(self):
        out, inp = self.weight.shape
        if self._quantized:
            inp = inp * 32 // self.bits
        return (f"input_dims={inp}, output_dims={out}, group_size={self.group_size}, "
                f"bits={self.bits}, mode={self.mode}")

    def quantize(self):
        """Stores W as codes and scales (eval mode does this)."""
        if not self._quantized:
            self.weight, self.scales = mx.quantize(self.weight, self.group_size, self.bits,
                                                   mode=self.mode)
            self._quantized = True

    def dequantize(self):
        """Stores W in float again (train mode does this)."""
        if self._quantized:
            self.weight = mx.dequantize(self.weight, self.scales, group_size=self.group_size,
                                        bits=self.bits, mode=self.mode)
            del self.scales
            self._quantized = False

    def _set_training_mode(self, mode):
        super()._set_training_mode(mode)
        if mode:
            self.dequantize()
        else:
            self.quantize()

    def __call__(self, x):
        return mx.qqmm(x, self["weight"], scales=self.get("scales"), group_size=self.group_size,
                       bits=self.bits, mode=self.mode)

    @classmethod
    def from_linear(cls, linear_layer, group_size=None, bits=None, mode="nvfp4"):
        """A QQLinear with linear_layer's weight (a layer with a bias is
        NotImplementedError, as in MLX), in linear_layer's mode (train or eval)."""
        if "bias" in linear_layer:
            raise NotImplementedError("QQLinear has no bias")
        outputs, inputs = linear_layer.weight.shape
        q = cls(inputs, outputs, group_size, bits, mode)
        q.weight = linear_layer.weight
        q.train(linear_layer.training)
        return q


def _linear_to_quantized(self, group_size=None, bits=None, mode="affine", quantize_input=False):
    if quantize_input:
        return QQLinear.from_linear(self, group_size, bits, mode)
    return QuantizedLinear.from_linear(self, group_size, bits, mode)


def _embedding_to_quantized(self, group_size=None, bits=None, mode="affine",
                            quantize_input=False):
    if quantize_input:
        raise ValueError("Embedding cannot quantize its input (quantize_input=True)")
    return QuantizedEmbedding.from_embedding(self, group_size, bits, mode)


Linear.to_quantized = _linear_to_quantized
Embedding.to_quantized = _embedding_to_quantized


def quantize(model, group_size=None, bits=None, *, mode="affine", quantize_input=False,
             class_predicate=None):
    """Replaces, in place, every sub-module that can be quantized (has a
    to_quantized method: Linear, Embedding) and that class_predicate(path,
    module) accepts (default: all whose last dimension divides into groups).
    The predicate may return a dict of to_quantized's arguments for that
    module instead of True. quantize_input: Linear layers become QQLinear
    (nvfp4 or mxfp8; an Embedding then is a ValueError)."""
    _check_mode(mode)
    group_size, bits = _mode_defaults(mode, group_size, bits)

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
        if quantize_input:
            options["quantize_input"] = True
        if isinstance(choice, dict):
            options.update(choice)
        replacements.append((path, module.to_quantized(**options)))
    if replacements:
        model.update_modules(tree_unflatten(replacements))
    return model
