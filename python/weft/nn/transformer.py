"""Attention, transformers and positional encodings (mlx.nn's names)."""
import math

import weft as mx

from .activations import relu
from .layers import Dropout, LayerNorm, Linear
from .module import Module


class RoPE(Module):
    """Rotary positional encoding of the first `dims` features (mx.fast.rope)."""

    def __init__(self, dims, traditional=False, base=10000, scale=1.0):
        super().__init__()
        self.dims = dims
        self.traditional = traditional
        self.base = base
        self.scale = scale

    def _extra_repr(self):
        return f"{self.dims}, traditional={self.traditional}"

    def __call__(self, x, offset=0):
        return mx.fast.rope(x, self.dims, traditional=self.traditional, base=self.base,
                            scale=self.scale, offset=offset)


class SinusoidalPositionalEncoding(Module):
    """sin/cos of x times dims/2 frequencies spaced geometrically from
    max_freq down to min_freq, times scale (default sqrt(2/dims))."""

    def __init__(self, dims, min_freq=0.0001, max_freq=1, scale=None, cos_first=False,
                 full_turns=False):
        super().__init__()
        if dims <= 0 or dims % 2:
            raise ValueError(f"SinusoidalPositionalEncoding: dims must be positive and even, got {dims}")
        half = dims // 2
        one_zero = 1 - mx.arange(0, half, dtype=mx.float32) / max(half - 1, 1)
        low, high = math.log(min_freq), math.log(max_freq)
        self._sigmas = mx.exp(one_zero * (high - low) + low)
        if full_turns:
            self._sigmas = self._sigmas * (2 * math.pi)
        self.scale = math.sqrt(2 / dims) if scale is None else scale
        self.cos_first = cos_first

    def __call__(self, x):
        y = x[..., None] * self._sigmas
        parts = [mx.cos(y), mx.sin(y)] if self.cos_first else [mx.sin(y), mx.cos(y)]
        y = mx.concatenate(parts, axis=-1)
        if self.scale != 1:
            y = y * self.scale
        return y


class ALiBi(Module):
    """Adds attention-with-linear-biases: -slope_h * |i - j| per head."""

    @staticmethod
    def create_alibi_matrix(q_sequence_length, k_sequence_length, num_heads, offset=0,
                            dtype=mx.float32):
        rows = mx.arange(offset, q_sequence_length)
        cols = mx.arange(0, k_sequence_length)
        distance = -mx.abs(rows[:, None] - cols[None, :]).astype(mx.float32)
        slopes = ALiBi.create_alibi_slope(num_heads)
        return (distance[None] * slopes).astype(dtype)

    @staticmethod
    def create_alibi_slope(num_heads):
        base = (2 ** 8) ** (1.0 / num_heads)
        slopes = mx.power(base, -mx.arange(1, num_heads + 1, dtype=mx.float32))
        return slopes[:, None, None]

    def __call__(self, attention_scores, offset=0, mask=None):
        alibi = self.create_alibi_matrix(attention_scores.shape[-2] + offset,
                                         attention_scores.shape[-1], attention_scores.shape[1],
                                         offset, attention_scores.dtype)
        if mask is not None:
            alibi = alibi + mask
        return attention_scores + alibi


class MultiHeadAttention(Module):
    """Scaled dot-product attention over num_heads heads with input and
    output projections (no biases by default, as mlx.nn)."""

    def __init__(self, dims, num_heads, query_input_dims=None, key_input_dims=None,
                 value_input_dims=None, value_dims=None, value_output_dims=None, bias=False):
        super().__init__()
        if dims % num_heads:
            raise ValueError(f"The input feature dimensions should be divisible by the number "
                             f"of heads ({dims} % {num_heads}) != 0")
        query_input_dims = query_input_dims or dims
        key_input_dims = key_input_dims or dims
        value_input_dims = value_input_dims or key_input_dims
        value_dims = value_dims or dims
        value_output_dims = value_output_dims or dims
        self.num_heads = num_heads
        self.query_proj = Linear(query_input_dims, dims, bias=bias)
        self.key_proj = Linear(key_input_dims, dims, bias=bias)
        self.value_proj = Linear(value_input_dims, value_dims, bias=bias)
        self.out_proj = Linear(value_dims, value_output_dims, bias=bias)

    def _heads(self, x):
        batch, length, _ = x.shape
        return x.reshape(batch, length, self.num_heads, -1).transpose(0, 2, 1, 3)

    def __call__(self, queries, keys, values, mask=None):
        q = self._heads(self.query_proj(queries))
        k = self._heads(self.key_proj(keys))
        v = self._heads(self.value_proj(values))
        scale = math.sqrt(1.0 / q.shape[-1])
        out = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
        batch, _, length, _ = out.shape
        return self.out_proj(out.transpose(0, 2, 1, 3).reshape(batch, length, -1))

    @staticmethod
    def create_additive_causal_mask(N, dtype=mx.float32):
        """(N, N): 0 on and below the diagonal, the dtype's lowest value above."""
        indices = mx.arange(N)
        mask = indices[:, None] < indices[None]
        return mask.astype(dtype) * mx.finfo(dtype).min


