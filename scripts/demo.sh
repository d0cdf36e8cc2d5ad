#!/usr/bin/env bash
# The README's first command: sets everything up (scripts/setup.sh), installs what the demo's tools need
# (bubblewrap, the shell tool's sandbox), then runs Vibey on the embedded model on the bundled example
# task, on a window sized so that checkpoints happen (docs/demo.md).
set -euo pipefail
cd "$(dirname "$0")/.."

# The shell tool runs commands in a bubblewrap sandbox; without it the shell tool refuses (the file tools
# still work). Install it where this machine allows (root, or sudo without a password), else say so once.
sandbox_works() { command -v bwrap >/dev/null 2>&1 && bwrap --ro-bind / / --dev /dev true >/dev/null 2>&1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }
if ! sandbox_works && command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; }; then
  echo "demo: installing bubblewrap (the shell tool's sandbox)"
  as_root apt-get install -y -qq bubblewrap >/dev/null 2>&1 \
    || { as_root apt-get update -qq >/dev/null 2>&1 && as_root apt-get install -y -qq bubblewrap >/dev/null 2>&1; } \
    || true
fi
if ! sandbox_works; then
  echo "demo: no working bubblewrap sandbox here (install: sudo apt-get install bubblewrap) - Vibey's shell" \
    "tool will refuse commands in this demo; reading and editing files works."
fi

bash scripts/setup.sh  # installs the demo's model too (the 1.5B tier, Vibey's default)
exec .venv/bin/vibe demo "$@"
