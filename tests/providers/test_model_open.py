"""Choosing a model by name; the CLI's start-up does not pay for LiteLLM or llama.cpp."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from avibe.config import load_settings
from avibe.errors import ConfigError, ModelUnavailable
from avibe.providers import check_model_name, open_counter, open_model
from avibe.providers.counting import CalibratedCounter
from avibe.providers.hosted import DEFAULT_NUM_RETRIES, HostedModel


def _modules_after(code: str) -> list[str]:
    names = "('litellm', 'llama_cpp', 'tiktoken')"
    probe = f"import sys, json; {code}; print(json.dumps(sorted(m for m in {names} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def test_importing_the_cli_and_providers_imports_no_model_library() -> None:
    assert _modules_after("import avibe.cli, avibe.providers, avibe.providers.facts") == []


def test_hosted_facts_need_no_litellm_import() -> None:
    assert _modules_after("from avibe.providers import model_facts; model_facts('openai/gpt-4o')") == []


def test_open_model_routes_names(tmp_path: Path) -> None:
    settings = load_settings({"AVIBE_HOME": str(tmp_path), "AVIBE_MODEL_CACHE": str(tmp_path / "models")})
    hosted = open_model("anthropic/claude-sonnet-4-5", settings)
    assert isinstance(hosted, HostedModel) and hosted.facts.window == 200_000
    assert isinstance(open_counter("openai/gpt-4o", settings), CalibratedCounter)
    with pytest.raises(ModelUnavailable, match="test model"):
        open_model("scripted", settings)
    with pytest.raises(ModelUnavailable, match="unknown model"):
        open_model("no-such/model", settings)
    with pytest.raises(ModelUnavailable, match="vibe models install"):
        open_model("embedded", settings)  # nothing installed in this fresh cache


def _cli() -> typer.Typer:
    from avibe.cli import app

    return app


def test_vibe_models_lists_embedded_and_hosted(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        _cli(), ["models"], env={"AVIBE_HOME": str(tmp_path), "AVIBE_MODEL_CACHE": str(tmp_path / "m")}
    )
    assert result.exit_code == 0, result.output
    assert "embedded" in result.output and "NOT installed - run `vibe models install`" in result.output
    assert "gemini/gemini-2.5-pro" in result.output and "price rises at 200,000" in result.output


def test_vibe_models_name_and_unknown_name(tmp_path: Path) -> None:
    runner, env = CliRunner(), {"AVIBE_HOME": str(tmp_path)}
    shown = runner.invoke(_cli(), ["models", "openai/gpt-4o"], env=env)
    assert shown.exit_code == 0 and "128,000" in shown.output
    bad = runner.invoke(_cli(), ["models", "nope/x"], env=env)
    assert bad.exit_code == 2 and bad.stdout == ""
    assert bad.stderr.startswith("vibe: unknown model 'nope/x'") and bad.stderr.count("\n") == 1
    tier = runner.invoke(_cli(), ["models", "install", "huge"], env=env)
    assert tier.exit_code == 2 and tier.stderr.startswith("vibe: 'huge' is not an embedded model")


def test_a_server_the_map_lacks_needs_its_window(tmp_path: Path) -> None:
    """An Ollama/vLLM model LiteLLM's map does not know: usable once AVIBE_MODEL_WINDOW says its window."""
    env = {"AVIBE_HOME": str(tmp_path)}
    with pytest.raises(ModelUnavailable, match="AVIBE_MODEL_WINDOW"):
        open_model("ollama/qwen2.5-coder", load_settings(env))
    model = open_model("ollama/qwen2.5-coder", load_settings({**env, "AVIBE_MODEL_WINDOW": "32768"}))
    assert (model.facts.window, model.facts.max_output, model.facts.input_price) == (32_768, 4_096, None)
    capped = open_model("openai/gpt-4o", load_settings({**env, "AVIBE_MODEL_WINDOW": "64000"}))
    assert capped.facts.window == 64_000
    with pytest.raises(ConfigError, match="AVIBE_MODEL_WINDOW"):
        load_settings({**env, "AVIBE_MODEL_WINDOW": "lots"})


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "is not a model name"),
        ("open\x1bai/gpt-4o", "is not a model name"),
        ("scripted", "test model"),
        ("local:", "needs a path"),
        ("nosuch", "unknown model 'nosuch'"),
        ("zz-not-a-provider/model", "unknown model"),
        ("openai/", "unknown model"),
    ],
)
def test_names_no_backend_can_open_are_refused_without_loading_anything(name: str, message: str) -> None:
    with pytest.raises(ModelUnavailable, match=message):
        check_model_name(name)


@pytest.mark.parametrize(
    "name",
    ["embedded", "embedded-1.5b", "local:/no/such.gguf", "openai/gpt-4o", "gpt-4o", "ollama/any-model"],
)
def test_names_some_backend_can_open_pass_the_name_check(name: str) -> None:
    check_model_name(name)  # installed, present or keyed or not: that is the pre-flight check's business


def test_open_model_gives_hosted_models_litellm_retries(tmp_path: Path) -> None:
    """One 429 no longer stops a run: LiteLLM retries (its SDKs back off), HostedModel's default is 0."""
    settings = load_settings({"AVIBE_HOME": str(tmp_path)})
    model = open_model("openai/gpt-4o", settings)
    assert isinstance(model, HostedModel)
    assert model._options["num_retries"] == DEFAULT_NUM_RETRIES > 0
