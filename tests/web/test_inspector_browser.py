"""The inspector in a real browser: Debian's headless Chromium driven by Playwright, over a
session that really ran (the product's `open_session`, a scripted model, four checkpoints).

Each page loads and is saved as a screenshot (test-artifacts/inspector/; with AVIBE_INSPECTOR_DOCS=1 also
docs/inspector-*.png); a memo entry clicked lands on the user's message, byte for byte (N4); the context
plot has one point per model request of the session; a callback input recorded by another connection
appears on the open timeline within a second, under its harness tag (T1); a tool's output shows its first
lines and opens whole with a click, inert, and the errors are marked.

Without Chromium these tests skip on a developer's machine and fail under CI (`.ci/run` installs it)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inspector_support import FIRST, PRINTED, Ran, record_with_activity, run_scripted_session, serving

from avibe.ingress import deliver
from avibe.record.entries import EntryQuery, Source
from avibe.store import SqlStore, open_store

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("AVIBE_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "inspector"
CHROMIUM = os.environ.get("AVIBE_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


def _chromium_or_skip() -> str:
    found = CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")
    if found is None:
        reason = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the inspector's browser tests: {reason}")
        pytest.skip(reason)
    return found


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ran]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield run_scripted_session(tmp_path_factory.mktemp("inspector"), monkeypatch)


@pytest.fixture(scope="module")
def reader(ran: Ran) -> Iterator[SqlStore]:
    """The inspector's own view of the record: opened read-only, as `vibe inspect` opens it."""
    with open_store(ran.db_url, read_only=True) as store:
        yield store


@pytest.fixture(scope="module")
def base(reader: SqlStore) -> Iterator[str]:
    with serving(reader) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = _chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=ARGS, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    opened.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    yield opened
    context.close()
    assert errors == [], errors  # no script error on any page


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=False)
    if os.environ.get("AVIBE_INSPECTOR_DOCS"):
        page.screenshot(path=str(ROOT / "docs" / f"inspector-{name}.png"), full_page=False)


def test_every_page_loads_and_is_saved_as_a_screenshot(
    page: Any, base: str, ran: Ran, tmp_path: Path
) -> None:
    page.goto(f"{base}/")
    assert page.locator(f'tr[data-session="{ran.session}"]').count() == 1
    row = page.locator(f'tr[data-session="{ran.session}"]').inner_text()
    assert "vibey" in row and "openai/gpt-4o" in row and "\t4\t" in row  # agent, model, checkpoints
    _shot(page, "sessions")

    page.goto(f"{base}/s/{ran.session}/timeline")
    kinds = set(page.locator("#timeline .entry").evaluate_all("els => els.map(e => e.dataset.kind)"))
    assert {"user", "assistant"} <= kinds
    assert page.locator("#timeline .checkpoint-mark").count() == 4  # each checkpoint where it happened
    _shot(page, "timeline")

    page.goto(f"{base}/s/{ran.session}/context")
    page.wait_for_function("window.AvibeInspector && AvibeInspector.plot !== null")
    _shot(page, "context")

    page.goto(f"{base}/s/{ran.session}/checkpoints")
    assert page.locator("table.checkpoints tbody tr").count() == 4
    _shot(page, "checkpoints")

    page.goto(f"{base}/s/{ran.session}/checkpoints/2")
    for part in ("Mind", "Memo", "Scene"):
        assert page.locator(f".three h2:has-text('{part}')").count() == 1
    assert page.locator(".diff .d-add").count() > 0  # the mind's diff against checkpoint 1
    assert "#1: 1 → #2: 2" in page.locator(".missions .counts").inner_text()  # M4: never fewer, visibly
    _shot(page, "checkpoint")

    folder = tmp_path / "eval"
    folder.mkdir()
    (folder / "report.md").write_text(
        "# Memory evaluation report\n\n| strategy | mission kept |\n|---|---|\n| avibe-checkpoint | 1.00 |\n"
    )
    with serving(None, eval_dir=folder) as only_eval:
        page.goto(f"{only_eval}/eval")
        assert page.locator(".report table td:has-text('avibe-checkpoint')").count() == 1
        _shot(page, "eval")


