"""Finding and installing the agent programs. `vibe agents install` runs `npm install
--no-save` with the package.json (exact versions) and package-lock.json (every package's integrity hash)
that ship in this package, into `<AVIBE_HOME>/agents`: the three programs ship their native binaries inside
the registry packages (platform packages as optional dependencies), so the install needs the npm registry
and nothing else. Not `npm ci`: it refuses a lockfile that lacks some platform's optional package, and a
registry mirror may carry only the platforms it serves (this one has OpenCode's linux-x64 packages only).
A program is found there first, then on PATH (a copy the user installed)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Final

from avibe.backends.base import Backend, BackendError, ProgramMissing

MANIFESTS: Final = ("package.json", "package-lock.json")
VERSION_TIMEOUT_S: Final = 30.0


def agents_dir(home: Path) -> Path:
    return home / "agents"


def installed_bin(home: Path) -> Path:
    return agents_dir(home) / "node_modules" / ".bin"


@dataclass(frozen=True, slots=True)
class Found:
    backend: Backend
    path: Path | None  # None: not found
    version: str = ""  # what `<program> --version` printed (first line); "" when it printed nothing
    where: str = ""  # "avibe" (installed by `vibe agents install`) or "PATH"


def locate(backend: Backend, home: Path) -> tuple[Path, str] | None:
    own = installed_bin(home) / backend.program
    if own.is_file():
        return own, "avibe"
    on_path = shutil.which(backend.program)
    return (Path(on_path), "PATH") if on_path else None


def find_program(backend: Backend, home: Path) -> Path:
    """The program's path, or ProgramMissing saying how to install it."""
    found = locate(backend, home)
    if found is None:
        raise ProgramMissing(
            f"{backend.label} ({backend.program}) is not installed: run `vibe agents install` (installs "
            f"{backend.package} from npm into {agents_dir(home)}), or install it yourself so that "
            f"`{backend.program}` is on PATH"
        )
    return found[0]


def program_version(path: Path) -> str:
    try:
        done = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(does not run: {exc})"
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0].strip() if lines else f"(printed nothing; exit code {done.returncode})"


def survey(backends: tuple[Backend, ...], home: Path) -> list[Found]:
    found = []
    for backend in backends:
        located = locate(backend, home)
        if located is None:
            found.append(Found(backend, None))
        else:
            found.append(Found(backend, located[0], program_version(located[0]), located[1]))
    return found


def install(home: Path, *, npm: str = "npm") -> Path:
    """`npm install` from the shipped lockfile into `<home>/agents`; returns that folder. Raises BackendError
    with npm's own last lines when npm is missing or fails."""
    npm_path = shutil.which(npm)
    if npm_path is None:
        raise BackendError(
            "npm is not installed: install Node.js 18 or newer (it brings npm), then run again"
        )
    target = agents_dir(home)
    target.mkdir(parents=True, exist_ok=True)
    source = resources.files("avibe.backends").joinpath("npm")
    for name in MANIFESTS:
        (target / name).write_bytes(source.joinpath(name).read_bytes())
    done = subprocess.run(
        [npm_path, "install", "--no-save", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=target,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-12:])
        raise BackendError(f"npm install in {target} failed (exit code {done.returncode}):\n{tail}")
    return target
