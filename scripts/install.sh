#!/usr/bin/env bash
# Puts `vibe` on PATH as a tool of its own, as any Python CLI (uv's, else pipx's tool folder), reusing
# llama.cpp's compile from Avibe's wheel cache (compiled here first when it is not there yet).
# `uv tool install .` or `pipx install .` alone work too; they compile llama.cpp again, with its defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
wheels=$(bash scripts/llama_wheel.sh "$PY")
# The bindings' version as locked, so that the resolver takes the wheel compiled above (pyproject holds a range).
pin=$(mktemp)
trap 'rm -f "$pin"' EXIT
grep -o '^llama-cpp-python==[0-9.]*' requirements/llama-cpp-python.txt >"$pin"
if command -v uv >/dev/null; then
  uv tool install --force --python "$PY" --find-links "$wheels" --constraints "$pin" .
elif command -v pipx >/dev/null; then
  pipx install --force --python "$PY" --pip-args="--find-links $wheels --constraint $pin" .
else
  echo "install: neither uv nor pipx is on PATH; install one (https://docs.astral.sh/uv/ or pipx)" >&2
  exit 2
fi
echo "install: done; \`vibe\` works in any folder (the embedded model is fetched on its first use)"
