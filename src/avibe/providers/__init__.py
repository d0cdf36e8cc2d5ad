"""ModelClient adapters: the embedded local model, any hosted model (LiteLLM), the strict scripted model.

Model names: `embedded` (Qwen2.5-Coder-0.5B-Instruct in process), `embedded-1.5b` (the default,
Qwen2.5-Coder-1.5B-Instruct), `local:/path/model.gguf` (any GGUF), anything else = a hosted
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

__all__ = ["check_model_name", "is_local", "model_facts", "needs_window", "open_counter", "open_model"]

# LiteLLM providers for servers you run yourself: the model map cannot know their windows or may not list
# their models at all, so they need AVIBE_MODEL_WINDOW.
SELF_HOSTED_PROVIDERS = frozenset({"ollama", "ollama_chat", "hosted_vllm", "vllm", "lm_studio", "llamafile"})
MAX_MODEL_NAME = 300


def is_local(name: str) -> bool:
    from avibe.providers.modelfile import EMBEDDED_MODELS

    return name in EMBEDDED_MODELS or name.startswith("local:")


def _providers() -> frozenset[str]:
    from avibe.providers.facts import model_map

    table = model_map()
    found = {str(entry.get("litellm_provider")) for entry in table.values() if entry.get("litellm_provider")}
    found |= {key.split("/", 1)[0] for key in table if "/" in key}
    return frozenset(found | SELF_HOSTED_PROVIDERS)


def needs_window(name: str) -> bool:
    """A self-hosted server's model (`ollama/...`): its window is what the server runs with."""
    return name.split("/", 1)[0] in SELF_HOSTED_PROVIDERS


def check_model_name(name: str) -> None:
    """Refuse, without loading anything, a name no backend can open: ModelUnavailable saying what to use.
    Whether the model is installed, its file exists or its key is set is `preflight`'s business."""
    from avibe.providers.facts import lookup
    from avibe.providers.modelfile import EMBEDDED_MODELS

    choices = (
        "'embedded', 'embedded-1.5b', 'local:/path/model.gguf' or a LiteLLM provider/model (`vibe models`)"
    )
    if not name.strip() or len(name) > MAX_MODEL_NAME or not name.isprintable():
        raise ModelUnavailable(f"{name[:60]!r} is not a model name; use {choices}")
    _refuse_scripted(name)
    if name in EMBEDDED_MODELS:
        return
    if name.startswith("local:"):
        if not name.removeprefix("local:").strip():
            raise ModelUnavailable("'local:' needs a path: local:/path/model.gguf")
        return
    if lookup(name) is not None:
        return
    provider, _, model = name.partition("/")
    if not model.strip() or provider not in _providers():
        raise ModelUnavailable(f"unknown model {name!r}; use {choices}")


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
    from avibe.providers.hosted import DEFAULT_NUM_RETRIES, HostedModel

    return HostedModel(model_facts(name, settings.model_window), num_retries=DEFAULT_NUM_RETRIES)


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
