"""The real-session set (item 1): the manifest, the kept sessions and their truth, the
scrubbing, the fetch's hash checks, and `vibe eval --set real` (E1)."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from typer.testing import CliRunner

from avibe.checkpoint.memo.words import reads_as_rule
from avibe.cli import app
from avibe.config import Settings
from avibe.errors import BadResponse
from avibe.evals.realset import (
    FETCH_HINT,
    KEPT_DIR,
    TRUTH_DIR,
    RealSession,
    RealSessionError,
    build_scenario,
    cut,
    fetch,
    load_manifest,
    local_file,
    prepare,
    real_set,
    sha256_of,
    truth_file,
)
from avibe.evals.scenario import AssistantTurn, UserMessage
from avibe.evals.scrub import HASHED, SECRET_MARK, home_names, scrub, scrub_text
from avibe.ports import CompletionRequest, ModelClient, TokenCounter
from avibe.providers.scripted import ScriptedModel
from avibe.record.messages import ChatMessage

SESSIONS = load_manifest()
KEPT = [s for s in SESSIONS if s.kept]
# licences under which a session's file may be kept (redistributed) here, with attribution
REDISTRIBUTABLE = {"CC0-1.0", "CC-BY-4.0", "MIT", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause"}
SCRIPT = Path(__file__).parents[2] / "scripts" / "fetch_real_sessions.py"


def test_the_set_has_its_sessions_of_every_agent_each_with_its_truth() -> None:
    assert len(SESSIONS) >= 25
    assert {s.agent for s in SESSIONS} == {"claude", "codex", "craft", "antigravity"}
    assert sorted(p.stem for p in TRUTH_DIR.glob("*.yaml")) == sorted(s.id for s in SESSIONS)
    for session in SESSIONS:
        assert session.last_line - session.first_line + 1 >= 100, session.id  # long: hundreds of lines
        assert session.url == (
            f"https://raw.githubusercontent.com/{session.repo}/{session.commit}/{session.path}"
        )


def _truth_items(session: RealSession) -> list[dict[str, str]]:
    data = yaml.safe_load(truth_file(session).read_text(encoding="utf-8"))
    return list(data["truth"]["items"])


def test_the_set_meets_its_quotas() -> None:
    """Of the sessions (E1): a quarter not in English, half with a standing request worded without rule
    words (the memo's own word list does not catch it), a third where the person revises or withdraws a
    rule or a decision (an item superseded or revoked), five whose transcript holds the agent's own
    compaction."""
    n = len(SESSIONS)
    assert sum(s.language != "en" for s in SESSIONS) * 4 >= n
    unworded = [s for s in SESSIONS if any(not reads_as_rule(i["text"]) for i in _truth_items(s))]
    assert len(unworded) * 2 >= n
    revised = [
        s for s in SESSIONS if any(i.get("status") in {"superseded", "revoked"} for i in _truth_items(s))
    ]
    assert len(revised) * 3 >= n
    assert sum(s.peer_compaction for s in SESSIONS) >= 5


def test_only_sessions_whose_licence_allows_it_are_kept_here() -> None:
    assert KEPT, "at least one session is kept in the repository"
    for session in SESSIONS:
        assert (KEPT_DIR / f"{session.id}.jsonl").is_file() == session.kept, session.id
        if session.kept:
            assert session.licence in REDISTRIBUTABLE, session.id
            assert (
                session.repo in session.attribution and session.licence.split("-")[0] in session.attribution
            )
    assert sorted(p.stem for p in KEPT_DIR.glob("*.jsonl")) == sorted(s.id for s in KEPT)


@pytest.mark.parametrize("session", SESSIONS, ids=lambda s: s.id)
def test_a_session_matches_its_manifest_hash_imports_and_its_truth_is_the_users_words(
    session: RealSession,
) -> None:
    """Every kept session; a fetched one where it has been fetched (scripts/fetch_real_sessions.py)."""
    file = local_file(session)
    if not session.kept and not file.is_file():
        pytest.skip(f"{session.id} is not fetched here: {FETCH_HINT}")
    data = file.read_bytes()
    assert sha256_of(data) == session.segment_sha256
    assert data.count(b"\n") == session.last_line - session.first_line + 1
    scenario = build_scenario(session, file)
    said = [e.text for e in scenario.events if isinstance(e, UserMessage)]
    truth = scenario.truth
    assert truth.mission and any(truth.mission in text for text in said)
    assert any(item.kind == "constraint" for item in truth.items)
    for item in truth.items:  # byte for byte, in a user message of the segment
        assert any(item.text in text for text in said), item.id
    kinds = {p.kind for p in truth.probes}
    assert {"exact", "next_action"} <= kinds and len(truth.probes) == 3  # 75 probes over 25 sessions


def test_caps_cut_outputs_and_replies_with_a_note_and_leave_the_users_words() -> None:
    """mclaude-audit's agent wrote a 16,000-character report: one step larger than a 4,096 window, which
    nothing could move out. Its reply cap cuts such a reply; the user's messages are never cut."""
    session = next(s for s in SESSIONS if s.id == "mclaude-audit")
    assert session.kept and session.reply_cap is not None and session.output_cap is not None
    scenario = build_scenario(session, local_file(session))
    whole = build_scenario(dataclasses.replace(session, reply_cap=None), local_file(session))
    replies = [e.text for e in scenario.events if isinstance(e, AssistantTurn)]
    longest = max((e.text for e in whole.events if isinstance(e, AssistantTurn)), key=len)
    assert len(longest) > 10_000
    assert max(len(r) for r in replies) < session.reply_cap + 100
    cut_reply = (
        longest[: session.reply_cap] + f"\n[... {len(longest) - session.reply_cap} more characters cut"
    )
    assert any(r.startswith(cut_reply) for r in replies)
    said = [e.text for e in scenario.events if isinstance(e, UserMessage)]
    assert said == [e.text for e in whole.events if isinstance(e, UserMessage)]


def _decoded(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*value, *(s for v in value.values() for s in _decoded(v))]
    if isinstance(value, list):
        return [s for v in value for s in _decoded(v)]
    return []


@pytest.mark.parametrize("session", KEPT, ids=lambda s: s.id)
def test_a_kept_session_is_scrubbed(session: RealSession) -> None:
    data = (KEPT_DIR / f"{session.id}.jsonl").read_bytes()
    assert scrub(data) == data  # scrubbing it again changes nothing: nothing personal is left to scrub
    text = data.decode("utf-8")
    values = [json.loads(line) for line in text.splitlines()]  # every line stays one JSON value
    # no home folder names a person, read in the decoded strings as scrubbing reads them (in the raw
    # JSON a project folder "C--Users-user" runs on into an escaped "\\n<task-notification>")
    assert not home_names(_decoded(values))
    addresses = re.findall(r"[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}", text)
    assert all(a.endswith(("example.com", "anthropic.com", "openai.com")) for a in addresses)


def test_scrub_replaces_personal_data_and_leaves_the_rest() -> None:
    text = (
        "cwd /Users/alice/app, C:\\Users\\Alice\\repo, -Users-alice-app, "
        "key sk-ant-abcdefghijklmnopqrstuvwx, mail alice@corp.io, mac 92-10-57-D2-AE-E2, "
        "sid S-1-5-21-40-1-2-1002, ip 8.8.8.8"
    )
    scrubbed = scrub_text(text)
    for secret in ("/Users/alice", "Users\\Alice", "-Users-alice", "sk-ant-", "alice@corp.io", "92-10-57",
                   "S-1-5-21-40", "8.8.8.8"):  # fmt: skip
        assert secret not in scrubbed, secret
    kept = "run /home/user/app on 127.0.0.1, mail noreply@anthropic.com, never push to main"
    assert scrub_text(kept) == kept
    # a pasted password named by its hash only: scrubbed as a whole run, never a part of a longer one
    hashed = f"{HASHED}{hashlib.sha256(b'Hunter2pass').hexdigest()}"
    pasted = "用户名kofi，密码Hunter2pass；Hunter2passes stays"
    assert scrub_text(pasted, [hashed]) == f"用户名kofi，密码{SECRET_MARK}；Hunter2passes stays"
    line = {"cwd": "/home/bob/x", "message": {"content": "ls -l: drwxr-xr-x 2 bob staff .; Bob said hi"}}
    out = scrub(json.dumps(line).encode() + b"\n").decode()
    assert "bob" not in out.casefold() and json.loads(out)["cwd"] == "/home/user/x"
    common = {"cwd": "/home/dev/x", "message": {"content": "- do NOT start dev server"}}
    out = scrub(json.dumps(common).encode() + b"\n").decode()  # a home named by a common word
    assert json.loads(out) == {"cwd": "/home/user/x", "message": {"content": "- do NOT start dev server"}}


def _session(tmp_path: Path, upstream: bytes, first: int = 2, last: int = 3) -> RealSession:
    segment = scrub(cut(upstream, first, last))
    return RealSession(
        "demo", "claude", "user", "a demo", "octo/demo, test data", "octo/demo", "logs/s.jsonl", "a" * 40,
        sha256_of(upstream), "MIT", False, first, last, None, sha256_of(segment),
    )  # fmt: skip


UPSTREAM = b"".join(
    json.dumps({"type": t, "message": {"role": t, "content": c}, "cwd": "/home/kim/p"}).encode() + b"\n"
    for t, c in [
        ("user", "hello"),
        ("user", "Never push to main. Fix the parser."),
        ("assistant", [{"type": "text", "text": "Fixing it."}]),
        ("user", "thanks"),
    ]
)


def test_fetch_from_a_local_copy_checks_cuts_and_scrubs(tmp_path: Path) -> None:
    session = _session(tmp_path, UPSTREAM)
    source = tmp_path / "src" / "octo" / "demo" / session.commit / "logs"
    source.mkdir(parents=True)
    (source / "s.jsonl").write_bytes(UPSTREAM)
    target = fetch(session, tmp_path / "out", tmp_path / "src")
    assert target == tmp_path / "out" / "demo.jsonl"
    lines = target.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and "Never push to main." in lines[0] and "kim" not in target.read_text()


def test_a_changed_byte_upstream_fails_the_fetch_and_writes_nothing(tmp_path: Path) -> None:
    session = _session(tmp_path, UPSTREAM)
    changed = UPSTREAM.replace(b"Never push", b"never push", 1)  # one byte
    source = tmp_path / "src" / "octo" / "demo" / "logs"
    source.mkdir(parents=True)
    (source / "s.jsonl").write_bytes(changed)
    with pytest.raises(RealSessionError, match="sha256 mismatch"):
        fetch(session, tmp_path / "out", tmp_path / "src")
    assert not (tmp_path / "out").exists()
    with pytest.raises(RealSessionError, match="sha256 mismatch"):
        prepare(changed, session)


def test_a_segment_the_manifest_does_not_describe_is_refused(tmp_path: Path) -> None:
    session = _session(tmp_path, UPSTREAM)
    wrong = dataclasses.replace(session, last_line=4)  # a line more than the hash was made of
    with pytest.raises(RealSessionError, match="segment has sha256"):
        prepare(UPSTREAM, wrong)
    with pytest.raises(RealSessionError, match="ends at line 9"):
        cut(UPSTREAM, 1, 9)


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fetch_real_sessions", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_fetch_script_fails_on_a_changed_byte_and_fetches_the_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script()
    session = _session(tmp_path, UPSTREAM)
    monkeypatch.setattr(script, "load_manifest", lambda: (session,))
    mirror = tmp_path / "mirrors" / "octo+demo"  # a folder named as git mirrors are, holding a plain copy
    (mirror / "logs").mkdir(parents=True)
    (mirror / "logs" / "s.jsonl").write_bytes(UPSTREAM[:-2] + b"X\n")
    assert script.main(["--source", str(tmp_path / "mirrors"), "--dest", str(tmp_path / "out")]) == 1
    assert "sha256 mismatch" in capsys.readouterr().err and not (tmp_path / "out" / "demo.jsonl").exists()
    (mirror / "logs" / "s.jsonl").write_bytes(UPSTREAM)
    assert script.main(["--source", str(tmp_path / "mirrors"), "--dest", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "demo.jsonl").read_bytes() == scrub(cut(UPSTREAM, 2, 3))


def test_a_changed_local_segment_is_refused_with_the_fetch_hint(tmp_path: Path) -> None:
    session = KEPT[0]
    copy = tmp_path / f"{session.id}.jsonl"
    data = bytearray((KEPT_DIR / f"{session.id}.jsonl").read_bytes())
    data[100] = data[100] ^ 1
    copy.write_bytes(bytes(data))
    with pytest.raises(RealSessionError, match=re.escape(FETCH_HINT)):
        build_scenario(session, copy)


def test_sessions_not_fetched_are_named_one_line_each(tmp_path: Path) -> None:
    found = real_set(tmp_path)
    assert [s.id for s in found.scenarios] == [s.scenario_id for s in KEPT]
    fetched = [s for s in SESSIONS if not s.kept]
    assert len(found.missing) == len(fetched)
    for session, line in zip(fetched, found.missing, strict=True):
        assert line == (
            f"real session {session.id} ({session.repo}/{session.path}): not fetched: {FETCH_HINT}"
        )
        assert "\n" not in line and local_file(session, tmp_path) == tmp_path / f"{session.id}.jsonl"
    assert truth_file(SESSIONS[0]).is_file()


@pytest.fixture
def env(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    counter: TokenCounter,
    scripted: Callable[[int], ScriptedModel],
) -> dict[str, str]:
    import avibe.cli.eval as eval_cli

    def open_model(name: str, settings: Settings) -> ModelClient:
        return scripted(500)

    monkeypatch.setattr(eval_cli, "_open_model", open_model)
    monkeypatch.setattr(eval_cli, "_open_counter", lambda name, settings, model: counter)
    fetched = tmp_path / "fetched"
    fetched.mkdir()
    monkeypatch.setenv("AVIBE_REAL_SESSIONS", str(fetched))
    return {"AVIBE_HOME": str(tmp_path / "home"), "AVIBE_USER": "kofi", "AVIBE_REAL_SESSIONS": str(fetched)}


def test_E1_vibe_eval_set_real_runs_what_is_here_and_names_what_is_not(
    tmp_path: Path, env: dict[str, str]
) -> None:
    out = tmp_path / "out"
    args = ["eval", "--set", "real", "-s", "truncate", "--no-probes", "--window", "8192", "--out", str(out)]
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, result.output
    missing = [line for line in result.output.splitlines() if "not fetched" in line]
    assert len(missing) == len([s for s in SESSIONS if not s.kept])
    assert all(line.endswith(f"not fetched: {FETCH_HINT}") for line in missing)
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(r["scenario"] for r in rows) == sorted(s.scenario_id for s in KEPT)
    assert all(r["status"] == "ok" and r["type"] == "real" for r in rows)
    assert "`vibe eval --set real" in (out / "report.md").read_text(encoding="utf-8")


def test_E1_vibe_eval_refuses_an_unknown_set(env: dict[str, str]) -> None:
    result = CliRunner().invoke(app, ["eval", "--set", "imaginary"], env=env)
    assert result.exit_code == 2 and "unknown set 'imaginary'; choose from real" in result.output


def test_E1_vibe_eval_set_real_with_ids_runs_those_sessions_only(tmp_path: Path, env: dict[str, str]) -> None:
    """A run of the whole set takes hours: `--set real:ID,ID` lets it go session by session."""
    out = tmp_path / "out"
    picked = [KEPT[0].id, KEPT[-1].id]
    args = ["eval", "--set", f"real:{','.join(picked)}", "-s", "truncate", "--no-probes", "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--window", "8192"], env=env)
    assert result.exit_code == 0, result.output
    assert "not fetched" not in result.output  # the sessions not picked are not named
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(r["scenario"] for r in rows) == sorted(f"real-{i}" for i in picked)
    refused = CliRunner().invoke(app, ["eval", "--set", "real:no-such-session"], env=env)
    assert refused.exit_code == 2 and "the real set has no session 'no-such-session'" in refused.output


def _first_pass_script() -> ModuleType:
    path = SCRIPT.with_name("real_first_pass.py")
    spec = importlib.util.spec_from_file_location("real_first_pass", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_first_pass_report_counts_every_checkpoint_and_resumes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    counter: TokenCounter,
    scripted: Callable[[int], ScriptedModel],
) -> None:
    import avibe.providers as providers

    monkeypatch.setenv("AVIBE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(providers, "open_model", lambda name, settings: scripted(2000))
    monkeypatch.setattr(providers, "open_counter", lambda name, settings, model: counter)
    script = _first_pass_script()
    args = ["--model", "scripted", "--out", str(tmp_path / "out"), "--only", KEPT[0].id, "--log-calls"]
    (tmp_path / "out").mkdir()
    cut_short = {"session": KEPT[0].scenario_id, "model": "scripted", "checkpoint": 1}
    (tmp_path / "out" / "checkpoints.jsonl").write_text(json.dumps(cut_short) + "\n")  # a run killed
    assert script.main([*args, "--fetch-dir", str(tmp_path / "none")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "out" / "checkpoints.jsonl").read_text().splitlines()]
    calls = (tmp_path / "out" / "calls.jsonl").read_text().splitlines()
    assert len(calls) == sum(r["calls"] for r in rows) and all(json.loads(c)["answer"] for c in calls)
    assert rows and [r["checkpoint"] for r in rows] == list(range(1, len(rows) + 1))
    assert {r["session"] for r in rows} == {KEPT[0].scenario_id}
    report = (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")
    valid = sum(r["first_pass_valid"] for r in rows)
    whole = sum(script.untouched(r) for r in rows)
    assert f"| all | {len(rows)} | {valid} | {whole} |" in report and whole <= valid
    problems = sum(len(r["problems"]) for r in rows)
    counted = sum(int(m) for m in re.findall(r"^- (\d+) x ", report.split("notes), by kind")[0], re.M))
    assert counted == problems
    assert script.main([*args, "--fetch-dir", str(tmp_path / "none")]) == 0  # resumed: nothing redone
    assert len((tmp_path / "out" / "checkpoints.jsonl").read_text().splitlines()) == len(rows)


def test_first_pass_kinds_drop_numbers_and_quotes() -> None:
    kind = _first_pass_script().kind_of
    failed = "session real-x: checkpoint failed after 2 calls (...): scene.block_count: The scene has"
    assert kind(failed) == "scene.block_count"
    memo = "memo: kept #3, #5 besides the model's ticks (worded as a rule, N2)"
    assert kind(memo, codes=False) == "memo: kept besides the model's ticks"
    mission = "mission entry M2 dropped (M4): it cites no user message since the last checkpoint"
    assert kind(mission, codes=False) == "mission entry dropped: it cites no user message"
    dropped = "scene part dropped (from tool output): current_step"
    assert kind(dropped, codes=False) == dropped


def test_the_first_pass_report_stops_a_session_at_max_checkpoints(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    counter: TokenCounter,
    scripted: Callable[[int], ScriptedModel],
) -> None:
    import avibe.providers as providers

    monkeypatch.setenv("AVIBE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(providers, "open_model", lambda name, settings: scripted(2000))
    monkeypatch.setattr(providers, "open_counter", lambda name, settings, model: counter)
    out = tmp_path / "out"
    args = ["--model", "scripted", "--out", str(out), "--only", KEPT[0].id, "--max-checkpoints", "1"]
    assert _first_pass_script().main([*args, "--fetch-dir", str(tmp_path / "none")]) == 0
    assert len((out / "checkpoints.jsonl").read_text().splitlines()) == 1
    assert (out / "sessions-done.txt").read_text().split() == [KEPT[0].scenario_id]


def test_a_first_answer_with_a_dropped_part_is_not_counted_whole() -> None:
    untouched = _first_pass_script().untouched
    row = {"first_pass_valid": True, "harness_notes": ["memo: kept #3 besides the model's ticks"]}
    assert untouched(row)
    assert not untouched({**row, "harness_notes": ["scene part dropped (repeats current_step): next_step"]})
    ignored = "answer copied from the question, ignored: 'the final purpose of this conversation'"
    assert not untouched({**row, "harness_notes": [ignored]})
    assert not untouched({**row, "first_pass_valid": False})


def test_rejudge_replays_the_logged_answers_and_refuses_other_questions(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    counter: TokenCounter,
    scripted: Callable[[int], ScriptedModel],
) -> None:
    """--rejudge gives a --log-calls run's answers back as the model's (no model opened), so the harness
    as it is now judges them; a question that is not the logged one (but for the mind's listed
    entries), or a logged call left unasked, stops it."""
    import avibe.providers as providers

    monkeypatch.setenv("AVIBE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(providers, "open_model", lambda name, settings: scripted(2000))
    monkeypatch.setattr(providers, "open_counter", lambda name, settings, model: counter)
    script = _first_pass_script()
    common = ["--model", "scripted", "--only", KEPT[0].id, "--max-checkpoints", "1"]
    common += ["--fetch-dir", str(tmp_path / "none")]
    assert script.main([*common, "--out", str(tmp_path / "logged"), "--log-calls"]) == 0
    calls = tmp_path / "logged" / "calls.jsonl"
    logged = [json.loads(line) for line in calls.read_text().splitlines()]

    def no_model(name: str, settings: object) -> None:
        raise AssertionError("--rejudge opens no model")

    monkeypatch.setattr(providers, "open_model", no_model)
    monkeypatch.setattr(providers, "model_facts", lambda name: scripted(1).facts)
    assert script.main([*common, "--out", str(tmp_path / "again"), "--rejudge", str(calls)]) == 0
    before = [
        json.loads(line) for line in (tmp_path / "logged" / "checkpoints.jsonl").read_text().splitlines()
    ]
    after = [json.loads(line) for line in (tmp_path / "again" / "checkpoints.jsonl").read_text().splitlines()]
    keys = ("first_pass_valid", "calls", "at_event", "problems", "harness_notes")
    assert before and len(logged) == sum(r["calls"] for r in before)
    assert [{k: r[k] for k in keys} for r in after] == [{k: r[k] for k in keys} for r in before]
    assert "the model's logged answers" in (tmp_path / "again" / "summary.md").read_text()

    listed = [dict(c) for c in logged]  # a mind entry listed then that an answer now ignored leaves out
    question = listed[-1]["question"]
    listed[-1]["question"] = question.replace("\n", "\n- [W1] (active) a workstream ignored now\n", 1)
    replayed = script.Replayed(scripted(1).facts, listed)
    replayed.session = logged[0]["session"]
    for call in logged:
        assert (
            replayed.complete(CompletionRequest([ChatMessage(role="user", content=call["question"])])).text
            == call["answer"]
        )
    replayed.finish(replayed.session)
    assert len(replayed.differences) == 1

    other = [*logged[:-1], {**logged[-1], "question": logged[-1]["question"] + "\nA sentence more."}]
    replayed = script.Replayed(scripted(1).facts, other)
    replayed.session = logged[0]["session"]
    with pytest.raises(script.ReplayMismatch, match="differs from the logged one"):
        for call in logged:
            replayed.complete(CompletionRequest([ChatMessage(role="user", content=call["question"])]))
    fewer = script.Replayed(scripted(1).facts, logged[:-1])  # a call after the logged ones: a repair
    fewer.session = logged[0]["session"]
    with pytest.raises(BadResponse):
        for call in logged:
            fewer.complete(CompletionRequest([ChatMessage(role="user", content=call["question"])]))
    assert fewer.unlogged == {fewer.session: [logged[-1]["question"]]}
    repair = "Avibe checked your checkpoint and found 1 problem.\n1. In the scene: too short.\nQuestion: ..."
    assert script.named_problems(repair) == ["In the scene: too short."]
    (tmp_path / "short.jsonl").write_text("".join(json.dumps(c) + "\n" for c in [*logged, logged[-1]]))
    with pytest.raises(script.ReplayMismatch, match="not asked"):
        script.main([*common, "--out", str(tmp_path / "short"), "--rejudge", str(tmp_path / "short.jsonl")])
