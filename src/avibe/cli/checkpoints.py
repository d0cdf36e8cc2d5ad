"""`vibe checkpoints` (list, show, diff a session's checkpoints) and `vibe skill` (list, load)."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from avibe.cli.wiring import die, open_existing_record, settings_or_die
from avibe.errors import AvibeError
from avibe.ports import RecordStore, StoredCheckpoint

skill_app = typer.Typer(help="Agent Skills: list them, or print one whole.", no_args_is_help=True)


def _session_id(store: RecordStore, session: str | None) -> str:
    if session:
        return store.get_session(session).id
    latest = store.latest_session()
    if latest is None:
        die("there are no sessions yet")
    return latest.id


def _pick(stored: list[StoredCheckpoint], number: int) -> StoredCheckpoint:
    for checkpoint in stored:
        if checkpoint.number == number:
            return checkpoint
    die(f"no checkpoint {number}; this session has {len(stored)}")


def _summary(c: StoredCheckpoint) -> str:
    m = c.meta
    how = m.get("fallback") or ("repaired" if m.get("repair_used") else "ok")
    tokens = f"{m.get('tokens_before', '?')} -> {m.get('tokens_after', '?')}"
    return (
        f"#{c.number}  {c.at:%Y-%m-%d %H:%M:%S}  upto #{c.upto_seq}  {how:<10}  calls {m.get('calls', 0)}  "
        f"tokens {tokens}  memo {len(c.memo)}  trigger: {m.get('trigger', '?')}"
    )


def _show(c: StoredCheckpoint) -> str:
    memo = "\n".join(f"#{m['seq']}: {m['text']}" for m in c.memo) or "(empty)"
    meta = json.dumps(c.meta, indent=2, default=str)
    parts = [_summary(c), f"## Mind\n{c.mind.strip()}", f"## Memo\n{memo}", f"## Scene\n{c.scene}"]
    return "\n\n".join([*parts, f"## Meta\n{meta}"])


def _as_json(c: StoredCheckpoint) -> dict[str, Any]:
    return {
        "number": c.number,
        "at": c.at.isoformat(),
        "upto_seq": c.upto_seq,
        "mind": c.mind,
        "memo": c.memo,
        "scene": c.scene,
        "meta": c.meta,
    }


def checkpoints(
    session: Annotated[
        str | None, typer.Option("--session", "-s", help="Session id (default: most recent).")
    ] = None,
    show: Annotated[int | None, typer.Option("--show", help="Show checkpoint N whole.")] = None,
    diff: Annotated[
        tuple[int, int] | None, typer.Option("--diff", help="Diff the mind between checkpoints N and M.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List a session's checkpoints, show one, or diff the mind between two."""
    settings = settings_or_die()
    try:
        store = open_existing_record(settings)
        stored = store.list_checkpoints(_session_id(store, session))
    except AvibeError as exc:
        die(str(exc))
    if diff is not None:
        a, b = (_pick(stored, n) for n in diff)
        lines = difflib.unified_diff(
            a.mind.splitlines(),
            b.mind.splitlines(),
            f"checkpoint {a.number}",
            f"checkpoint {b.number}",
            lineterm="",
        )
        typer.echo("\n".join(lines) or "(the minds are identical)")
    elif show is not None:
        chosen = _pick(stored, show)
        typer.echo(json.dumps(_as_json(chosen), indent=2) if as_json else _show(chosen))
    elif as_json:
        typer.echo(json.dumps([_as_json(c) for c in stored], indent=2))
    else:
        typer.echo("\n".join(_summary(c) for c in stored) or "(no checkpoints in this session)")


@skill_app.command("list")
def skill_list(
    workdir: Annotated[
        Path, typer.Option("--workdir", "-C", help="Project folder (its .avibe/skills).")
    ] = Path("."),
) -> None:
    """List the skills Vibey can load (the catalogue in its system prompt)."""
    from avibe.tools import catalogue_text, discover_skills

    settings = settings_or_die()
    dirs = [workdir / ".avibe" / "skills", settings.home / "skills"]
    typer.echo(catalogue_text(discover_skills(dirs)) or "(no skills found)")


@skill_app.command("load")
def skill_load(
    name: Annotated[str, typer.Argument(help="The skill's name.")],
    workdir: Annotated[
        Path, typer.Option("--workdir", "-C", help="Project folder (its .avibe/skills).")
    ] = Path("."),
) -> None:
    """Print a skill's whole SKILL.md (what a cut skill in a checkpoint points to, A1)."""
    from avibe.tools import find_skill, skill_text

    settings = settings_or_die()
    found = find_skill([workdir / ".avibe" / "skills", settings.home / "skills"], name)
    if found is None:
        die(f"no skill named {name!r}; `vibe skill list` shows the skills")
    typer.echo(skill_text(found))


def register(app: typer.Typer) -> None:
    app.command("checkpoints")(checkpoints)
    app.add_typer(skill_app, name="skill")
