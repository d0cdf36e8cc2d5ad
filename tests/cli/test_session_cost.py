"""What the model's requests cost, from LiteLLM's price table and the usage the provider reported: per
request (`Prices.cost`), per turn and per session (`usage_cost` over the recorded points), and end to end
`vibe run` on a hosted model (an OpenAI-compatible server on loopback, reporting usage) then `vibe sessions`
showing what it cost. The embedded model costs nothing; a model the table lacks has no price, never a
guessed one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from avibe.host.events import ModelCalled, TurnStarted
from avibe.providers.facts import model_map
from avibe.providers.prices import Prices, money, prices_for, usage_cost
from avibe.tui.meter import Meter
from openai_chat import USAGE, ChatServer, serve_chat

GPT_4O = model_map()["gpt-4o"]


def test_prices_come_from_the_table_and_the_embedded_model_is_free() -> None:
    prices = prices_for("openai/gpt-4o")
    assert prices is not None and prices.input == GPT_4O["input_cost_per_token"] > 0
    assert prices.cost(1_000, 0, 100) == pytest.approx(
        1_000 * GPT_4O["input_cost_per_token"] + 100 * GPT_4O["output_cost_per_token"]
    )
    cached = prices.cost(1_000, 800, 0)  # the prompt cache's share at the cache-read price
    assert cached == pytest.approx(200 * prices.input + 800 * GPT_4O["cache_read_input_token_cost"])
    assert prices_for("embedded") == prices_for("embedded-1.5b") == prices_for("local:/m.gguf") == Prices()
    assert prices_for("ollama/some-model-nobody-priced") is None
    assert (
        money(None) == "-" and money(0.0) == "$0" and money(0.00042) == "$0.0004" and money(1.234) == "$1.23"
    )


def test_past_the_price_tier_the_whole_request_costs_the_higher_rate() -> None:
    prices = Prices(input=1e-6, output=2e-6, cached=1e-7, tier_at=1_000, tier_input=3e-6, tier_output=4e-6)
    assert prices.cost(1_000, 0, 10) == pytest.approx(1_000 * 1e-6 + 10 * 2e-6)
    assert prices.cost(1_001, 1, 10) == pytest.approx(1_001 * 3e-6 + 10 * 4e-6)


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**5))
def test_a_cache_hit_never_costs_more_and_cost_grows_with_usage(
    prompt: int, cached: int, output: int
) -> None:
    prices = prices_for("openai/gpt-4o")
    assert prices is not None
    assert 0 <= prices.cost(prompt, cached, output) <= prices.cost(prompt, 0, output)
    assert prices.cost(prompt, cached, output) <= prices.cost(prompt + 1, cached, output + 1)


def test_a_sessions_cost_sums_its_requests_and_the_last_turn_starts_at_step_one() -> None:
    points = [
        {"step": 1, "prompt": 100, "cached": 0, "output": 5},
        {"step": 2, "prompt": 200, "cached": 0, "output": 5},
        {"step": 1, "prompt": 300, "cached": 0, "output": 10, "model": "embedded"},  # after /model embedded
    ]
    prices = prices_for("openai/gpt-4o")
    assert prices is not None
    cost = usage_cost(points, "openai/gpt-4o")
    assert cost.session == pytest.approx(prices.cost(100, 0, 5) + prices.cost(200, 0, 5))
    assert cost.last_turn == 0.0 and cost.requests == 3
    unknown = usage_cost(points, "ollama/unpriced")
    assert unknown.session is None and unknown.last_turn == 0.0  # the embedded turn is known to be free
    assert usage_cost([], "openai/gpt-4o").session == 0.0


def test_the_meter_adds_each_request_to_the_turn_and_the_session() -> None:
    prices = prices_for("openai/gpt-4o")
    assert prices is not None
    meter = Meter(100, 1_000, 2_000, prices=prices, session_cost=0.5)
    meter = meter.after(TurnStarted("s", "vibey")).after(ModelCalled(1, 100, 1_000, 0, 100, 0.1, 0))
    one = prices.cost(1_000, 0, 100)
    assert meter.turn_cost == pytest.approx(one) and meter.session_cost == pytest.approx(0.5 + one)
    assert f"{money(one)} turn · $0.50 session" in meter.text()
    meter = meter.after(TurnStarted("s", "vibey"))
    assert meter.turn_cost == 0.0 and "$0 turn · $0.50 session" in meter.text()
    assert "- turn · - session" in Meter(prices=None).after(ModelCalled(1, 1, 1, 0, 1, 0.1, 0)).text()


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with serve_chat() as server:
        yield server


def _vibe(home: Path, work: Path, chat: ChatServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AVIBE_", "OPENAI_"))}
    env |= {"AVIBE_HOME": str(home), "AVIBE_MODEL": "openai/gpt-4o", "AVIBE_SANDBOX": "full-access",
            "OPENAI_API_KEY": "sk-avibe-test-dummy", "OPENAI_BASE_URL": chat.url}  # fmt: skip
    command = [sys.executable, "-m", "avibe", *args]
    return subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=180)


def test_vibe_sessions_shows_what_a_hosted_models_recorded_usage_cost(
    tmp_path: Path, chat: ChatServer
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    chat.call("write_file", path="a.txt", content="hi\n")
    chat.say("Written.")
    done = _vibe(tmp_path / "home", work, chat, "run", "write a.txt")
    assert done.returncode == 0, done.stderr
    assert len(chat.requests) == 2  # two requests, each reporting USAGE
    each = USAGE["prompt_tokens"] * GPT_4O["input_cost_per_token"]
    each += USAGE["completion_tokens"] * GPT_4O["output_cost_per_token"]
    listed = json.loads(_vibe(tmp_path / "home", work, chat, "sessions", "--json").stdout)
    assert [row["cost_usd"] for row in listed] == [pytest.approx(2 * each)]
    table = _vibe(tmp_path / "home", work, chat, "sessions").stdout
    assert money(2 * each) in table.splitlines()[1].split(), table
