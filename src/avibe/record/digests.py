"""Short, service-aware digests of large callback bodies (SPEC T1, docs/serve.md).

A GitHub push or workflow_run body is 10-40 KB of JSON, most of it the repository's description. The
record keeps every byte; the model's view of such a callback shows a digest of the few fields an agent
acts on (for GitHub: event, action, repository, ref or PR number and title, sender, URL) and says where
the whole body is (`record_query`). The digest is read from the body, so it is as untrusted as the body:
it is framed like any callback body, and the tag line still comes from the verified headers only.
Pure functions; no IO.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any, Final

DIGEST_OVER_CHARS: Final = 4_000  # a body longer than this is shown as its digest
_VALUE_CHARS: Final = 160  # one field of a digest at most (a PR title, a commit message's first line)

Fields = list[tuple[str, str]]


def _at(data: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(data, Mapping) or part not in data:
            return None
        data = data[part]
    return data


def _text(data: Any, path: str) -> str:
    """The scalar at `path` as one short line ("" when absent or not a scalar)."""
    value = _at(data, path)
    if value is None or isinstance(value, Mapping | list):
        return ""
    line = " ".join(str(value).split())
    return line if len(line) <= _VALUE_CHARS else line[: _VALUE_CHARS - 1] + "…"


def _joined(data: Any, *paths: str, sep: str = " · ") -> str:
    return sep.join(found for path in paths if (found := _text(data, path)))


def _numbered(data: Any, what: str) -> str:
    """`#12 Fix the parser` for a pull request, issue or merge request object at `what`."""
    number = _text(data, f"{what}.number") or _text(data, f"{what}.iid")
    title = _text(data, f"{what}.title")
    return f"#{number} {title}".strip() if number else title


def _github(data: Any) -> Fields:
    fields: Fields = [("action", _text(data, "action")), ("repository", _text(data, "repository.full_name"))]
    for what in ("pull_request", "issue"):
        if _at(data, what) is not None:
            fields.append((what.replace("_", " "), _numbered(data, what)))
    run = next((k for k in ("workflow_run", "workflow_job", "check_run", "check_suite") if _at(data, k)), "")
    if run:
        state = _joined(data, f"{run}.name", f"{run}.status", f"{run}.conclusion")
        branch = _text(data, f"{run}.head_branch")
        fields.append((run.replace("_", " "), state + (f" · branch {branch}" if branch else "")))
    fields += [
        ("ref", _text(data, "ref")),
        ("head commit", _first_line(data)),
        ("sender", _text(data, "sender.login")),
    ]
    url = next(
        (
            u
            for k in ("pull_request", "issue", run, "comment", "release")
            if k and (u := _text(data, f"{k}.html_url"))
        ),
        _text(data, "compare") or _text(data, "repository.html_url"),
    )
    return [*fields, ("url", url)]


def _first_line(data: Any) -> str:
    message = _at(data, "head_commit.message")
    return _text({"m": message.splitlines()[0] if isinstance(message, str) and message else ""}, "m")


def _gitlab(data: Any) -> Fields:
    attributes = "object_attributes"
    state = _joined(data, f"{attributes}.status", f"{attributes}.state", f"{attributes}.action")
    return [
        ("kind", _text(data, "object_kind")),
        ("project", _text(data, "project.path_with_namespace")),
        ("ref", _text(data, "ref") or _text(data, f"{attributes}.ref")),
        (
            "merge request",
            _numbered(data, attributes) if _text(data, "object_kind") == "merge_request" else "",
        ),
        ("state", state),
        ("user", _text(data, "user.username") or _text(data, "user_username")),
        ("url", _text(data, f"{attributes}.url") or _text(data, "project.web_url")),
    ]


def _stripe(data: Any) -> Fields:
    return [
        ("type", _text(data, "type")),
        ("event", _text(data, "id")),
        ("object", _joined(data, "data.object.object", "data.object.id", "data.object.status")),
        ("amount", _joined(data, "data.object.amount", "data.object.currency", sep=" ")),
        ("live", _text(data, "livemode")),
    ]


def _slack(data: Any) -> Fields:
    return [
        ("type", _joined(data, "type", "event.type", sep=" / ")),
        ("team", _text(data, "team_id")),
        ("channel", _text(data, "event.channel")),
        ("user", _text(data, "event.user")),
        ("text", _text(data, "event.text")),
    ]


def _standard(data: Any) -> Fields:
    keys = (
        ", ".join(sorted(str(k) for k in data["data"])[:12]) if isinstance(_at(data, "data"), Mapping) else ""
    )
    return [("type", _text(data, "type")), ("timestamp", _text(data, "timestamp")), ("data fields", keys)]


_SERVICES: Final[dict[str, Callable[[Any], Fields]]] = {
    "github": _github,
    "gitlab": _gitlab,
    "stripe": _stripe,
    "slack": _slack,
    "standard-webhooks": _standard,
}


@functools.lru_cache(maxsize=64)  # a view is derived again at every step; a body is parsed once
def digest(event: str, text: str, seq: int) -> str | None:
    """What the model sees of callback #`seq`'s body when it is long: `event` ("github push") picks the
    fields; None when the body is short enough to show whole, or is not a JSON object of a known service
    (then it is shown as any body is)."""
    if len(text) <= DIGEST_OVER_CHARS:
        return None
    service = event.split(" ", 1)[0]
    fields_of = _SERVICES.get(service)
    if fields_of is None:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, Mapping):
        return None
    lines = [f"{label}: {value}" for label, value in fields_of(data) if value]
    note = (
        f"(a digest of a {len(text):,}-character {service} body; all of it is #{seq} in the record: "
        f"record_query with seq_from={seq}, seq_to={seq}, user_only=false)"
    )
    return "\n".join([event, *lines, note])
