"""ModelClient adapters: the embedded local model, any hosted model (LiteLLM), the strict scripted model.

Model names: `embedded` (default; Qwen2.5-Coder-0.5B-Instruct in process), `embedded-1.5b` (optional
tier, Qwen2.5-Coder-1.5B-Instruct), `local:/path/model.gguf` (any GGUF), anything else = a hosted
`provider/model` through LiteLLM. `scripted` is for tests, which build `ScriptedModel` directly.
Importing this package imports neither llama_cpp nor litellm.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from avibe.errors import ModelUnavailable
from avibe.providers.facts import model_facts

if TYPE_CHECKING:
    from avibe.config import Settings
    from avibe.ports import ModelClient, TokenCounter

__all__ = ["is_local", "model_facts", "open_counter", "open_model"]


def is_local(name: str) -> bool:
    from avibe.providers.modelfile import EMBEDDED_MODELS

    return name in EMBEDDED_MODELS or name.startswith("local:")


def _refuse_scripted(name: str) -> None:
    if name == "scripted":
        raise ModelUnavailable(
            "'scripted' is a test model; construct avibe.providers.scripted.ScriptedModel directly"
        )


def open_model(name: str, settings: Settings) -> ModelClient:
    """The ModelClient for a model name (see the module docstring); ModelUnavailable with a hint if not."""
    _refuse_scripted(name)
    if is_local(name):
        from avibe.providers.embedded import open_embedded

        return open_embedded(name, settings.model_cache)
    from avibe.providers.hosted import HostedModel

    return HostedModel(model_facts(name, settings.model_window))


def open_counter(name: str, settings: Settings, model: ModelClient | None = None) -> TokenCounter:
    """The TokenCounter for a model: exact for local ones (shares `model`'s vocabulary when given),
    a calibrated tiktoken estimate for hosted ones - given the HostedModel, every reply's reported prompt
    tokens calibrate it automatically."""
    _refuse_scripted(name)
    if is_local(name):
        from avibe.providers.embedded import EmbeddedModel, open_embedded_counter

        if isinstance(model, EmbeddedModel):
            return model.counter
        return open_embedded_counter(name, settings.model_cache)
    model_facts(name, settings.model_window)  # unknown names fail here, as they do in open_model
    from avibe.providers.counting import hosted_counter
    from avibe.providers.hosted import HostedModel

    counter = hosted_counter(name)
    if isinstance(model, HostedModel):  # every reply's reported usage calibrates the estimate
        model.on_prompt_usage(counter.observe)
    return counter