def test_N4_a_memo_entry_clicked_lands_on_the_users_message_byte_for_byte(
    page: Any, base: str, ran: Ran, reader: SqlStore
) -> None:
    [*_, last] = reader.list_checkpoints(ran.session)
    assert len(last.memo) >= 2
    for item in last.memo:
        page.goto(f"{base}/s/{ran.session}/checkpoints/{last.number}")
        page.locator(f'.memo-item[data-seq="{item.seq}"]').click()
        page.wait_for_url(f"**/timeline?after={item.seq - 1}#e{item.seq}")
        assert page.evaluate("document.querySelector(':target').id") == f"e{item.seq}"
        landed = page.locator(f"#e{item.seq}")
        assert landed.get_attribute("data-kind") == "user"
        shown = landed.locator("pre.text").evaluate("el => el.textContent")
        [entry] = reader.query(EntryQuery(ran.session, seq_from=item.seq, seq_to=item.seq))
        assert shown == entry.text  # the user's message, byte for byte
        assert landed.is_visible()
    assert any(item.text == FIRST for item in last.memo)  # CR LF, a tab, markup and edge spaces kept


def test_the_plot_has_one_point_per_model_request_and_hovering_shows_it(
    page: Any, base: str, ran: Ran
) -> None:
    page.goto(f"{base}/s/{ran.session}/context")
    page.wait_for_function("window.AvibeInspector && AvibeInspector.plot !== null")
    xs = page.evaluate("AvibeInspector.plot.data[0]")
    views = page.evaluate("AvibeInspector.plot.data[1]")
    assert xs == list(range(1, ran.turn_requests + 1))  # one point per model request of the turns
    assert all(isinstance(v, int) and v > 0 for v in views)
    assert ran.checkpoint_requests > 0  # the checkpoint turns' own requests are not points
    assert len(page.evaluate("AvibeInspector.data.marks")) == 4  # each checkpoint marked
    lines = page.evaluate("[AvibeInspector.plot.data[3][0], AvibeInspector.plot.data[4][0]]")
    assert lines == [page.evaluate("AvibeInspector.data.threshold"), 8_000]  # the trigger line, the window
    target = 3
    x, y = page.evaluate(
        """n => { const u = AvibeInspector.plot, r = u.over.getBoundingClientRect();
                  return [r.left + u.valToPos(n, 'x'), r.top + u.valToPos(u.data[1][n - 1], 'y')]; }""",
        target,
    )
    page.mouse.move(x, y)
    detail = page.locator("#point")
    detail.filter(has_text=f"request {target}").wait_for(timeout=2_000)
    assert "from the prompt cache" in detail.inner_text()


def test_T1_live_update_shows_a_new_callback_input_within_a_second(
    page: Any, base: str, ran: Ran, reader: SqlStore
) -> None:
    page.goto(f"{base}/s/{ran.session}/timeline")
    page.locator("#live:not([hidden])").wait_for(timeout=5_000)  # the event stream is open
    with open_store(ran.db_url) as writer:  # another connection writes, as another process would
        started = time.monotonic()
        entry = deliver(
            writer, ran.session, Source("callback", "deploy", "cb-7"), "The user asked: deploy now."
        )
    page.locator(f"#e{entry.seq}").wait_for(timeout=1_000)
    took = time.monotonic() - started
    assert took < 1.0, took
    landed = page.locator(f"#e{entry.seq}")
    assert landed.get_attribute("data-kind") == "callback"
    assert landed.locator(".tag").inner_text().startswith('[Harness: callback "deploy" (cb-7)')
    # framed below its tag, as everywhere a body not typed by the person is shown
    assert landed.locator("pre.text").evaluate("el => el.textContent") == "│ The user asked: deploy now."


def test_a_tool_output_opens_whole_with_a_click_and_nothing_in_it_runs(page: Any, tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'avibe.db'}") as store:
        session = record_with_activity(store)
        with serving(store) as url:
            page.goto(f"{url}/")
            assert "Nightly <b>build</b> triage" in page.locator(f'tr[data-session="{session}"]').inner_text()
            page.goto(f"{url}/s/{session}/timeline")
            output = page.locator('.happened[data-kind="tool"]').first
            full, head = output.locator("details pre.output"), output.locator("pre.head")
            assert not full.is_visible() and head.is_visible()  # folded: the first lines, then the count
            assert head.inner_text().splitlines()[0] == PRINTED.splitlines()[0]
            assert output.locator(".more").inner_text() == "7 more lines"
            output.locator("summary").click()
            assert full.is_visible() and not head.is_visible() and not output.locator(".more").is_visible()
            assert full.inner_text().splitlines()[-1] == "row 8"
            assert "\\x1b[31mred" in full.inner_text()  # a terminal escape, written out
            assert page.evaluate("typeof window.pwned") == "undefined"  # neither the script nor the img ran
            assert page.locator("#timeline script, #timeline img").count() == 0
            assert page.locator(".happened.failed .bad").count() == 3  # the failed tool, checkpoint, turn
            _shot(page, "timeline-output")
            page.goto("about:blank")  # the live updates' stream ends before the server does
