"""A provider's per-minute rate limits for the loopback server: token buckets for requests and
tokens, OpenAI's ``x-ratelimit-*`` headers, and the 429 bodies OpenAI and Gemini send.

Each bucket holds up to its limit (``per_second``: a second's worth) and refills at limit / 60
per second from a clock it is handed, so a test moves time by hand. A request is admitted when
every bucket holds what it asks for and takes it; a refused one takes nothing.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Admission", "EndpointBuckets", "TokenBucket", "duration"]

LimitName = Literal["requests", "tokens"]
WINDOW = 60.0  # seconds: every limit here is per minute
_EPSILON = 1e-9  # float slack, so waiting exactly the advertised time is always enough
_ORGANIZATION = "org-loopback"
_RATE_LIMITS_PAGE = "https://platform.openai.com/account/rate-limits"
_GEMINI_PAGE = "https://ai.google.dev/gemini-api/docs/rate-limits"
_OPENAI_UNITS = {"requests": "requests per min (RPM)", "tokens": "tokens per min (TPM)"}
_GEMINI_QUOTAS = {  # (metric, quota id), as the Gemini API names its embedding quotas
    "requests": ("embed_content_requests", "EmbedContentRequestsPerMinutePerProjectPerModel"),
    "tokens": ("embed_content_input_token_count", "EmbedContentInputTokensPerModelPerMinute"),
}


def _ceil(value: float) -> int:
    """``value`` rounded up, after float noise (9.816 * 1000 is 9816.000000000002) is dropped."""
    return math.ceil(round(value, 6))


def duration(seconds: float) -> str:
    """OpenAI's (Go's) duration text, to the millisecond rounded up: ``120ms``, ``1.5s``,
    ``6m0s``, ``1h0m0s``; ``0s`` for nothing."""
    ms = max(0, _ceil(seconds * 1000))
    if ms < 1000:
        return f"{ms}ms" if ms else "0s"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    text = f"{rest // 1000}.{rest % 1000:03d}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    return f"{minutes}m{text}" if minutes else text


class TokenBucket:
    """Up to ``limit`` units (``per_second``: a second's worth, at least 1), refilled
    continuously at ``limit / 60`` per second."""

    def __init__(self, limit: int, now: float, per_second: bool = False):
        if limit < 1:
            raise ValueError(f"a per-minute limit must be at least 1, got {limit!r}")
        self.limit = limit
        self.capacity = max(1.0, limit / WINDOW) if per_second else float(limit)
        self._level = self.capacity
        self._last = now

    def level(self, now: float) -> float:
        """Units held at ``now`` (refilled since the last look)."""
        if now > self._last:
            refill = (now - self._last) * self.limit / WINDOW
            self._level = min(self.capacity, self._level + refill)
            self._last = now
        return self._level

    def wait(self, amount: int, now: float) -> float:
        """Seconds until ``amount`` units are held (more than the bucket holds: until it is
        full): 0 if they are now, inf if never (more than a minute's worth)."""
        if amount > self.limit:
            return math.inf
        return max(0.0, (min(amount, self.capacity) - self.level(now)) * WINDOW / self.limit)

    def take(self, amount: int, now: float) -> None:
        self._level = self.level(now) - amount

    def remaining(self, now: float) -> int:
        """Whole units held (the ``x-ratelimit-remaining-*`` value)."""
        return max(0, math.floor(self.level(now) + _EPSILON))

    def until_full(self, now: float) -> float:
        """Seconds until the bucket is full again (the ``x-ratelimit-reset-*`` value)."""
        return (self.capacity - self.level(now)) * WINDOW / self.limit


@dataclass(frozen=True)
class Admission:
    """What the limits said to one request: its ``x-ratelimit-*`` ``headers`` (``retry-after``
    when refused but admissible later), the limit ``exceeded`` (its ``limit``, what the last
    minute ``used``, what was ``requested``), the ``wait`` until admitted (inf: never) and the
    ``tokens`` it was counted as."""

    admitted: bool
    headers: dict[str, str] = field(default_factory=dict)
    exceeded: LimitName | None = None
    limit: int = 0
    used: int = 0
    requested: int = 0
    wait: float = 0.0
    tokens: int = 0

    def openai_error(self, model: str) -> dict[str, Any]:
        """The 429 body OpenAI sends for this refusal (``type`` names the limit)."""
        unit = _OPENAI_UNITS[self.exceeded or "requests"]
        where = f"for {model or 'the model'} in organization {_ORGANIZATION} on {unit}"
        if math.isinf(self.wait):
            message = (
                f"Request too large {where}: Limit {self.limit}, Requested {self.requested}. "
                "The input or output tokens must be reduced in order to run successfully."
            )
        else:
            message = (
                f"Rate limit reached {where}: Limit {self.limit}, Used {self.used}, Requested "
                f"{self.requested}. Please try again in {duration(self.wait)}."
            )
        return {
            "error": {
                "message": f"{message} Visit {_RATE_LIMITS_PAGE} to learn more.",
                "type": self.exceeded,
                "param": None,
                "code": "rate_limit_exceeded",
            }
        }

    def gemini_error(self, model: str) -> dict[str, Any]:
        """The 429 ``RESOURCE_EXHAUSTED`` body the Gemini API sends, with its QuotaFailure and
        RetryInfo details (``retryDelay`` in whole seconds, rounded up)."""
        metric, quota_id = _GEMINI_QUOTAS[self.exceeded or "requests"]
        metric = f"generativelanguage.googleapis.com/{metric}"
        seconds = f"{_ceil(self.wait * 1000) / 1000:g}s"  # Google writes seconds: 0.6s, 38.8s
        retry = "" if math.isinf(self.wait) else f"\nPlease retry in {seconds}."
        details: list[dict[str, Any]] = [
            {
                "@type": "type.googleapis.com/google.rpc.Help",
                "links": [
                    {"description": "Learn more about Gemini API quotas", "url": _GEMINI_PAGE}
                ],
            },
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [
                    {
                        "quotaMetric": metric,
                        "quotaId": quota_id,
                        "quotaDimensions": {"location": "global", "model": model},
                        "quotaValue": str(self.limit),
                    }
                ],
            },
        ]
        if not math.isinf(self.wait):
            delay = f"{_ceil(self.wait)}s"
            details.append(
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}
            )
        message = (
            "You exceeded your current quota, please check your plan and billing details. For "
            f"more information on this error, head to: {_GEMINI_PAGE}.\n* Quota exceeded for "
            f"metric: {metric}, limit: {self.limit}, model: {model}{retry}"
        )
        return {
            "error": {
                "code": 429,
                "message": message,
                "status": "RESOURCE_EXHAUSTED",
                "details": details,
            }
        }


