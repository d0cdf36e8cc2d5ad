"""What every start says of the settings in force that loosen something: one plain line each, with where
the value came from; the CLI prints them after the warnings (`Settings.notices`)."""

from __future__ import annotations

from avibe.config.settings import Settings
from avibe.config.trust import Sources
from avibe.config.values import is_loopback


def announcements(sources: Sources, settings: Settings) -> tuple[str, ...]:
    """Every loosened setting in force, in plain words, with where it came from."""
    lines = []
    if sources.trusted and sources.project.values:
        lines.append(
            f"using the project config {sources.project.path} in full (the project is trusted in "
            f"{sources.user.path})"
        )
    if settings.sandbox == "full-access":
        lines.append(
            f"commands run without a sandbox (sandbox = full-access, from {sources.origins['sandbox']})"
        )
    for key, what in (("network", "reach the network"), ("host_sockets", "reach the host's sockets")):
        if getattr(settings, key) and settings.sandbox != "full-access":
            lines.append(f"sandboxed commands {what} ({key} = on, from {sources.origins[key]})")
    if settings.approval == "ask" and settings.allow_commands:
        lines.append(
            "shell commands matching allow_commands run without asking "
            f"(from {sources.origins['allow_commands']})"
        )
    if settings.approval == "ask" and settings.allow_writes:
        lines.append(
            f"writes matching allow_writes are made without asking (from {sources.origins['allow_writes']})"
        )
    if not is_loopback(settings.serve_url):
        lines.append(
            f"vibe serve listens beyond this machine (serve_url = {settings.serve_url}, from "
            f"{sources.origins['serve_url']})"
        )
    return tuple(lines)
