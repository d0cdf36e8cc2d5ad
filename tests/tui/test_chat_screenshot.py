"""The screenshot in the README (docs/chat.svg) is made here, by the test run, from the real app on a
scripted model: a streamed reply after a tool call, an input from a watch under its tag (T1), the context
meter, and an ask-mode approval waiting for y / n / a."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chat_doubles import bubbles, inputs, run, status, until
from vibey_doubles import tool_step

from avibe.ingress import deliver
from avibe.providers.scripted import reply
from avibe.record.entries import Source
from avibe.store import open_store
from avibe.tui.widgets import ApprovalBar

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_readme_screenshot_is_made_from_the_running_chat(make_chat: Any, workdir: Path) -> None:
    (workdir / "tickets").mkdir()
    (workdir / "tickets" / "001.md").write_text("# 001\nRename --verbose to --loud in the CLI help.\n")
    steps = [
        tool_step("read_file", path="tickets/001.md"),
        reply("Ticket 001 asks to rename --verbose to --loud in the CLI help. I'll start with it."),
        reply("The CI watch says the parser tests fail; that is vendor/ code, so I won't touch it."),
        tool_step("edit_file", path="cli.py", old="--verbose", new="--loud"),
    ]
    (workdir / "cli.py").write_text('HELP = "--verbose: say more"\n')
    app, sessions = make_chat(steps, approval="ask", window=32_768)
    sessions.new_id = "s-20261201-a1b2c3"  # what the screenshot shows stays the same run after run
    app.workdir = Path("~/src/release-queue")

    async def scenario() -> None:
        async with app.run_test(size=(104, 30)) as pilot:
            await pilot.press(*"Work through the tickets oldest first. Never modify vendor/.", "enter")
            await until(pilot, lambda: len(bubbles(app, "assistant")) == 1 and "idle" in status(app))
            with open_store(sessions.url) as other:
                watch = Source("watch", name="ci", ref="w1")
                at = datetime(2026, 12, 1, 9, 41, tzinfo=UTC)
                deliver(other, app.session_id, watch, "build failed: vendor/parser tests (3 failures)", at=at)
            await until(pilot, lambda: inputs(app) and len(bubbles(app, "assistant")) == 2)
            await until(pilot, lambda: "idle" in status(app))
            await pilot.press(*"Go on with 001", "enter")
            await until(pilot, lambda: app.query(ApprovalBar), what="the approval question")
            await pilot.pause(0.2)
            DOCS.mkdir(exist_ok=True)
            app.save_screenshot("chat.svg", str(DOCS))

    run(scenario)
    svg = (DOCS / "chat.svg").read_text(encoding="utf-8")
    assert svg.startswith("<svg") and "vibey" in svg and "ctx" in svg and "allow" in svg


MARKDOWN_REPLY = """## Ticket 001: done

Renamed the flag in the CLI help; the tests pass.

- `--verbose` is now `--loud` in `cli.py`
- the old name still works, with a warning
- vendor/ is untouched, as you asked

```python
HELP = "--loud: say more"
ALIASES = {"--verbose": "--loud"}  # warns once
```

| ticket | state |
|--------|-------|
| 001    | done  |
| 002    | next  |
"""


def test_the_markdown_screenshot_is_made_from_a_rendered_reply(make_chat: Any) -> None:
    """docs/chat-markdown.svg: a reply with a heading, a list, a code block and a table, rendered (issue
    29); `/plain` would show the same reply as written."""
    app, sessions = make_chat([reply(MARKDOWN_REPLY)], window=32_768)
    sessions.new_id = "s-20261201-d4e5f6"
    app.workdir = Path("~/src/release-queue")

    async def scenario() -> None:
        async with app.run_test(size=(104, 34)) as pilot:
            await pilot.press(*"Do ticket 001 and tell me what changed.", "enter")
            await until(pilot, lambda: bubbles(app, "assistant") and "idle" in status(app))
            await pilot.pause(0.3)
            app.save_screenshot("chat-markdown.svg", str(DOCS))

    run(scenario)
    svg = (DOCS / "chat-markdown.svg").read_text(encoding="utf-8")
    assert "Ticket&#160;001:&#160;done" in svg and "##" not in svg and "```" not in svg
