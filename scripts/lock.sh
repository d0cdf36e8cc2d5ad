#!/usr/bin/env bash
# Writes the lock files setup and CI install from, after a change to [project] dependencies in
# pyproject.toml (which hold ranges, as a library's users expect):
#   requirements.lock                  every dependency (with the dev and eval extras) at one exact
#                                      version, with the sha256 of each of its files - but llama-cpp-python
#   requirements/llama-cpp-python.txt  llama-cpp-python's exact version and sdist hash: it has no wheel on
#                                      PyPI, so scripts/setup.sh compiles it from that sdist
# The versions already in .venv are kept where the ranges allow (`--upgrade` moves every one to the newest
# in its range). Uses uv (from PATH, else a throwaway install); resolves for every platform, Python >= 3.11.
set -euo pipefail
cd "$(dirname "$0")/.."
tools="" installed=""
trap 'rm -rf "$tools" "$installed"' EXIT
UV=${UV:-$(command -v uv || true)}
if [ -z "$UV" ]; then  # no uv on PATH: one in a throwaway virtualenv, for this run only
  tools=$(mktemp -d)
  python3 -m venv "$tools" && "$tools/bin/python" -m pip install --quiet uv
  UV=$tools/bin/uv
fi
VENV_PY=${VENV_PY:-.venv/bin/python}
prefer=()
if [ "${1:-}" != "--upgrade" ] && [ -x "$VENV_PY" ]; then
  installed=$(mktemp)
  # as installed, but not what came from a file (the bindings' wheel built here)
  "$VENV_PY" -m pip freeze --exclude-editable --exclude avibe | grep -v ' @ ' >"$installed"
  prefer=(--constraint "$installed")
fi
common=(--quiet --universal --python-version 3.11 --generate-hashes --no-header --index-url https://pypi.org/simple)
"$UV" pip compile pyproject.toml --extra dev --extra eval "${prefer[@]}" "${common[@]}" \
  --no-emit-package llama-cpp-python --output-file requirements.lock
# the preferences' temporary file is no reason a package is there
sed -i -e '/^ *#   -c /d' -e 's/^\( *# via\) -c .*/\1 (kept at the installed version)/' requirements.lock
llama=$("$UV" pip compile pyproject.toml --extra dev --extra eval "${prefer[@]}" "${common[@]}" \
  | grep -o '^llama-cpp-python==[0-9.]*')
{
  echo "# llama-cpp-python, compiled by scripts/setup.sh from this sdist (written by scripts/lock.sh)"
  echo "$llama" | "$UV" pip compile - --no-deps "${common[@]}" | grep -v '^ *# via'
} >requirements/llama-cpp-python.txt
echo "lock: requirements.lock ($(grep -c '^[a-z]' requirements.lock) packages) and $llama"
