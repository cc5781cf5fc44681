"""Basic layers: Identity, Linear, Bilinear, Sequential, Embedding, dropout
and normalisation (mlx.nn's names, arguments and parameter layouts)."""
import math

import weft as mx

from .module import Module


class Identity(Module):
    """Returns its input; takes and ignores any arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def __call__(self, x):
        return x


class Linear(Module):
    """y = x W^T + b, W of shape (output_dims, input_dims), both drawn uniform
    over +-1/sqrt(input_dims)."""

    def __init__(self, input_dims, output_dims, bias=True):
        super().__init__()
        scale = math.sqrt(1.0 / input_dims)
        self.weight = mx.random.uniform(-scale, scale, (output_dims, input_dims))
        if bias:
            self.bias = mx.random.uniform(-scale, scale, (output_dims,))

    def _extra_repr(self):
        out, inp = self.weight.shape
        return f"input_dims={inp}, output_dims={out}, bias={'bias' in self}"

    def __call__(self, x):
        if "bias" in self:
            return mx.addmm(self["bias"], x, self["weight"].T)
        return x @ self["weight"].T


class Bilinear(Module):
    """y_o = x1^T W_o x2 + b_o, W of shape (output_dims, input2_dims, input1_dims)."""

    def __init__(self, input1_dims, input2_dims, output_dims, bias=True):
        super().__init__()
        scale = math.sqrt(1.0 / input1_dims)
        self.weight = mx.random.uniform(-scale, scale, (output_dims, input2_dims, input1_dims))
        if bias:
            self.bias = mx.random.uniform(-scale, scale, (output_dims,))

    def _extra_repr(self):
        out, in2, in1 = self.weight.shape
        return f"input1_dims={in1}, input2_dims={in2}, output_dims={out}, bias={'bias' in self}"

    def __call__(self, x1, x2):
        out, in2, in1 = self.weight.shape
        lead = x1.shape[:-1]
        x1 = x1.reshape(-1, in1)
        x2 = x2.reshape(-1, 1, in2)
        y = (x1 @ self.weight.reshape(out * in2, in1).T).reshape(-1, out, in2)
        y = (y * x2).sum(-1)
        if "bias" in self:
            y = y + self.bias
        return y.reshape(*lead, out)


class Sequential(Module):
    """Calls its layers (modules or functions) one after the other."""

    def __init__(self, *modules):
        super().__init__()
        self.layers = list(modules)

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Embedding(Module):
    """A table of num_embeddings vectors of size dims, drawn normal with
    std 1/sqrt(dims); calling it looks rows up by integer ids."""

    def __init__(self, num_embeddings, dims):
        super().__init__()
        self.weight = mx.random.normal((num_embeddings, dims), scale=math.sqrt(1.0 / dims))

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, {self.weight.shape[1]}"

    def __call__(self, x):
        return self.weight[x]

    def as_linear(self, x):
        """x times the table transposed (tied output projections)."""
        return x @ self.weight.T


# ---------------------------------------------------------------- dropout


def _check_probability(p):
    if p < 0 or p >= 1:
        raise ValueError(f"The dropout probability {p} is not in [0, 1)")


class Dropout(Module):
    """In training, zeroes each entry with probability p and scales the rest
    by 1/(1-p); the identity in evaluation mode."""

    def __init__(self, p=0.5):
        super().__init__()
        _check_probability(p)
        self._p_1 = 1 - p

    def _extra_repr(self):
        return f"p={1 - self._p_1}"

    def _mask_shape(self, x):
        return x.shape

    def __call__(self, x):
        if self._p_1 == 1 or not self.training:
            return x
        mask = mx.random.bernoulli(self._p_1, self._mask_shape(x))
        return x * mask.astype(x.dtype) * (1 / self._p_1)


class Dropout2d(Dropout):
    """Drops whole channels of (N, H, W, C) or (H, W, C) inputs."""

    def _mask_shape(self, x):
        if x.ndim not in (3, 4):
            raise ValueError(f"Received input with {x.ndim} dimensions. Expected 3 or 4 dimensions.")
        shape = list(x.shape)
        shape[-2] = shape[-3] = 1
        return shape


class Dropout3d(Dropout):
    """Drops whole channels of (N, D, H, W, C) or (D, H, W, C) inputs."""

    def _mask_shape(self, x):
        if x.ndim not in (4, 5):
            raise ValueError(f"Received input with {x.ndim} dimensions. Expected 4 or 5 dimensions.")
        shape = list(x.shape)
        shape[-2] = shape[-3] = shape[-4] = 1
        return shape


# ---------------------------------------------------------------- normalisation


def _in_float32(x):
    """Statistics of half-precision inputs are computed in float32 (squares
    of float16 values overflow from 256 on)."""
    return x.astype(mx.float32) if x.dtype in (mx.float16, mx.bfloat16) else x


def _check_eps(eps):
    if not eps > 0:
        raise ValueError(f"eps must be positive, got {eps}")


class LayerNorm(Module):
    """Normalises the last axis to zero mean and unit variance, then scales
    and shifts (weight ones, bias zeros)."""

    def __init__(self, dims, eps=1e-5, affine=True, bias=True):
        super().__init__()
        _check_eps(eps)
        if affine:
            self.weight = mx.ones((dims,))
            if bias:
                self.bias = mx.zeros((dims,))
        self.dims = dims
        self.eps = eps

    def _extra_repr(self):
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x):
        return mx.fast.layer_norm(x, self.get("weight"), self.get("bias"), self.eps)


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) over the last axis, times weight (ones)."""

    def __init__(self, dims, eps=1e-5):
        super().__init__()
        _check_eps(eps)
        self.weight = mx.ones((dims,))
        self.eps = eps

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, eps={self.eps}"

    def __call__(self, x):
        return mx.fast.rms_norm(x, self["weight"], self.eps)


