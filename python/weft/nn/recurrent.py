"""Recurrent layers over (batch, time, features) or (time, features) inputs,
as mlx.nn: weights drawn uniform over +-1/sqrt(hidden_size), the time loop
unrolled in Python (one graph per sequence length)."""
import math

import weft as mx

from .module import Module


def _uniform(scale, shape):
    return mx.random.uniform(-scale, scale, shape)


class RNN(Module):
    """h_t = nonlinearity(x_t Wxh^T + h_{t-1} Whh^T + b), tanh by default."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity=None):
        super().__init__()
        if nonlinearity is not None and not callable(nonlinearity):
            raise ValueError(f"Nonlinearity must be callable. Current value: {nonlinearity}.")
        self.nonlinearity = nonlinearity or mx.tanh
        scale = 1.0 / math.sqrt(hidden_size)
        self.hidden_size = hidden_size
        self.Wxh = _uniform(scale, (hidden_size, input_size))
        self.Whh = _uniform(scale, (hidden_size, hidden_size))
        if bias:
            self.bias = _uniform(scale, (hidden_size,))

    def _extra_repr(self):
        return f"input_dims={self.Wxh.shape[1]}, hidden_size={self.hidden_size}, bias={'bias' in self}"

    def __call__(self, x, hidden=None):
        x = mx.addmm(self.bias, x, self.Wxh.T) if "bias" in self else x @ self.Wxh.T
        states = []
        for t in range(x.shape[-2]):
            h = x[..., t, :]
            if hidden is not None:
                h = h + hidden @ self.Whh.T
            hidden = self.nonlinearity(h)
            states.append(hidden)
        return mx.stack(states, axis=-2)


class GRU(Module):
    """Gated recurrent unit; gates ordered r, z, n in Wx/Wh (3 * hidden rows)."""

    def __init__(self, input_size, hidden_size, bias=True):
        super().__init__()
        scale = 1.0 / math.sqrt(hidden_size)
        self.hidden_size = hidden_size
        self.Wx = _uniform(scale, (3 * hidden_size, input_size))
        self.Wh = _uniform(scale, (3 * hidden_size, hidden_size))
        if bias:
            self.b = _uniform(scale, (3 * hidden_size,))
            self.bhn = _uniform(scale, (hidden_size,))

    def _extra_repr(self):
        return f"input_dims={self.Wx.shape[1]}, hidden_size={self.hidden_size}, bias={'b' in self}"

    def __call__(self, x, hidden=None):
        x = mx.addmm(self.b, x, self.Wx.T) if "b" in self else x @ self.Wx.T
        n_h = self.hidden_size
        states = []
        for t in range(x.shape[-2]):
            step = x[..., t, :]
            rz, n = step[..., :2 * n_h], step[..., 2 * n_h:]
            h_n = None  # the hidden state's part of the candidate (a missing state is zeros)
            if hidden is not None:
                projected = hidden @ self.Wh.T
                rz = rz + projected[..., :2 * n_h]
                h_n = projected[..., 2 * n_h:]
            if "bhn" in self:
                h_n = self.bhn if h_n is None else h_n + self.bhn
            rz = mx.sigmoid(rz)
            r, z = rz[..., :n_h], rz[..., n_h:]
            if h_n is not None:
                n = n + r * h_n
            n = mx.tanh(n)
            hidden = (1 - z) * n + (z * hidden if hidden is not None else 0)
            states.append(hidden)
        return mx.stack(states, axis=-2)


class LSTM(Module):
    """Long short-term memory; gates ordered i, f, g, o (4 * hidden rows).
    Returns (hidden states, cell states), each stacked over time."""

    def __init__(self, input_size, hidden_size, bias=True):
        super().__init__()
        scale = 1.0 / math.sqrt(hidden_size)
        self.hidden_size = hidden_size
        self.Wx = _uniform(scale, (4 * hidden_size, input_size))
        self.Wh = _uniform(scale, (4 * hidden_size, hidden_size))
        if bias:
            self.bias = _uniform(scale, (4 * hidden_size,))

    def _extra_repr(self):
        return f"input_dims={self.Wx.shape[1]}, hidden_size={self.hidden_size}, bias={'bias' in self}"

    def __call__(self, x, hidden=None, cell=None):
        x = mx.addmm(self.bias, x, self.Wx.T) if "bias" in self else x @ self.Wx.T
        hiddens, cells = [], []
        for t in range(x.shape[-2]):
            gates = x[..., t, :]
            if hidden is not None:
                gates = gates + hidden @ self.Wh.T
            i, f, g, o = mx.split(gates, 4, axis=-1)
            i, f, g, o = mx.sigmoid(i), mx.sigmoid(f), mx.tanh(g), mx.sigmoid(o)
            cell = f * cell + i * g if cell is not None else i * g
            hidden = o * mx.tanh(cell)
            hiddens.append(hidden)
            cells.append(cell)
        return mx.stack(hiddens, axis=-2), mx.stack(cells, axis=-2)
