#!/usr/bin/env bash
# The README's first command: sets everything up (scripts/setup.sh), then runs Vibey on the embedded model
# on the bundled example task, on a window small enough that checkpoints happen.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/vibe models install embedded-1.5b  # the demo's agent (see DEMO_MODEL in avibe/cli/run.py)
exec .venv/bin/vibe demo "$@"
