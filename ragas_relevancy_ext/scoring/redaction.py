"""Masking secrets: no API key may reach a report, a label, a log line or an error (key
variables' values, URL credentials and query values, secret-looking parameters)."""

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

# scheme://user:password@host -> scheme://***@host
_USERINFO = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)(?P<info>[^/\s@?#]+)@", re.IGNORECASE)
# a URL: scheme://, then up to a space, a quote or an angle bracket
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>]+", re.IGNORECASE)
_URL_TAIL = ".,;:!?)]}"  # punctuation after a URL in a sentence, not part of it
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
    text = _URL.sub(_mask_query, text)
    return _SECRET_PARAM.sub(lambda m: f"{m['name']}={MASK}", text)


def _mask_query(match: re.Match[str]) -> str:
    """The URL with every query value masked (``?a=1&b`` -> ``?a=***&***``), names kept."""
    url = match.group()
    core = url.rstrip(_URL_TAIL)
    tail = url[len(core) :]
    head, mark, rest = core.partition("?")
    if not mark:
        return url
    query, hash_mark, fragment = rest.partition("#")
    masked = "&".join(
        f"{part.partition('=')[0]}={MASK}" if "=" in part else MASK if part else part
        for part in query.split("&")
    )
    return f"{head}?{masked}{hash_mark}{fragment}{tail}"


class RedactingFilter(logging.Filter):
    """Masks secrets in the records of a third party's logger (instructor logs each failed
    attempt with the provider's message, which a server may fill with the key it was sent)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, ()
        return True


# Where instructor creates its records: before 1.4 and from 1.4 on. A filter acts on the logger
# that makes a record, not on its parents, so each is named.
_LOGGERS = ("instructor", "instructor.retry", "instructor.v2.retry", "instructor.v2.core.retry")


def mask_third_party_logs() -> None:
    """Install :class:`RedactingFilter` on instructor's loggers, once."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(RedactingFilter())
