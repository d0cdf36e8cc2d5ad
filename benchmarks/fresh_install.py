"""A person's first prompt from a fresh machine: `git clone`, `bash scripts/install.sh`, then `vibe` in
another folder until its chat is open on the default embedded model - each step's seconds, and the whole.

Fresh means every cache this path fills starts empty: pip's and uv's (every package comes from the
index), Avibe's wheel cache (llama.cpp's bindings compile), its model cache (the 1.1 GB model downloads)
and home; the tool lands in a temporary uv tool folder. Only uv itself is taken from this machine (a
person installs it first; its folder is the only one added to PATH). `--warm` keeps this machine's caches
instead: a second install, which compiles and downloads nothing.

Run: `.venv/bin/python benchmarks/fresh_install.py [--warm]` on idle cores (minutes: it compiles).
Prints; asserts nothing. Needs the package index, as a person's install does.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stops import Pty  # beside this file

REPO = Path(__file__).resolve().parent.parent


def _uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if not Path(found).is_file():
        sys.exit("fresh_install: no uv here (`pip install uv`, or run from the clone's .venv)")
    return found


def _environment(root: Path, warm: bool) -> dict[str, str]:
    tools = root / "bin"
    tools.mkdir()
    (tools / "uv").symlink_to(_uv())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AVIBE_", "UV_", "PIP_", "VIRTUAL_ENV"))}
    env |= {
        "PATH": f"{tools}:{root / 'tool-bin'}:/usr/local/bin:/usr/bin:/bin",
        "UV_TOOL_DIR": str(root / "tools"),
        "UV_TOOL_BIN_DIR": str(root / "tool-bin"),
        "AVIBE_HOME": str(root / "home"),
        "TERM": "xterm-256color",
    }
    if not warm:
        env |= {
            "XDG_CACHE_HOME": str(root / "cache"),  # Avibe's wheels and models, uv's and pip's caches
            "PIP_CACHE_DIR": str(root / "cache" / "pip"),
            "UV_CACHE_DIR": str(root / "cache" / "uv"),
            "AVIBE_MODEL_CACHE": str(root / "cache" / "avibe" / "models"),
        }
    return env


def _step(name: str, args: list[str], cwd: Path, env: dict[str, str]) -> float:
    began = time.monotonic()
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    took = time.monotonic() - began
    print(f"{name}: {took:.1f} s", flush=True)
    if done.returncode != 0:
        sys.exit(f"{name} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return took


def _chat_open(vibe: Path, cwd: Path, env: dict[str, str]) -> float | None:
    term = Pty([str(vibe)], env, cwd)
    try:
        opened = term.wait_for("new session", timeout=600)
        if opened is None:
            print("the chat did not open; its output:\n" + term.data.decode(errors="replace")[-2000:])
            return None
        return opened - term.started
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
        term.proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warm", action="store_true", help="keep this machine's caches (a second install)")
    options = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="vibe-fresh-"))
    try:
        env = _environment(root, options.warm)
        (root / "elsewhere").mkdir()
        print(f"{'warm' if options.warm else 'fresh'} caches; cores: {os.cpu_count()}", flush=True)
        total = _step("git clone", ["git", "clone", "--quiet", str(REPO), str(root / "clone")], root, env)
        total += _step("bash scripts/install.sh", ["bash", "scripts/install.sh"], root / "clone", env)
        opened = _chat_open(root / "tool-bin" / "vibe", root / "elsewhere", env)
        if opened is not None:
            print(f"vibe: the chat open (process start -> 'new session'): {opened:.1f} s")
            print(f"from `git clone` to the chat open: {(total + opened) / 60:.1f} min")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
