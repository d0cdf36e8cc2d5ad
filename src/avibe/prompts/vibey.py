"""Vibey's identity and rules: the first two parts of its system prompt (F4), rebuilt every turn.

API:
    IDENTITY: str    who Vibey is (one paragraph, no trailing newline)
    RULES: str       the rules, a Markdown list (no trailing newline)
"""

from __future__ import annotations

from typing import Final

from avibe.prompts import render

IDENTITY: Final = render("vibey_identity").strip()
RULES: Final = render("vibey_rules").strip()
