#!/usr/bin/env bash
# Prints the folder holding llama.cpp's Python bindings compiled for this machine, compiling them first
# when that folder is not there yet (scripts/setup.sh and scripts/install.sh share it).
# llama.cpp's bindings have no wheel on PyPI: they compile here, once per version and CPU flags, into
# Avibe's cache (pip's own wheel cache ignores CMAKE_ARGS, so it would hand back a build made with other
# flags). Portable flags, not -march=native: a native build on a Xeon with AMX segfaulted in its first
# decode on this workplace's machines; AVX2/FMA/F16C runs on any x86-64-v3 CPU.
# Usage: scripts/llama_wheel.sh PYTHON   (the interpreter the bindings are for)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-python3}
# The exact version and its sdist's hash are in requirements/llama-cpp-python.txt (scripts/lock.sh writes it).
llama_req=requirements/llama-cpp-python.txt
llama_pin=$(grep -o '^llama-cpp-python==[0-9.]*' "$llama_req")
# LLAVA_BUILD=OFF: the bindings' image support (libmtmd), which Avibe never loads; without it the compile
# took 5 min 06 s against 7 min 02 s with it, one after the other on the same 2 idle cores.
if [ "$(uname -m)" = x86_64 ]; then
  llama_cmake="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
  llama_cmake="$llama_cmake -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
else
  llama_cmake="-DGGML_NATIVE=OFF"
fi
llama_cmake="$llama_cmake -DLLAVA_BUILD=OFF"
llama_key=$(printf '%s %s %s' "$llama_pin" "$llama_cmake" "$("$PY" -c 'import sys; print(sys.version_info[:2])')" \
  | sha256sum | cut -c1-16)
llama_wheels="${XDG_CACHE_HOME:-$HOME/.cache}/avibe/wheels/$llama_key"
if ! ls "$llama_wheels"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "compiling $llama_pin (once; a few minutes on 2 cores)" >&2
  rm -rf "$llama_wheels.tmp"
  CMAKE_ARGS="$llama_cmake" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
    "$PY" -m pip wheel --quiet --no-deps --no-cache-dir --require-hashes -r "$llama_req" \
    -w "$llama_wheels.tmp" >&2
  mv "$llama_wheels.tmp" "$llama_wheels"
fi
echo "$llama_wheels"
