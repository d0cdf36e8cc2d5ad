"""`vibe checkpoints` (list, show, diff a session's checkpoints) and `vibe skill` (list, load).

Read-only: the record is opened read-only (nothing in the database file changes). Everything a checkpoint
holds is shown terminal-safe (escape sequences as `\\x1b`, never obeyed). The exit-code rule of
`avibe.cli`: a checkpoint listing is about one session, so no record, no session or an unknown session or
checkpoint is one line and exit 2; a session without checkpoints is an empty listing, exit 0.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from avibe.cli.options import (
    MAX_SQL_INT,
    BadArgument,
    check_session_id,
    check_workdir,
    print_table,
    terminal_safe,
)
from avibe.config import load_settings
from avibe.errors import NoRecord
from avibe.ports import RecordStore, StoredCheckpoint
from avibe.record.sources import frame_body, frame_lines

ProjectOpt = Annotated[
    Path,
    typer.Option("--workdir", "-C", help="Project folder (its .avibe/skills).", callback=check_workdir),
]
skill_app = typer.Typer(help="Agent Skills: list them, or print one whole.", no_args_is_help=True)


def _session_id(store: RecordStore, session: str | None) -> str:
    if session:
        return store.get_session(session).id
    latest = store.latest_session()
    if latest is None:
        raise NoRecord("there are no sessions in the record yet")
    return latest.id


def _pick(stored: list[StoredCheckpoint], number: int) -> StoredCheckpoint:
    for checkpoint in stored:
        if checkpoint.number == number:
            return checkpoint
    raise BadArgument(f"no checkpoint {number}; this session has {len(stored)}")


def _same_content(a: StoredCheckpoint, b: StoredCheckpoint) -> bool:
    return (a.upto_seq, a.mind, a.memo, a.scene) == (b.upto_seq, b.mind, b.memo, b.scene)


def distinct(stored: list[StoredCheckpoint]) -> list[tuple[StoredCheckpoint, list[int]]]:
    """The checkpoints as a person wants them listed: one that only repeats the one before it (same
    coverage, mind, memo and scene - the last one stored again) is folded into it, its number kept."""
    listed: list[tuple[StoredCheckpoint, list[int]]] = []
    for checkpoint in stored:
        if listed and _same_content(listed[-1][0], checkpoint):
            listed[-1][1].append(checkpoint.number)
        else:
            listed.append((checkpoint, []))
    return listed


def _how(c: StoredCheckpoint) -> str:
    """ok, repaired, partial or model-free; a model-free move-out says why the checkpoint fell back (the
    failed attempt's problem codes; the whole reason is in `--show N`)."""
    m = c.meta
    how = str(m.get("fallback") or ("repaired" if m.get("repair_used") else "ok"))
    codes = [str(p).split(":", 1)[0] for p in m.get("problems") or ()]
    if how == "model-free" and codes:
        how += f" (checkpoint failed: {', '.join(dict.fromkeys(codes))})"
    return how


def _row(c: StoredCheckpoint, again: list[int]) -> list[str]:
    m = c.meta
    number = f"#{c.number}" + (f" (= {', '.join(f'#{n}' for n in again)})" if again else "")
    tokens = f"{m.get('tokens_before', '?')} -> {m.get('tokens_after', '?')}"
    return [
        number,
        f"{c.at:%Y-%m-%d %H:%M:%S}",
        f"upto #{c.upto_seq}",
        _how(c),
        f"calls {m.get('calls', 0)}",
        f"tokens {tokens}",
        f"memo {len(c.memo)}",
        f"trigger: {m.get('trigger', '?')}",
    ]


def _memo(c: StoredCheckpoint) -> list[dict[str, Any]]:
    """The memo as plain rows, whether its items are typed MemoItems or dicts."""
    items: list[Any] = list(c.memo)
    return [item.to_dict() if hasattr(item, "to_dict") else dict(item) for item in items]


def _kept(seq: object, text: str, asked: str = "") -> str:
    """A kept message under its number; its later lines framed, so none passes for another's number; a
    short reply's question (the agent's words, `MemoItem.asked`) framed above it."""
    first, *rest = text.splitlines() or [""]
    question = frame_lines(f"(the agent's question before it: {asked})") if asked else []
    return "\n".join([*question, f"#{seq}: {first}", *frame_lines("\n".join(rest))])


def _show(c: StoredCheckpoint) -> str:
    """A checkpoint as `--show` prints it: the mind and the scene (the model's words) framed below their
    headings, so no line of them passes for a heading or a kept message; shown terminal-safe."""
    kept = (_kept(m.get("seq", "?"), str(m.get("text", "")), str(m.get("asked", ""))) for m in _memo(c))
    memo = "\n".join(kept) or "(empty)"
    meta = json.dumps(c.meta, indent=2, default=str, ensure_ascii=False)
    summary = "  ".join(_row(c, []))
    mind, scene = frame_body(c.mind.strip()), frame_body(c.scene.strip())
    parts = [summary, f"## Mind\n{mind}", f"## Memo\n{memo}", f"## Scene\n{scene}"]
    return terminal_safe("\n\n".join([*parts, f"## Meta\n{meta}"]))


def _as_json(c: StoredCheckpoint) -> dict[str, Any]:
    return {
        "number": c.number,
        "at": c.at.isoformat(),
        "upto_seq": c.upto_seq,
        "mind": c.mind,
        "memo": _memo(c),
        "scene": c.scene,
        "meta": c.meta,
    }


def _print_diff(a: StoredCheckpoint, b: StoredCheckpoint) -> None:
    lines = list(
        difflib.unified_diff(
            a.mind.splitlines(),
            b.mind.splitlines(),
            f"checkpoint {a.number}",
            f"checkpoint {b.number}",
            lineterm="",
        )
    )
    if not lines:
        typer.echo("(the minds are identical)")
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False, soft_wrap=True)  # colours on a terminal only
    for line in lines:
        style = {"+": "green", "-": "red", "@": "cyan"}.get(line[:1], "")
        if line.startswith(("+++", "---")):
            style = "bold"
        console.print(Text(terminal_safe(line), style=style))


