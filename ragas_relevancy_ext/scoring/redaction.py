"""Masking secrets: no API key may reach a report, a label, a log line or an error (key
variables' values; in every URL, its credentials, every query value and its fragment)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping

MASK = "***"

# The variables each provider's key is read from, first found wins.
KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
ALL_KEY_VARIABLES = tuple(name for names in KEY_VARIABLES.values() for name in names)

# A URL (from its scheme to a space, a double quote or an angle bracket), or a path with its
# query as a server echoes the request it got (/v1/chat?code=...); else a name=VALUE after ?, & or ;
_FIND = re.compile(
    r"(?P<url>(?:\b[a-z][a-z0-9+.-]*://|(?<![\w/])/)[^\s\"<>]+)"
    r"|(?P<name>[?&;][^\s=&;?#'\"<>]*)=[^&#\s\"<>]+",
    re.IGNORECASE,
)
_TAIL = ".,;:!?)]}'"  # punctuation after a URL in a sentence, not part of it


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with API-key values masked, and in every URL its user name and password, every
    query value (whatever its name) and its fragment."""
    environ = os.environ if environ is None else environ
    for variable in ALL_KEY_VARIABLES:
        value = environ.get(variable, "").strip()
        if len(value) >= 4:
            text = text.replace(value, MASK)
    return _FIND.sub(_mask, text)


def _mask(match: re.Match[str]) -> str:
    """One URL masked (``u:p@h/?a=1&b#f`` -> ``***@h/?a=***&***#***``), or ``name=***``."""
    found = match.group()
    core = found.rstrip(_TAIL)
    tail = found[len(core) :]
    if match["url"] is None:
        return f"{match['name']}={MASK}{tail}"
    scheme, sep, rest = ("", "", core) if core[0] == "/" else core.partition("://")
    authority = re.split("[/?#]", rest, maxsplit=1)[0]
    if "@" in authority:  # user name and password: up to the last @ before the host
        rest = f"{MASK}@{rest[authority.rindex('@') + 1 :]}"
    rest, hash_mark, fragment = rest.partition("#")
    head, mark, query = rest.partition("?")
    masked = "&".join(
        f"{part.partition('=')[0]}={MASK}" if "=" in part else MASK if part else part
        for part in query.split("&")
    )
    return f"{scheme}{sep}{head}{mark}{masked}{hash_mark}{MASK if fragment else ''}{tail}"


class RedactingFilter(logging.Filter):
    """Masks secrets in the records of a third party's logger (instructor logs each failed
    attempt with the provider's message, which a server may fill with the key it was sent)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, ()
        return True


# Where instructor's releases create their records. A filter acts on the logger that makes a
# record, not on its parents, so each is named.
_LOGGERS = ("instructor", "instructor.retry", "instructor.v2.retry", "instructor.v2.core.retry")


def mask_third_party_logs() -> None:
    """Install :class:`RedactingFilter` on instructor's loggers, once."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(RedactingFilter())
