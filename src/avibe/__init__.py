"""Avibe: an agent harness whose agent, Vibey, keeps long tasks on track (see SPEC.md)."""

__version__ = "0.1.0"
