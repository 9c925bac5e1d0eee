"""Errors the package raises on purpose, each naming what went wrong, and why a sample is NaN:
:func:`cause_of` reads a :class:`Cause` from a whole exception chain, by class where the SDK is
loaded and by HTTP status code otherwise (no SDK the user lacks is imported)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections import deque
from collections.abc import Iterator, Mapping
from enum import Enum

__all__ = [
    "PERMANENT",
    "Cause",
    "EmbeddingCallError",
    "EmbeddingShapeError",
    "JudgeHTTPError",
    "JudgeReplyError",
    "PatienceExhausted",
    "UsageError",
    "answer_headers",
    "cause_of",
    "deciding_error",
    "cause_phrase",
    "failure_text",
    "from_embeddings",
    "is_reply_error",
]


class UsageError(ValueError):
    """Bad input or settings the user can fix: the command line prints its message, exits 2."""


class EmbeddingShapeError(ValueError):
    """Embeddings returned vectors that cannot be compared (wrong count, size, NaN, zero)."""


class EmbeddingCallError(RuntimeError):
    """The inner embeddings failed on one text; ``index`` says which, ``__cause__`` why."""

    def __init__(self, message: str, index: int):
        super().__init__(message)
        self.index = index


class JudgeReplyError(ValueError):
    """A judge reply could not be read as the prompt's output model."""


class JudgeHTTPError(RuntimeError):
    """The judge's HTTP exchange failed below the reply (a body that is not JSON at all)."""


class PatienceExhausted(RuntimeError):
    """No request to an endpoint succeeded for the run's patience: the provider kept answering
    429; raised from the last 429, so :func:`cause_of` says ``rate_limited``."""


class Cause(str, Enum):
    """Why a sample is NaN (not measured); the value is what reports and summaries show."""

    AUTH = "auth"
    RATE_LIMITED = "rate_limited"
    QUOTA = "quota"
    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"
    SERVER_ERROR = "server_error"
    UNKNOWN_MODEL = "unknown_model"
    BAD_REPLY = "bad_reply"
    NO_USABLE_PROBE = "no_usable_probe"
    EMBEDDINGS_ERROR = "embeddings_error"
    BAD_INPUT = "bad_input"
    CANCELLED = "cancelled"
    OTHER = "other"

    def __str__(self) -> str:
        return self.value


# Causes that no retry can mend: a run that meets them row after row stops early.
PERMANENT = frozenset({Cause.AUTH, Cause.QUOTA, Cause.UNKNOWN_MODEL, Cause.UNREACHABLE})

_PHRASES = {
    Cause.AUTH: "{who} refused the API key",
    Cause.RATE_LIMITED: "{who} answered rate limited (429)",
    Cause.QUOTA: "{who}'s account is out of quota or credit (429)",
    Cause.TIMEOUT: "{who} did not answer in time",
    Cause.UNREACHABLE: "{who} could not be reached",
    Cause.SERVER_ERROR: "{who} failed on its side (5xx)",
    Cause.UNKNOWN_MODEL: "{who} does not know the model",
    Cause.BAD_REPLY: "{who}'s reply could not be read",
    Cause.NO_USABLE_PROBE: "the judge wrote no usable probe question",
    Cause.EMBEDDINGS_ERROR: "the embeddings failed",
    Cause.BAD_INPUT: "the row's input cannot be scored",
    Cause.CANCELLED: "the run was cancelled",
    Cause.OTHER: "an unexpected error",
}


def cause_phrase(cause: Cause | str, embeddings: bool = False) -> str:
    """What ``cause`` means in a few words, of the judge or (``embeddings``) the embeddings."""
    cause = Cause(cause)
    return _PHRASES[cause].format(who="the embeddings" if embeddings else "the judge")


def is_reply_error(exc: BaseException) -> bool:
    """True when ``exc`` means "the judge answered, but not in the asked shape" (asked again);
    instructor's retry error only when a completion came back and no transport error did."""
    from pydantic import ValidationError

    if isinstance(exc, (JudgeReplyError, ValidationError)):
        return True
    if _named(exc, "InstructorRetryException"):
        return _completion_of(exc) is not None and _transport(exc) is None
    return _named(exc, "IncompleteOutputException")


def cause_of(exc: BaseException) -> Cause:
    """The :class:`Cause` of a failure: a transport or provider cause anywhere in the chain
    wins; then cancellation, embeddings, reply and input failures."""
    found = _transport(exc)
    if found is not None:
        return found[0]
    chain = list(_chain(exc))
    if any(isinstance(e, (asyncio.CancelledError, KeyboardInterrupt)) for e in chain):
        return Cause.CANCELLED
    if any(isinstance(e, (EmbeddingShapeError, EmbeddingCallError)) for e in chain):
        return Cause.EMBEDDINGS_ERROR
    if any(_is_bad_reply(e) for e in chain):
        return Cause.BAD_REPLY
    if isinstance(exc, (ValueError, TypeError)):  # check_inputs and rows that are no mapping
        return Cause.BAD_INPUT
    return Cause.OTHER


def from_embeddings(exc: BaseException) -> bool:
    """Whether the failure came from the embeddings: an embeddings error in the chain, or an
    SDK error whose request went to an embeddings endpoint."""
    for error in _chain(exc):
        if isinstance(error, (EmbeddingShapeError, EmbeddingCallError)):
            return True
        url = str(getattr(getattr(error, "request", None), "url", "") or "")
        if url.rstrip("/").endswith("/embeddings") or "mbedContent" in url:
            return True
    return False