class GroupNorm(Module):
    """Normalises groups of channels (last axis) over the spatial axes and the
    group. pytorch_compatible: groups are contiguous channels; otherwise group
    g holds the channels c with c % num_groups == g (as mlx.nn)."""

    def __init__(self, num_groups, dims, eps=1e-5, affine=True, pytorch_compatible=False):
        super().__init__()
        _check_eps(eps)
        if num_groups <= 0 or dims <= 0 or dims % num_groups:
            raise ValueError(f"GroupNorm: dims {dims} is not a multiple of num_groups {num_groups}")
        if affine:
            self.weight = mx.ones((dims,))
            self.bias = mx.zeros((dims,))
        self.num_groups = num_groups
        self.dims = dims
        self.eps = eps
        self.pytorch_compatible = pytorch_compatible

    def _extra_repr(self):
        return (f"{self.num_groups}, {self.dims}, eps={self.eps}, affine={'weight' in self}, "
                f"pytorch_compatible={self.pytorch_compatible}")

    def __call__(self, x):
        batch, dims = x.shape[0], x.shape[-1]
        groups = self.num_groups
        dtype, x = x.dtype, _in_float32(x)
        if self.pytorch_compatible:
            grouped = x.reshape(batch, -1, groups, dims // groups)
            axes = (1, 3)
        else:
            grouped = x.reshape(batch, -1, groups)
            axes = (1,)
        mean = mx.mean(grouped, axis=axes, keepdims=True)
        var = mx.var(grouped, axis=axes, keepdims=True)
        y = ((grouped - mean) * mx.rsqrt(var + self.eps)).reshape(x.shape)
        if "weight" in self:
            y = y * self.weight + self.bias
        return y.astype(dtype)


class InstanceNorm(Module):
    """Normalises each sample and channel over the spatial axes (all but the
    first and last)."""

    def __init__(self, dims, eps=1e-5, affine=False):
        super().__init__()
        _check_eps(eps)
        if affine:
            self.weight = mx.ones((dims,))
            self.bias = mx.zeros((dims,))
        self.dims = dims
        self.eps = eps

    def _extra_repr(self):
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x):
        if x.ndim < 3:
            raise ValueError(f"InstanceNorm expects (N, spatial..., C) inputs, got shape {x.shape}")
        axes = tuple(range(1, x.ndim - 1))
        dtype, x = x.dtype, _in_float32(x)
        mean = mx.mean(x, axis=axes, keepdims=True)
        var = mx.var(x, axis=axes, keepdims=True)
        y = (x - mean) * mx.rsqrt(var + self.eps)
        if "weight" in self:
            y = y * self.weight + self.bias
        return y.astype(dtype)


class BatchNorm(Module):
    """Normalises each feature (last axis) over the batch and spatial axes.
    In training the batch statistics are used and folded into running_mean
    and running_var (unbiased, with `momentum`); in evaluation the running
    ones are. The running statistics are state, never trainable."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__()
        _check_eps(eps)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = mx.ones((num_features,))
            self.bias = mx.zeros((num_features,))
        if track_running_stats:
            self.running_mean = mx.zeros((num_features,))
            self.running_var = mx.ones((num_features,))
            self.freeze(keys=["running_mean", "running_var"], recurse=False)

    def unfreeze(self, *args, **kwargs):
        """As Module.unfreeze; the running statistics stay frozen."""
        super().unfreeze(*args, **kwargs)
        if self.track_running_stats:
            self.freeze(keys=["running_mean", "running_var"], recurse=False)
        return self

    def _extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={'weight' in self}, track_running_stats={self.track_running_stats}")

    def __call__(self, x):
        if x.ndim < 2 or x.ndim > 4:
            raise ValueError(f"Expected input tensor to have 2, 3 or 4 dimensions, got {x.ndim}")
        axes = tuple(range(x.ndim - 1))
        if self.training or not self.track_running_stats:
            count = math.prod(x.shape[:-1])
            if self.training and count < 2:
                raise ValueError("BatchNorm needs more than one value per feature in training "
                                 f"(input of shape {x.shape})")
            mean = mx.mean(x, axis=axes)
            var = mx.var(x, axis=axes)
            if self.training and self.track_running_stats:
                m = self.momentum
                unbiased = var * (count / (count - 1))
                self.running_mean = (1 - m) * self.running_mean + m * mean
                self.running_var = (1 - m) * self.running_var + m * unbiased
        else:
            mean, var = self.running_mean, self.running_var
        y = (x - mean) * mx.rsqrt(var + self.eps)
        if "weight" in self:
            y = y * self.weight + self.bias
        return y
