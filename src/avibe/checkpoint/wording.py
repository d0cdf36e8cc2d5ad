"""The checkpoint's problems, notes and fallback reasons as a person reads them. The log and the record
keep the requirement ids ("(V7)", "(V1-V3)", "V8: ") for developers; the chat's meter and the inspector
show words only. A mission's own id (M2) is data, not a requirement id, and stays."""

from __future__ import annotations

import re
from typing import Final

_REQUIREMENT_IDS: Final = re.compile(r"\s*\((?:[A-Z]\d+(?:[-, /]+[A-Z]?\d+)*)\)|\b[A-Z]\d+: ")


def without_requirement_ids(text: str) -> str:
    """`text` without the requirement ids in parentheses or as a leading "V8: " label."""
    return _REQUIREMENT_IDS.sub("", text).strip()