class TransformerEncoderLayer(Module):
    def __init__(self, dims, num_heads, mlp_dims=None, dropout=0.0, activation=relu,
                 norm_first=True):
        super().__init__()
        mlp_dims = mlp_dims or dims * 4
        self.attention = MultiHeadAttention(dims, num_heads)
        self.ln1 = LayerNorm(dims)
        self.ln2 = LayerNorm(dims)
        self.linear1 = Linear(dims, mlp_dims)
        self.linear2 = Linear(mlp_dims, dims)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = activation
        self.norm_first = norm_first

    def _mlp(self, x):
        return self.linear2(self.dropout2(self.activation(self.linear1(x))))

    def __call__(self, x, mask):
        if self.norm_first:
            y = self.ln1(x)
            x = x + self.dropout1(self.attention(y, y, y, mask))
            return x + self._mlp(self.ln2(x))
        x = self.ln1(x + self.dropout1(self.attention(x, x, x, mask)))
        return self.ln2(x + self._mlp(x))


class TransformerDecoderLayer(Module):
    def __init__(self, dims, num_heads, mlp_dims=None, dropout=0.0, activation=relu,
                 norm_first=True):
        super().__init__()
        mlp_dims = mlp_dims or dims * 4
        self.self_attention = MultiHeadAttention(dims, num_heads)
        self.cross_attention = MultiHeadAttention(dims, num_heads)
        self.ln1 = LayerNorm(dims)
        self.ln2 = LayerNorm(dims)
        self.ln3 = LayerNorm(dims)
        self.linear1 = Linear(dims, mlp_dims)
        self.linear2 = Linear(mlp_dims, dims)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = activation
        self.norm_first = norm_first

    def _mlp(self, x):
        return self.linear2(self.dropout3(self.activation(self.linear1(x))))

    def __call__(self, x, memory, x_mask, memory_mask):
        if self.norm_first:
            y = self.ln1(x)
            x = x + self.dropout1(self.self_attention(y, y, y, x_mask))
            y = self.ln2(x)
            x = x + self.dropout2(self.cross_attention(y, memory, memory, memory_mask))
            return x + self._mlp(self.ln3(x))
        x = self.ln1(x + self.dropout1(self.self_attention(x, x, x, x_mask)))
        x = self.ln2(x + self.dropout2(self.cross_attention(x, memory, memory, memory_mask)))
        return self.ln3(x + self._mlp(x))


class TransformerEncoder(Module):
    def __init__(self, num_layers, dims, num_heads, mlp_dims=None, dropout=0.0, activation=relu,
                 norm_first=True, checkpoint=False):
        super().__init__()
        self.layers = [TransformerEncoderLayer(dims, num_heads, mlp_dims, dropout, activation,
                                               norm_first) for _ in range(num_layers)]
        self.ln = LayerNorm(dims)
        self.checkpoint = checkpoint

    def __call__(self, x, mask):
        for layer in self.layers:
            x = mx.checkpoint(layer)(x, mask) if self.checkpoint else layer(x, mask)
        return self.ln(x)


class TransformerDecoder(Module):
    def __init__(self, num_layers, dims, num_heads, mlp_dims=None, dropout=0.0, activation=relu,
                 norm_first=True, checkpoint=False):
        super().__init__()
        self.layers = [TransformerDecoderLayer(dims, num_heads, mlp_dims, dropout, activation,
                                               norm_first) for _ in range(num_layers)]
        self.ln = LayerNorm(dims)
        self.checkpoint = checkpoint

    def __call__(self, x, memory, x_mask, memory_mask):
        for layer in self.layers:
            if self.checkpoint:
                x = mx.checkpoint(layer)(x, memory, x_mask, memory_mask)
            else:
                x = layer(x, memory, x_mask, memory_mask)
        return self.ln(x)


class Transformer(Module):
    """An encoder over src and a decoder over tgt attending to its output."""

    def __init__(self, dims=512, num_heads=8, num_encoder_layers=6, num_decoder_layers=6,
                 mlp_dims=None, dropout=0.0, activation=relu, custom_encoder=None,
                 custom_decoder=None, norm_first=True, checkpoint=False):
        super().__init__()
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            num_encoder_layers, dims, num_heads, mlp_dims, dropout, activation, norm_first,
            checkpoint)
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            num_decoder_layers, dims, num_heads, mlp_dims, dropout, activation, norm_first,
            checkpoint)

    def __call__(self, src, tgt, src_mask, tgt_mask, memory_mask):
        memory = self.encoder(src, src_mask)
        return self.decoder(tgt, memory, tgt_mask, memory_mask)
