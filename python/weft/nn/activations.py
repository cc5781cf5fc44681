"""Activation functions and their Module forms (mlx.nn's names and defaults)."""
import weft as mx
from weft import _core

from .module import Module


def sigmoid(x):
    return mx.sigmoid(x)


def tanh(x):
    return mx.tanh(x)


# The piecewise-linear activations use where(): their gradient at the kinks
# is MLX's (relu'(0) = 0, leaky_relu'(0) = 1), where maximum() would split a
# tie's gradient between its operands.


def relu(x):
    return mx.where(x > 0, x, 0)


def relu2(x):
    return mx.square(relu(x))


def relu6(x):
    return mx.where(x > 0, mx.where(x < 6, x, 6), 0)


def leaky_relu(x, negative_slope=0.01):
    return mx.where(x >= 0, x, negative_slope * x)


def softplus(x):
    return mx.logaddexp(x, 0)


def log_sigmoid(x):
    return -softplus(-x)


def elu(x, alpha=1.0):
    # expm1: exp(x) - 1 lost digits near 0 (170 ulps); of x clamped to 0
    # where it is positive: exp of a large x, unused by where, overflowed
    # and made the gradient NaN (where, not minimum, so that the slope at 0
    # stays alpha)
    positive = x > 0
    return mx.where(positive, x, alpha * mx.expm1(mx.where(positive, 0.0, x)))


def celu(x, alpha=1.0):
    return mx.maximum(x, 0.0) + alpha * mx.expm1(mx.minimum(x, 0.0) / alpha)


def selu(x):
    return elu(x, 1.67326) * 1.0507


def silu(x):
    return x * mx.sigmoid(x)


def softsign(x):
    return x / (1 + mx.abs(x))


def softshrink(x, lambd=0.5):
    return mx.where(mx.abs(x) > lambd, x - mx.sign(x) * lambd, 0)


def hard_shrink(x, lambd=0.5):
    return mx.where(mx.abs(x) > lambd, x, 0)


def hard_tanh(x, min_val=-1.0, max_val=1.0):
    return mx.where(x > min_val, mx.where(x < max_val, x, max_val), min_val)


def hardswish(x):
    return x * mx.minimum(mx.maximum(x + 3, 0), 6) / 6


def mish(x):
    return x * mx.tanh(softplus(x))


def prelu(x, alpha):
    return mx.maximum(0, x) + alpha * mx.minimum(0, x)


def gelu(x):
    """x * Phi(x), Phi the standard normal CDF."""
    return _core._gelu(x)


def gelu_approx(x):
    """GELU with the tanh approximation."""
    return _core._gelu_tanh(x)


def gelu_fast_approx(x):
    """GELU approximated as x * sigmoid(1.702 x)."""
    return x * mx.sigmoid(1.702 * x)


def glu(x, axis=-1):
    """The first half of x along axis gated by the sigmoid of the second half."""
    a, b = mx.split(x, 2, axis=axis)
    return a * mx.sigmoid(b)


def step(x, threshold=0.0):
    """1 where x >= threshold, else 0."""
    return mx.where(x >= threshold, 1, 0)


def softmax(x, axis=-1):
    return mx.softmax(x, axis=axis)


def softmin(x, axis=-1):
    return mx.softmax(-x, axis=axis)


def log_softmax(x, axis=-1):
    # shifted by the maximum first: x - logsumexp(x) loses the answer to
    # rounding once |x| is large (1e8 - (1e8 + log 2) is 0 in float32)
    shifted = x - mx.stop_gradient(mx.max(x, axis=axis, keepdims=True))
    return shifted - mx.logsumexp(shifted, axis=axis, keepdims=True)


def _activation_class(name, fn, doc, **defaults):
    """A Module calling fn(x, **its options); options default to `defaults`."""
    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        if len(args) > len(defaults):
            raise TypeError(f"{name}() takes {len(defaults)} positional arguments, "
                            f"got {len(args)}")
        options = dict(defaults)
        options.update(zip(defaults, args))
        options.update(kwargs)
        for k in options:
            if k not in defaults:
                raise TypeError(f"{name}() got an unexpected argument '{k}'")
        self._options = options

    def __call__(self, x):
        return fn(x, **self._options)

    def _extra_repr(self):
        return ", ".join(f"{k}={v}" for k, v in self._options.items())

    return type(name, (Module,), {"__init__": __init__, "__call__": __call__,
                                  "_extra_repr": _extra_repr, "__doc__": doc})


Sigmoid = _activation_class("Sigmoid", sigmoid, "sigmoid(x)")
Tanh = _activation_class("Tanh", tanh, "tanh(x)")
ReLU = _activation_class("ReLU", relu, "max(x, 0)")
ReLU2 = _activation_class("ReLU2", relu2, "max(x, 0) ** 2")
ReLU6 = _activation_class("ReLU6", relu6, "min(max(x, 0), 6)")
LeakyReLU = _activation_class("LeakyReLU", leaky_relu, "max(slope * x, x)", negative_slope=0.01)
Softplus = _activation_class("Softplus", softplus, "log(1 + exp(x))")
LogSigmoid = _activation_class("LogSigmoid", log_sigmoid, "log(sigmoid(x))")
ELU = _activation_class("ELU", elu, "x, or alpha (exp(x) - 1) below 0", alpha=1.0)
CELU = _activation_class("CELU", celu, "continuously differentiable ELU", alpha=1.0)
SELU = _activation_class("SELU", selu, "scaled ELU")
SiLU = _activation_class("SiLU", silu, "x * sigmoid(x)")
Softsign = _activation_class("Softsign", softsign, "x / (1 + |x|)")
Softshrink = _activation_class("Softshrink", softshrink, "x shrunk toward 0 by lambd", lambd=0.5)
HardShrink = _activation_class("HardShrink", hard_shrink, "x where |x| > lambd, else 0", lambd=0.5)
HardTanh = _activation_class("HardTanh", hard_tanh, "x clipped to [min_val, max_val]",
                             min_val=-1.0, max_val=1.0)
Hardswish = _activation_class("Hardswish", hardswish, "x * relu6(x + 3) / 6")
Mish = _activation_class("Mish", mish, "x * tanh(softplus(x))")
GLU = _activation_class("GLU", glu, "gated linear unit", axis=-1)
Step = _activation_class("Step", step, "1 where x >= threshold, else 0", threshold=0.0)
Softmax = _activation_class("Softmax", softmax, "softmax over the last axis")
Softmin = _activation_class("Softmin", softmin, "softmax of -x over the last axis")
LogSoftmax = _activation_class("LogSoftmax", log_softmax, "log of softmax over the last axis")


class GELU(Module):
    """GELU; approx: 'none' (exact), 'precise' or 'tanh' (tanh formula), 'fast'
    (x * sigmoid(1.702 x))."""

    _FUNCTIONS = {"none": gelu, "precise": gelu_approx, "tanh": gelu_approx, "fast": gelu_fast_approx}

    def __init__(self, approx="none"):
        super().__init__()
        if approx not in self._FUNCTIONS:
            raise ValueError(f"GELU: the approximation must be one of {list(self._FUNCTIONS)}, "
                             f"got '{approx}'")
        self._approx = approx
        self._fn = self._FUNCTIONS[approx]

    def __call__(self, x):
        return self._fn(x)


class PReLU(Module):
    """prelu with a learned slope per channel (last axis), or one shared."""

    def __init__(self, num_parameters=1, init=0.25):
        super().__init__()
        self.weight = mx.full([num_parameters], init)

    def __call__(self, x):
        return prelu(x, self.weight)

