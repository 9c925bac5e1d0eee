"""Masking secrets: no API key may reach a report, a label, a log line or an error.

Masked: the value of every known key variable, the user name and password of a URL
(``https://user:pass@host``), and the value of secret-looking query parameters
(``?api-key=...``, ``?key=...``, ``?token=...``, as Azure-style gateways take them).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

__all__ = ["ALL_KEY_VARIABLES", "KEY_VARIABLES", "MASK", "redact"]

MASK = "***"

# The variables each provider's key is read from, first found wins.
KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
ALL_KEY_VARIABLES = tuple(name for names in KEY_VARIABLES.values() for name in names)

# scheme://user:password@host -> scheme://***@host
_USERINFO = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)(?P<info>[^/\s@?#]+)@", re.IGNORECASE)
# ?api-key=VALUE or &token=VALUE (any parameter whose name speaks of a secret)
_SECRET_PARAM = re.compile(
    r"(?P<name>[?&;](?:[\w.-]*(?:key|token|secret|password|passwd|pwd|sig|signature|auth|"
    r"credential|session)[\w.-]*))=(?P<value>[^&#\s'\"]+)",
    re.IGNORECASE,
)


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with API-key values, URL credentials and secret query values masked."""
    environ = os.environ if environ is None else environ
    for variable in ALL_KEY_VARIABLES:
        value = environ.get(variable, "").strip()
        if len(value) >= 4:
            text = text.replace(value, MASK)
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    return _SECRET_PARAM.sub(lambda m: f"{m['name']}={MASK}", text)
