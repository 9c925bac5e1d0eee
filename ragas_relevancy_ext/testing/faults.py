"""The fault catalogue: which injected faults a client recovers from, how a lasting one is named,
and which row each logged request served, so fault tests and benchmarks judge every row alike."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from .loopback import LoggedRequest
from .offline import prompt_input

__all__ = [
    "NAMED_BY",
    "OPENAI_FAULT_KINDS",
    "RECOVERABLE",
    "TRANSIENT",
    "faults_by_row",
    "outcome_problem",
    "request_row",
    "tag_response",
]


TRANSIENT = frozenset({"rate_limit", "server_error", "hang"})
_CHAT_FAULTS = ("rate_limit", "server_error", "hang", "malformed")
OPENAI_FAULT_KINDS: dict[str, tuple[str, ...]] = {
    "chat": _CHAT_FAULTS,
    "embeddings": (*_CHAT_FAULTS, "wrong_count", "wrong_size", "mixed_size", "nan"),
}
# retried by the SDK, or (a malformed chat reply) asked again by instructor and the metric
RECOVERABLE = frozenset(
    {f"{kind}@{endpoint}" for kind in TRANSIENT for endpoint in OPENAI_FAULT_KINDS}
    | {"malformed@chat"}
)
# what the NaN reason of a sample hit by each lasting embeddings fault says (any one phrase)
NAMED_BY: dict[str, tuple[str, ...]] = {
    "malformed@embeddings": ("JSONDecodeError",),
    "wrong_count@embeddings": ("expected one vector per text",),
    # one halved vector: "different lengths" among the probes, or a question/probes mismatch
    "mixed_size@embeddings": ("different lengths", "for the question but vectors of length"),
    "nan@embeddings": ("NaN or infinite",),
    "wrong_size@embeddings": ("for the question but vectors of length",),
}
_ROW_TAG = re.compile(r"\(ref (\d+)\)")


def tag_response(index: int, response: str) -> str:
    """``response`` opened by a row tag, which every probe written from it carries too."""
    return f"(ref {index}) {response}"


def request_row(request: LoggedRequest, rows: Sequence[dict[str, str]]) -> int | None:
    """The row a logged request was for, or None: a chat request by its prompt's response, an
    embeddings request by a text that is a row's user_input or carries its :func:`tag_response`
    tag."""
    body = request.body if isinstance(request.body, dict) else {}
    if request.endpoint == "chat":
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        try:
            response = prompt_input(users[0]["content"]).get("response")
        except (IndexError, KeyError, ValueError):
            return None
        if not isinstance(response, str):
            return None
        return {row["response"]: i for i, row in enumerate(rows)}.get(response)
    by_question = {row["user_input"]: i for i, row in enumerate(rows)}
    given = body.get("input")
    for text in [given] if isinstance(given, str) else list(given or []):
        tag = _ROW_TAG.search(text)
        index = by_question.get(text, int(tag.group(1)) if tag else None)
        if index is not None:
            return index
    return None


def faults_by_row(
    requests: Sequence[LoggedRequest], rows: Sequence[dict[str, str]]
) -> list[set[str]]:
    """For each row, the ``kind@endpoint`` faults its requests met (retries included)."""
    met: list[set[str]] = [set() for _ in rows]
    for request in requests:
        index = None if request.fault is None else request_row(request, rows)
        if index is not None:
            met[index].add(f"{request.fault}@{request.endpoint}")
    return met


def outcome_problem(faults: set[str], score: float, error: str | None) -> str | None:
    """What is wrong with a row's end given its faults (lasting ones end in NaN with a reason
    naming one, recoverable ones in a score); None when it ended right."""
    lasting = (faults - RECOVERABLE) & NAMED_BY.keys()
    if lasting:
        if not math.isnan(score):
            return f"scored {score:.4f} despite {sorted(lasting)}"
        if not any(phrase in (error or "") for fault in lasting for phrase in NAMED_BY[fault]):
            return f"NaN, but the reason names none of {sorted(lasting)}: {error}"
    elif faults <= RECOVERABLE and math.isnan(score):
        return f"NaN after recoverable faults only {sorted(faults)}: {error}"
    return None
