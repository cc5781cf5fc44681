"""The functions the suite measures, written once over a framework's ops
(numpy, jax.numpy or mlx.core) exactly as bench/suite_funcs.h and
bench/suite_train.c write them in weft, plus the inputs and parameters they
use (same seeds, same hash)."""
import math

import numpy as np

import common


class Ops:
    """The handful of array functions the formulas need, from one framework."""

    def __init__(self, fw):
        if fw == "numpy":
            self.xp = np
            self.erf = None
            self.eval = lambda *a: None
        elif fw == "jax":
            import jax
            import jax.numpy as jnp
            self.xp = jnp
            self.erf = jax.scipy.special.erf
            self.eval = lambda *a: jax.block_until_ready(a)
        else:
            import mlx.core as mx
            self.xp = mx
            self.erf = mx.erf
            self.eval = mx.eval
        self.fw = fw

    def array(self, a):
        if self.fw == "numpy":
            return np.asarray(a)
        if self.fw == "jax":
            return self.xp.asarray(a)
        return self.xp.array(a)

    def logsumexp(self, x, axis):
        xp = self.xp
        if self.fw == "mlx":
            return xp.logsumexp(x, axis=axis)
        if self.fw == "jax":
            from jax.scipy.special import logsumexp
            return logsumexp(x, axis=axis)
        top = np.max(x, axis=axis, keepdims=True)
        return np.squeeze(top, axis) + np.log(np.sum(np.exp(x - top), axis=axis))


def gelu_erf(x, o):
    return x * 0.5 * (o.erf(x * 0.70710678118654752) + 1)


def gelu_tanh(x, o):
    return x * 0.5 * (o.xp.tanh((x + x * x * x * 0.044715) * 0.79788456080286536) + 1)


def chain8(x, o):
    return (o.xp.sqrt(o.xp.maximum((x * 1.5 + 0.25) * x - 0.5, 0)) + x) * 0.5


def call10(x, o):
    return o.xp.exp(o.xp.tanh(chain8(x, o)))


def call10_ref(x):
    x = np.asarray(x, dtype=np.float64)
    return np.exp(np.tanh((np.sqrt(np.maximum((x * 1.5 + 0.25) * x - 0.5, 0)) + x) * 0.5))


def mlp_serve(x, w1, b1, w2, b2, o):
    return o.xp.maximum(x @ w1 + b1, 0) @ w2 + b2


def serve_weights():
    """w1, b1, w2, b2 of the served MLP (as suite_threads.c)."""
    return (common.uniform((784, 1024), 11, -0.0357, 0.0357),
            common.uniform((1024,), 12, -0.0357, 0.0357),
            common.uniform((1024, 10), 13, -0.03125, 0.03125),
            common.uniform((10,), 14, -0.03125, 0.03125))


def mlp_serve_ref(x, w1, b1, w2, b2):
    f = lambda a: np.asarray(a, dtype=np.float64)
    return np.maximum(f(x) @ f(w1) + f(b1), 0) @ f(w2) + f(b2)


# ---- training (suite_train.c)

def uniform_param(shape, seed, fan_in):
    bound = np.float32(1.0 / math.sqrt(fan_in))
    return common.uniform(shape, seed, -bound, bound)


def mlp_train_inputs():
    """Parameters [w1, b1, w2, b2, w3, b3], x (256, 784), labels (256,) int32."""
    params = [uniform_param((784, 512), 21, 784), np.zeros(512, np.float32),
              uniform_param((512, 512), 22, 512), np.zeros(512, np.float32),
              uniform_param((512, 10), 23, 512), np.zeros(10, np.float32)]
    x = common.uniform((256, 784), 27, 0.0, 1.0)
    labels = (common.unit(28, 256) * np.float32(10.0)).astype(np.int32)
    return params, x, labels


def mlp_loss(params, x, labels, o):
    xp = o.xp
    w1, b1, w2, b2, w3, b3 = params
    h = xp.maximum(x @ w1 + b1, 0)
    h = xp.maximum(h @ w2 + b2, 0)
    logits = h @ w3 + b3
    picked = xp.take_along_axis(logits, labels[:, None], axis=1)[:, 0]
    return xp.mean(o.logsumexp(logits, 1) - picked)


def adamw(p, g, m, v, t, lr, o, b1=0.9, b2=0.999, eps=1e-8, wd=0.01):
    """wf_nn_adamw_step's formula."""
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    mhat = m / (1 - b1 ** t)
    vhat = v / (1 - b2 ** t)
    return p - lr * (mhat / (o.xp.sqrt(vhat) + eps) + wd * p), m, v


def block_inputs():
    """Parameters [ln1 w, b, wqkv, wo, ln2 w, b, w1, b1, w2, b2] and x."""
    ones, zeros = np.ones(256, np.float32), np.zeros(256, np.float32)
    params = [ones, zeros, uniform_param((256, 768), 32, 256), uniform_param((256, 256), 33, 256),
              ones.copy(), zeros.copy(), uniform_param((256, 1024), 34, 256),
              np.zeros(1024, np.float32), uniform_param((1024, 256), 35, 1024), zeros.copy()]
    x = common.uniform((8, 128, 256), 31, -1.0, 1.0)
    return params, x


def layer_norm(x, w, b, o):
    mu = o.xp.mean(x, axis=-1, keepdims=True)
    var = o.xp.mean((x - mu) * (x - mu), axis=-1, keepdims=True)
    return (x - mu) / o.xp.sqrt(var + 1e-5) * w + b


def causal_attention(x, wqkv, wo, heads, o):
    """As wf_nn_causal_self_attention: q, k, v from one projection."""
    xp = o.xp
    batch, seq, dim = x.shape
    dh = dim // heads
    qkv = xp.transpose(xp.reshape(x @ wqkv, (batch, seq, 3, heads, dh)), (2, 0, 3, 1, 4))
    q, k, v = qkv[0], qkv[1], qkv[2]
    if o.fw == "mlx":
        att = xp.fast.scaled_dot_product_attention(q, k, v, scale=1.0 / math.sqrt(dh),
                                                   mask="causal")
    else:
        s = (q @ xp.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(dh))
        visible = np.tril(np.ones((seq, seq), dtype=bool))
        s = xp.where(visible, s, -np.inf)
        s = s - xp.max(s, axis=-1, keepdims=True)
        p = xp.exp(s)
        att = (p / xp.sum(p, axis=-1, keepdims=True)) @ v
    return xp.reshape(xp.transpose(att, (0, 2, 1, 3)), (batch, seq, dim)) @ wo


def block_loss(params, x, o):
    ln1w, ln1b, wqkv, wo, ln2w, ln2b, w1, b1, w2, b2 = params
    h = x + causal_attention(layer_norm(x, ln1w, ln1b, o), wqkv, wo, 4, o)
    out = h + gelu_erf(layer_norm(h, ln2w, ln2b, o) @ w1 + b1, o) @ w2 + b2
    return o.xp.mean(out * out)
