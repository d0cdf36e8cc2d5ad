"""Craft Agents sessions and Antigravity trajectories import as Claude Code's do (E1, N7): the person's
words only from the lines the person typed, tool output on its call, the agents' own notes skipped. The
lines follow the files' real formats (public sessions of both, docs/eval-format.md)."""

from __future__ import annotations

import json
from pathlib import Path

from avibe.evals.importers import detect_format, parse_session_file, record_import
from avibe.evals.scenario import AssistantTurn, BackgroundInput, UserMessage
from avibe.record.entries import EntryQuery
from avibe.store import SqlStore

CRAFT: list[dict[str, object]] = [
    {
        "id": "260417-spry-ridge",
        "workspaceRootPath": "~/Desktop/AI",
        "sdkSessionId": "7b7d1db2",
        "name": "memo",
    },
    {
        "id": "m1",
        "type": "user",
        "content": "每当我说出关键字：备忘录 就记录进表格",
        "timestamp": 1776496177050,
        "order": 1,
    },
    # a tool line is written before the reply that introduced it; `order` is the order Craft shows
    {
        "id": "m3",
        "type": "tool",
        "content": "ok",
        "timestamp": 1776496217143,
        "order": 3,
        "toolName": "Bash",
        "toolUseId": "call_1",
        "toolInput": {"command": "memo.py add"},
        "toolResult": "添加备忘录成功",
        "toolStatus": "completed",
        "isError": False,
        "turnId": "t1",
    },
    {
        "id": "m2",
        "type": "assistant",
        "content": "我来帮你设置备忘录功能。",
        "timestamp": 1776496217833,
        "order": 2,
        "isIntermediate": True,
        "turnId": "t1",
    },
    {
        "id": "m4",
        "type": "info",
        "content": "Compacted Conversation",
        "timestamp": 1776853371441,
        "order": 4,
        "statusType": "compaction_complete",
    },
    {"id": "m5", "type": "user", "content": "/compact", "timestamp": 1776853371500, "order": 5},
    {
        "id": "m6",
        "type": "auth-request",
        "content": "Authentication required for n8n API",
        "timestamp": 1,
        "order": 6,
    },
    {
        "id": "m7",
        "type": "user",
        "content": "推送我时，不要把空数据推送给我",
        "timestamp": 1776853400000,
        "order": 7,
    },
]

_REQUEST = (
    "<USER_REQUEST>\n{}\n</USER_REQUEST>\n"
    "<ADDITIONAL_METADATA>\nThe current local time is: now.\n</ADDITIONAL_METADATA>"
)
FIRST = "Hola, revisá el backoffice.\n\nNo toques nada más."
ANTIGRAVITY: list[dict[str, object]] = [
    {
        "step_index": 0,
        "source": "USER_EXPLICIT",
        "type": "USER_INPUT",
        "status": "DONE",
        "created_at": "2026-05-25T09:29:57Z",
        "content": _REQUEST.format(FIRST),
    },
    {
        "step_index": 1,
        "source": "SYSTEM",
        "type": "EPHEMERAL_MESSAGE",
        "status": "DONE",
        "created_at": "2026-05-25T09:29:58Z",
        "content": "The following is an <EPHEMERAL_MESSAGE> not sent by the user.",
    },
    {
        "step_index": 2,
        "source": "MODEL",
        "type": "PLANNER_RESPONSE",
        "status": "DONE",
        "created_at": "2026-05-25T09:29:58Z",
        "thinking": "**Prioritizing Tool Usage**",
        "content": "Voy a mirar.",
        "tool_calls": [
            {"name": "list_dir", "args": {"DirectoryPath": '"c:\\\\SGSP"', "toolAction": '"Listing"'}},
            {"name": "view_file", "args": {"AbsolutePath": '"c:\\\\SGSP\\\\x.md"'}},
        ],
    },
    {
        "step_index": 3,
        "source": "MODEL",
        "type": "LIST_DIRECTORY",
        "status": "DONE",
        "created_at": "2026-05-25T09:30:07Z",
        "content": '{"name":"app.py"}',
    },
    {
        "step_index": 4,
        "source": "SYSTEM",
        "type": "ERROR_MESSAGE",
        "status": "DONE",
        "created_at": "2026-05-25T09:30:07Z",
        "error": "failed to read file: x.md",
    },
    {
        "step_index": 5,
        "source": "USER_EXPLICIT",
        "type": "USER_INPUT",
        "status": "DONE",
        "created_at": "2026-05-25T09:34:15Z",
        "content": _REQUEST.format("hazlo tu por favor"),
    },
]


def _write(tmp_path: Path, lines: list[dict[str, object]]) -> Path:
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path


def test_E1_N7_a_craft_session_imports_in_shown_order_with_its_own_notes_left_out(tmp_path: Path) -> None:
    path = _write(tmp_path, CRAFT)
    assert detect_format(path) == "craft"
    events = parse_session_file(path, "wen").scenario.events
    assert [type(e).__name__ for e in events] == [
        "UserMessage",
        "AssistantTurn",
        "BackgroundInput",
        "UserMessage",
    ]
    turn = events[1]
    assert isinstance(turn, AssistantTurn) and turn.text == "我来帮你设置备忘录功能。"
    assert [(u.name, u.arguments, u.output) for u in turn.tool_uses] == [
        ("Bash", {"command": "memo.py add"}, "添加备忘录成功")
    ]
    command = events[2]
    assert isinstance(command, BackgroundInput) and (command.ref, command.text) == (
        "slash-command",
        "/compact",
    )
    said = [e.text for e in events if isinstance(e, UserMessage)]
    assert "Compacted Conversation" not in said and not any("Authentication" in t for t in said)
    # a segment cut from the middle has no session line: its message lines still say Craft
    assert detect_format(_write(tmp_path, CRAFT[2:])) == "craft"


def test_E1_N7_an_antigravity_trajectory_keeps_the_request_and_answers_calls_in_order(tmp_path: Path) -> None:
    path = _write(tmp_path, ANTIGRAVITY)
    assert detect_format(path) == "antigravity"
    events = parse_session_file(path, "ana").scenario.events
    said = [e.text for e in events if isinstance(e, UserMessage)]
    assert said == [FIRST, "hazlo tu por favor"]
    turn = next(e for e in events if isinstance(e, AssistantTurn))
    assert turn.text == "Voy a mirar."  # the thinking is not a reply
    listing, view = turn.tool_uses
    assert listing.arguments == {"DirectoryPath": "c:\\SGSP", "toolAction": "Listing"}  # decoded from JSON
    assert (listing.output, listing.is_error) == ('{"name":"app.py"}', False)
    assert (view.output, view.is_error) == ("failed to read file: x.md", True)
    assert not any("EPHEMERAL" in e.text for e in events if isinstance(e, UserMessage | AssistantTurn))


def test_A3_both_record_the_persons_words_as_theirs(sqlite_store: SqlStore, tmp_path: Path) -> None:
    for lines, agent in ((CRAFT, "craft-agent"), (ANTIGRAVITY, "antigravity")):
        imported = parse_session_file(_write(tmp_path, lines), "kofi")
        entries = sqlite_store.query(EntryQuery(record_import(sqlite_store, imported)))
        users = [e.text for e in entries if e.kind == "user"]
        assert users == [e.text for e in imported.scenario.events if isinstance(e, UserMessage)]
        assert {e.source.name for e in entries if e.kind == "assistant"} == {agent}
