#!/usr/bin/env bash
# The README's test command: sets up (scripts/setup.sh) and runs lint, types and the whole test suite.
# PostgreSQL tests start their own throwaway cluster on loopback (tests/conftest.py).
#   bash scripts/test.sh [PYTEST ARGS]          the whole check (what CI runs, through .ci/run)
#   bash scripts/test.sh --fast [PYTEST ARGS]   the inner loop: ruff and the unit tests - the pure layers,
#       the record on SQLite, the eval with scripted models; no real model, terminal, browser, npm or
#       PostgreSQL (markers slow, embedded, postgres deselected). Under 2 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
fast=0
if [ "${1:-}" = --fast ]; then
  fast=1
  shift
fi
if [ "$fast" = 0 ] || [ ! -f .venv/.avibe-installed ]; then
  bash scripts/setup.sh
fi
.venv/bin/ruff check src tests benchmarks
.venv/bin/ruff format --check src tests benchmarks
if [ "$fast" = 1 ]; then
  unit=(tests/checkpoint tests/context tests/sources tests/store tests/evals tests/host tests/test_*.py)
  set -- -q -m "not slow and not embedded and not postgres" "${unit[@]}" "$@"
else
  .venv/bin/mypy
fi
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing on purpose" >&2
  exit 1
fi
exit "$rc"
