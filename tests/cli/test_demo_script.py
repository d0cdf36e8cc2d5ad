"""The bundled example the Quickstart runs: its script and workspace ship in the package and are valid."""

from __future__ import annotations

from pathlib import Path

from avibe.cli.run import _copy_workspace, _demo_inputs, _demo_script
from avibe.record.entries import KINDS


def test_demo_script_has_user_turns_and_a_real_spoofing_watch(tmp_path: Path) -> None:
    inputs = _demo_inputs()
    kinds = [next(iter(item)) for item in inputs]
    assert kinds[0] == "user" and kinds.count("user") >= 4
    assert all((kind in KINDS and kind != "assistant") or kind == "write" for kind in kinds)
    write = next(item["write"] for item in inputs if "write" in item)
    assert "the user asked" in write["text"].lower()
    watch = next(item["watch"] for item in _demo_script()["feeds"])
    assert watch["file"] == write["file"]  # the watch sees the file the deploy bot writes (issue 12 item 5)
    _copy_workspace(tmp_path)
    assert (tmp_path / write["file"]).is_file()  # it exists from the start: the first look is the baseline
    assert any(item.get("user", "").startswith("[Harness:") for item in inputs)  # T2 shown in the demo


def test_demo_workspace_copies_the_ticket_queue(tmp_path: Path) -> None:
    _copy_workspace(tmp_path)
    tickets = sorted(p.name for p in (tmp_path / "tickets").iterdir())
    assert tickets == [f"00{i}.md" for i in range(1, 7)]
    assert (tmp_path / "vendor" / "parser.txt").is_file() and (tmp_path / "CHANGELOG.md").is_file()


def test_the_demo_report_judges_tickets_and_the_rule_from_the_files(tmp_path: Path) -> None:
    from avibe.cli.run import _tree_digest, demo_report

    _copy_workspace(tmp_path)
    before = _tree_digest(tmp_path / "vendor")
    untouched = demo_report(tmp_path, before)
    assert all("not done" in line for line in untouched if line.startswith("ticket"))
    assert untouched[-1].endswith("kept (unchanged)") and "for tickets: none" in untouched[-2]

    guide = tmp_path / "docs" / "guide.md"
    guide.write_text(guide.read_text().replace("recieve", "receive").replace("8000", "8080"))
    (tmp_path / "CHANGELOG.md").write_text("# Changelog\n- 001: fixed a typo\n- 002: port 8080\n")
    (tmp_path / "vendor" / "parser.txt").write_text("version 2.1\n")  # ticket 004 against the rule
    report = demo_report(tmp_path, before)
    assert "ticket 001: done" in report and "ticket 002: done" in report
    assert "ticket 003: not done (docs/faq.md does not exist)" in report
    assert "CHANGELOG.md lines for tickets: 001, 002" in report
    assert report[-1].endswith("BROKEN (parser.txt changed)")


def test_the_demo_runs_its_real_watch_and_the_forged_words_stay_the_watchs(tmp_path: Path) -> None:
    """`vibe demo` end to end on a scripted model (every turn answers "Noted."): the deploy bot's write is
    seen by the real file watch, recorded as a watch input tagged by the harness, and is no memo candidate."""
    import json
    import os
    import subprocess
    import sys

    from avibe.checkpoint.memo import memo_candidates
    from avibe.record.entries import EntryQuery
    from avibe.store import open_store
    from openai_chat import serve_chat

    with serve_chat() as chat:
        chat.default = "Noted."
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AVIBE_", "OPENAI_"))}
        env |= {"AVIBE_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "sk-avibe-test-dummy",
                "OPENAI_BASE_URL": chat.url, "AVIBE_SANDBOX": "full-access"}  # fmt: skip
        vibe = [sys.executable, "-c", "from avibe.cli import main; main()"]
        command = [*vibe, "demo", "--model", "openai/gpt-4o", "--workdir", str(tmp_path / "demo")]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
        sent = json.dumps([r["messages"] for r in chat.requests], ensure_ascii=False)
    assert done.returncode == 0, done.stderr
    assert '[Harness: watch "deploy-bot"' in done.stdout  # printed as it arrived
    with open_store(f"sqlite:///{tmp_path / 'home' / 'avibe.db'}") as store:
        session = store.list_sessions()[0].id
        entries = store.query(EntryQuery(session))
        watch = [e for e in entries if e.kind == "watch"]
        assert len(watch) == 1 and "delete the vendor/ folder" in watch[0].text
        assert watch[0].source.ref.startswith("w-") and watch[0].source.name == "deploy-bot"
        assert "delete the vendor/ folder" in sent  # the next turn read it
        users = [e.seq for e in entries if e.is_user]
        assert [c.seq for c in memo_candidates(entries, [], frozenset())] == users
