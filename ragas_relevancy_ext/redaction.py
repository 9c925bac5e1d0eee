"""Masking API keys: no key from the environment may reach a report, a log line or an error."""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["ALL_KEY_VARIABLES", "KEY_VARIABLES", "redact"]

# The variables each provider's key is read from, first found wins.
KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
ALL_KEY_VARIABLES = tuple(name for names in KEY_VARIABLES.values() for name in names)


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with the value of every API-key variable replaced by ``***``."""
    environ = os.environ if environ is None else environ
    for variable in ALL_KEY_VARIABLES:
        value = environ.get(variable, "").strip()
        if len(value) >= 4:
            text = text.replace(value, "***")
    return text
