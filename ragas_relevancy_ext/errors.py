"""Errors the package raises on purpose, each naming what went wrong."""

from __future__ import annotations

__all__ = [
    "EmbeddingCallError",
    "EmbeddingShapeError",
    "JudgeHTTPError",
    "JudgeReplyError",
    "is_reply_error",
]


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


def is_reply_error(exc: BaseException) -> bool:
    """True when ``exc`` means "the judge answered, but not in the asked shape".

    These are counted in the report and the probe is asked again; any other
    error (network, auth, timeout) propagates to the caller.
    """
    from pydantic import ValidationError

    if isinstance(exc, (JudgeReplyError, ValidationError)):
        return True
    # instructor gives up after its own retries with this exception; matched by
    # name so instructor is not imported here.
    return any(
        cls.__name__ in {"InstructorRetryException", "IncompleteOutputException"}
        for cls in type(exc).__mro__
    )