class EndpointBuckets:
    """The requests-per-minute and tokens-per-minute buckets of one endpoint (either may be
    None: not limited), each holding a minute's worth or (``per_second``) a second's."""

    def __init__(self, rpm: int | None, tpm: int | None, now: float, per_second: bool = False):
        self.rpm, self.tpm, self.per_second = rpm, tpm, per_second
        self._buckets: dict[LimitName, TokenBucket] = {}
        if rpm is not None:
            self._buckets["requests"] = TokenBucket(rpm, now, per_second)
        if tpm is not None:
            self._buckets["tokens"] = TokenBucket(tpm, now, per_second)
        self._lock = threading.Lock()

    def admit(self, tokens: int, now: float) -> Admission:
        """Let a request of ``tokens`` counted tokens through, taking 1 request and its tokens,
        or refuse it, taking nothing."""
        asks: dict[LimitName, int] = {"requests": 1, "tokens": tokens}
        with self._lock:
            waits = {name: bucket.wait(asks[name], now) for name, bucket in self._buckets.items()}
            refused = {name: wait for name, wait in waits.items() if wait > _EPSILON}
            if not refused:
                for name, bucket in self._buckets.items():
                    bucket.take(asks[name], now)
                return Admission(admitted=True, headers=self._headers(now), tokens=tokens)
            name = max(refused, key=lambda n: (refused[n], n == "requests"))
            bucket, wait = self._buckets[name], max(refused.values())
            headers = self._headers(now)
            if not math.isinf(wait):
                headers["retry-after"] = str(_ceil(wait))
                headers["retry-after-ms"] = str(_ceil(wait * 1000))
            return Admission(
                admitted=False,
                headers=headers,
                exceeded=name,
                limit=bucket.limit,
                used=int(bucket.capacity) - bucket.remaining(now),
                requested=asks[name],
                wait=wait,
                tokens=tokens,
            )

    def _headers(self, now: float) -> dict[str, str]:
        headers: dict[str, str] = {}
        for name, bucket in self._buckets.items():
            headers[f"x-ratelimit-limit-{name}"] = str(bucket.limit)
            headers[f"x-ratelimit-remaining-{name}"] = str(bucket.remaining(now))
            headers[f"x-ratelimit-reset-{name}"] = duration(bucket.until_full(now))
        return headers