def deciding_error(exc: BaseException) -> BaseException:
    """The error that decided the cause: the SDK's transport or provider error wherever it is
    in the chain (not a retry wrapper around it), else ``exc``."""
    found = _transport(exc)
    return exc if found is None else found[1]


def failure_text(exc: BaseException) -> str:
    """``Type: message`` of the error that decided the cause (the SDK's, not a wrapper's)."""
    error = deciding_error(exc)
    return f"{type(error).__name__}: {error}"


def answer_headers(exc: BaseException) -> Mapping[str, str]:
    """The headers of the HTTP answer behind ``exc`` (a 429's ``retry-after``), wherever in
    its chain an SDK or retry wrapper left it; empty when there is none."""
    for error in _chain(exc):
        headers = getattr(getattr(error, "response", None), "headers", None)
        if headers is not None:
            return headers
    return {}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every error behind it, each once: causes, contexts, retry wrappers' errors
    and exception groups."""
    seen: set[int] = set()
    todo = deque([exc])
    while todo:
        error = todo.popleft()
        if id(error) not in seen:
            seen.add(id(error))
            yield error
            todo.extend(e for e in _inner(error) if isinstance(e, BaseException))


def _inner(error: BaseException) -> list[object]:
    inner = [getattr(a, "exception", None) for a in getattr(error, "failed_attempts", None) or ()]
    last = getattr(error, "last_attempt", None)  # tenacity's RetryError: a Future
    exception = getattr(last, "exception", None)
    if callable(exception):
        with contextlib.suppress(BaseException):  # a cancelled or unfinished attempt holds none
            inner.append(exception())
    return [*inner, *getattr(error, "exceptions", ()), error.__cause__, _context(error)]


def _context(error: BaseException) -> BaseException | None:
    """The error ``error`` was raised while handling, when that can say why it failed: not
    behind a broken reply or vector, which fail on their own (older openai SDKs ask again inside
    their ``except`` for a 500, so a broken answer to that retry carries the handled 500)."""
    if _named(error, "JSONDecodeError", "ValidationError"):
        return None
    return None if isinstance(error, EmbeddingShapeError) else error.__context__


def _transport(exc: BaseException) -> tuple[Cause, BaseException] | None:
    """The first transport or provider cause in the chain, and the error that shows it."""
    for error in _chain(exc):
        cause = _transport_cause(error)
        if cause is not None:
            return cause, error
    return None


def _named(error: BaseException, *names: str) -> bool:
    return any(cls.__name__ in names for cls in type(error).__mro__)


# SDK errors that carry no HTTP status, by cause, in the order they are tried (APITimeoutError
# is an APIConnectionError); each module is read only when the user's code loaded it.
_SDK_CAUSES = (
    ("openai", "APITimeoutError", Cause.TIMEOUT),
    ("openai", "APIConnectionError", Cause.UNREACHABLE),
    ("httpx", "TimeoutException", Cause.TIMEOUT),
    ("httpx", "NetworkError", Cause.UNREACHABLE),
)


def _transport_cause(error: BaseException) -> Cause | None:
    """One error's transport or provider cause (None when it is not one)."""
    if _is_quota(error):
        return Cause.QUOTA
    for module, name, cause in _SDK_CAUSES:
        sdk = sys.modules.get(module)
        if sdk is not None and isinstance(error, getattr(sdk, name)):
            return cause
    if isinstance(error, (TimeoutError, asyncio.TimeoutError)):
        return Cause.TIMEOUT
    if isinstance(error, ConnectionError) or _named(error, "gaierror"):
        return Cause.UNREACHABLE
    return _status_cause(error)


_STATUS_CAUSES = {
    401: Cause.AUTH,
    403: Cause.AUTH,
    404: Cause.UNKNOWN_MODEL,
    408: Cause.TIMEOUT,
    429: Cause.RATE_LIMITED,
}


def _status_cause(error: BaseException) -> Cause | None:
    """The cause of the HTTP status an SDK error carries (openai ``status_code``, google-genai
    ``code``, an httpx ``response``), or None."""
    for value in (
        getattr(error, "status_code", None),
        getattr(error, "code", None),
        getattr(getattr(error, "response", None), "status_code", None),
    ):
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return Cause.SERVER_ERROR if value >= 500 else _STATUS_CAUSES.get(value)
    return None


# What a 429 says when no wait mends it: OpenAI's account out of credit, a Gemini quota per day
# (or one of 0: a tier without it), not its per-minute limits.
_QUOTA_MARKS = ("insufficient_quota", "PerDay", "limit: 0")


def _is_quota(error: BaseException) -> bool:
    """Whether ``error`` is a 429 whose body says the account's quota is spent."""
    if _status_cause(error) is not Cause.RATE_LIMITED:
        return False
    said = [getattr(error, name, None) for name in ("code", "type", "body", "details", "message")]
    text = " ".join(str(part) for part in said if part is not None)
    return any(mark in text for mark in _QUOTA_MARKS)


def _completion_of(error: BaseException) -> object | None:
    """The completion instructor's retry error got back (None: no answer came)."""
    completion = getattr(error, "last_completion", None)
    if completion is not None:
        return completion
    for attempt in getattr(error, "failed_attempts", None) or ():
        if getattr(attempt, "completion", None) is not None:
            return attempt.completion
    return None


def _is_bad_reply(error: BaseException) -> bool:
    from pydantic import ValidationError

    if isinstance(error, (JudgeReplyError, JudgeHTTPError, ValidationError)):
        return True
    if _named(error, "JSONDecodeError", "InstructorRetryException", "IncompleteOutputException"):
        return True
    return _named(error, "OutputParserException", "RagasOutputParserException")
