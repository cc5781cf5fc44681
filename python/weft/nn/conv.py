"""Convolution layers over channels-last inputs (mlx.nn's layouts): weights
are (out_channels, kernel..., in_channels / groups), drawn uniform over
+-1/sqrt(in_channels * kernel volume); they call mx.conv1d/2d/3d and
mx.conv_transpose1d/2d/3d."""
import math

import weft as mx

from .module import Module


def _tuple(value, n):
    return (value,) * n if isinstance(value, int) else tuple(value)


class _Conv(Module):
    _SPATIAL = 0
    _TRANSPOSED = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, output_padding=0):
        super().__init__()
        n = self._SPATIAL
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"The number of input channels ({in_channels}) and output channels "
                             f"({out_channels}) must be multiples of groups ({groups})")
        kernel = _tuple(kernel_size, n)
        scale = math.sqrt(1.0 / (in_channels * math.prod(kernel)))
        self.weight = mx.random.uniform(-scale, scale, (out_channels, *kernel, in_channels // groups))
        if bias:
            self.bias = mx.zeros((out_channels,))
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.groups = groups
        self.output_padding = output_padding

    def _extra_repr(self):
        out_channels, *kernel, in_per_group = self.weight.shape
        text = (f"{in_per_group * self.groups}, {out_channels}, kernel_size={tuple(kernel)}, "
                f"stride={self.stride}, padding={self.padding}, dilation={self.dilation}")
        if self._TRANSPOSED:
            text += f", output_padding={self.output_padding}"
        return text + f", groups={self.groups}, bias={'bias' in self}"

    def __call__(self, x):
        n = self._SPATIAL
        if self._TRANSPOSED:
            fn = getattr(mx, f"conv_transpose{n}d")
            y = fn(x, self.weight, self.stride, self.padding, self.dilation, self.output_padding)
        else:
            fn = getattr(mx, f"conv{n}d")
            y = fn(x, self.weight, self.stride, self.padding, self.dilation, self.groups)
        if "bias" in self:
            y = y + self.bias
        return y


def _conv_class(name, n, transposed):
    doc = f"{'Transposed c' if transposed else 'C'}onvolution over {n} spatial axes."
    return type(name, (_Conv,), {"_SPATIAL": n, "_TRANSPOSED": transposed, "__doc__": doc})


Conv1d = _conv_class("Conv1d", 1, False)
Conv2d = _conv_class("Conv2d", 2, False)
Conv3d = _conv_class("Conv3d", 3, False)


class _ConvTranspose(_Conv):
    _TRANSPOSED = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 output_padding=0, bias=True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, 1,
                         bias, output_padding)


ConvTranspose1d = type("ConvTranspose1d", (_ConvTranspose,), {"_SPATIAL": 1})
ConvTranspose2d = type("ConvTranspose2d", (_ConvTranspose,), {"_SPATIAL": 2})
ConvTranspose3d = type("ConvTranspose3d", (_ConvTranspose,), {"_SPATIAL": 3})