def _number(value: int | None) -> int | None:
    if value is not None and not 1 <= value <= MAX_SQL_INT:
        raise typer.BadParameter(f"{value} is not a checkpoint number (they start at 1)")
    return value


def _numbers(value: tuple[int, int] | None) -> tuple[int, int] | None:
    if value is not None:
        for number in value:
            _number(number)
    return value


def checkpoints(
    session: Annotated[
        str | None,
        typer.Option("--session", "-s", help="Session id (default: most recent).", callback=check_session_id),
    ] = None,
    show: Annotated[
        int | None, typer.Option("--show", help="Show checkpoint N whole.", callback=_number)
    ] = None,
    diff: Annotated[
        tuple[int, int] | None,
        typer.Option("--diff", help="Diff the mind between checkpoints N and M.", callback=_numbers),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List a session's checkpoints, show one, or diff the mind between two."""
    settings = load_settings()
    from avibe.store import open_store

    with open_store(settings.database_url, read_only=True) as store:
        stored = store.list_checkpoints(_session_id(store, session))
    if diff is not None:
        a, b = (_pick(stored, n) for n in diff)
        _print_diff(a, b)
    elif show is not None:
        chosen = _pick(stored, show)
        typer.echo(json.dumps(_as_json(chosen), indent=2) if as_json else _show(chosen))
    elif as_json:
        typer.echo(json.dumps([_as_json(c) for c in stored], indent=2))
    elif not stored:
        typer.echo("(no checkpoints in this session)")
    else:
        rows = [_row(c, again) for c, again in distinct(stored)]
        print_table(["n", "at", "upto", "how", "calls", "tokens", "memo", "trigger"], rows, header=False)


def _skill_dirs(workdir: Path) -> list[Path]:
    return [workdir / ".avibe" / "skills", load_settings().home / "skills"]


@skill_app.command("list")
def skill_list(workdir: ProjectOpt = Path(".")) -> None:
    """List the skills Vibey can load (the catalogue in its system prompt)."""
    from avibe.tools import catalogue_text, discover_skills

    typer.echo(terminal_safe(catalogue_text(discover_skills(_skill_dirs(workdir))) or "(no skills found)"))


@skill_app.command("load")
def skill_load(
    name: Annotated[str, typer.Argument(help="The skill's name.")],
    workdir: ProjectOpt = Path("."),
) -> None:
    """Print a skill's whole SKILL.md (what a cut skill in a checkpoint points to)."""
    from avibe.tools import find_skill, skill_text

    if not name.strip() or not name.isprintable() or "/" in name or len(name) > 200:
        raise BadArgument(f"{name[:60]!r} is not a skill name; `vibe skill list` shows the skills")
    found = find_skill(_skill_dirs(workdir), name)
    if found is None:
        raise BadArgument(f"no skill named {name!r}; `vibe skill list` shows the skills")
    typer.echo(terminal_safe(skill_text(found)))


def register(app: typer.Typer) -> None:
    app.command("checkpoints")(checkpoints)
    app.add_typer(skill_app, name="skill")
