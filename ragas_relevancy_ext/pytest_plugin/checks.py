"""One relevancy check of a test: threshold, report, verdict and text. A NaN score is never a
pass: the check is "not measured", reported apart from a low score."""

from __future__ import annotations

import contextlib
import logging
import math
from dataclasses import dataclass, fields
from typing import Any, Literal

from ..errors import cause_phrase
from ..scoring import tracing
from ..scoring.report import SKIPPED, RelevancyReport, clip, fmt, format_report, plural
from .engine import Engine, NotConfigured

Verdict = Literal["passed", "below", "not measured"]

LOG = logging.getLogger("ragas_relevancy_ext")
CHECK_SPAN = "ragas_relevancy.check"
MARKS = {"passed": "ok", "below": "BELOW", "not measured": "NOT MEASURED"}


class RelevancyFailure(AssertionError):
    """The response scored below the threshold; the message is the probe table."""

    __module__ = "ragas_relevancy_ext.pytest_plugin"


class RelevancyNotMeasured(Exception):
    """The check could not be scored (judge or embeddings failed): not a low score, no pass."""

    __module__ = "ragas_relevancy_ext.pytest_plugin"


@dataclass
class Check:
    """A ``(user_input, response)`` pair checked against ``min_score`` by the test ``nodeid``."""

    nodeid: str
    location: str
    user_input: Any
    response: Any
    min_score: float
    min_source: str  # where the threshold came from; "" for relevancy.score(), which has none
    report: RelevancyReport | None = None
    timeout: float | None = None  # seconds the whole check may take, for the message
    unset: str | None = None  # why no judge or embeddings were set up

    def to_dict(self) -> dict[str, Any]:
        """Plain values (a pytest-xdist worker sends its checks to the main process)."""
        found = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("user_input", "response"):
            found[name] = found[name] if isinstance(found[name], str) else repr(found[name])
        return {**found, "report": None if self.report is None else self.report.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Check:
        report = data["report"]
        return cls(**{**data, "report": report and RelevancyReport.from_dict(report)})

    @property
    def score(self) -> float:
        return math.nan if self.report is None else self.report.score

    @property
    def verdict(self) -> Verdict:
        if not math.isfinite(self.score):
            return "not measured"
        return "passed" if self.score >= self.min_score else "below"

    @property
    def cause(self) -> str | None:
        """Why the check has no score in a word (``auth``, ``not configured``, ...), or None."""
        if self.unset is not None:
            return "not configured"
        if self.report is None or self.report.cause is None or self.verdict != "not measured":
            return None
        return str(self.report.cause)

    def error(self) -> str:
        """Why the check has no score: what its cause means, with the provider's message."""
        report = self.report
        if report is None:
            return self.unset or "not scored"
        if report.cause is None or (report.error or "").startswith(SKIPPED):
            return report.error or "the score is NaN"
        if not report.error:  # the judge answered, with no usable probe
            return f"{cause_phrase(report.cause)} in {plural(report.judge_calls, 'call')}"
        return report.reason.removeprefix(f"Not scored ({report.cause}): ")

    def why_not_measured(self) -> str:
        """``(cause): what kept the check from a score``: the headline's and summary's words."""
        if self.cause == "timeout" and self.timeout is not None:
            return (
                f"(timeout): the judge or embeddings gave no score within {self.timeout:g} s "
                "(--relevancy-timeout: the whole check, retries included)"
            )
        cause = self.cause or "judge or embeddings failed; NaN is never a pass"
        return f"({cause}): {self.error()}"

    def exception(self) -> Exception:
        """What a check that does not pass raises: headline, probe table and reason (or cause
        and inputs), threshold. One not measured is logged once."""
        tail = [f"threshold: {fmt(self.min_score)} ({self.min_source})"] if self.min_source else []
        if self.verdict == "below":
            assert self.report is not None  # a scored check has its report
            head = f"answer relevancy {fmt(self.score)} is below {fmt(self.min_score)}"
            body = [f"{self.location}: {head}", format_report(self.report), *tail]
            return RelevancyFailure("\n".join(body))
        head = f"answer relevancy NOT MEASURED {self.why_not_measured()}"
        LOG.warning("%s: %s", self.location, clip(head, 430))
        asked = f"question: {clip(str(self.user_input), 160)}"
        answered = f"response: {clip(str(self.response), 160)}"
        body = [f"{self.location}: {head}", asked, answered, *tail]
        return RelevancyNotMeasured("\n".join(body))

    def properties(self) -> list[tuple[str, str]]:
        """JUnit XML properties: score, threshold, verdict; cause and error when not measured."""
        found = [
            ("relevancy_score", fmt(self.score).lower()),
            ("relevancy_min_score", fmt(self.min_score)),
            ("relevancy_verdict", self.verdict),
        ]
        if self.verdict == "not measured":
            if self.cause is not None:
                found.append(("relevancy_cause", self.cause))
            found.append(("relevancy_error", self.error()))
        return found


def score_check(engine: Engine, check: Check) -> None:
    """Score ``check`` and give it its report; when traced, the check is a span (under the
    span current where it was made) holding its sample's span."""
    begun = tracing.start_span(
        CHECK_SPAN,
        {
            "ragas_relevancy.check.test": check.nodeid,
            "ragas_relevancy.check.location": check.location,
            "ragas_relevancy.check.min_score": check.min_score,
        },
        tracing.span_context(),
    )
    try:
        with tracing.row_parents([begun[1]]) if begun else contextlib.nullcontext():
            check.report = engine.score(check.user_input, check.response)
    except NotConfigured as exc:
        check.unset = str(exc)
    finally:
        if begun is not None:
            outcome = {
                "ragas_relevancy.check.verdict": check.verdict,
                "ragas_relevancy.score": check.score if math.isfinite(check.score) else None,
                "ragas_relevancy.cause": check.cause,
            }
            failed = None if check.verdict == "passed" else check.verdict.replace(" ", "_")
            found = {k: v for k, v in outcome.items() if v is not None}
            tracing.end_span(begun[0], found, failed)


def summary_title(checks: list[Check]) -> str:
    """``answer relevancy: 40 check(s), 2 below threshold, 1 not measured``."""
    below = sum(c.verdict == "below" for c in checks)
    missing = sum(c.verdict == "not measured" for c in checks)
    return (
        f"answer relevancy: {len(checks)} check(s), {below} below threshold, {missing} not measured"
    )


def summary_lines(checks: list[Check], width: int = 60) -> list[str]:
    """One line per check, worst first: score, threshold, verdict, test, question or error."""
    lines = []
    for check in sorted(checks, key=lambda c: (c.verdict != "not measured", c.score)):
        missing = check.verdict == "not measured"
        what = check.why_not_measured() if missing else str(check.user_input)
        lines.append(
            f"{fmt(check.score):>7}  min {fmt(check.min_score)}  {MARKS[check.verdict]:<12}  "
            f"{check.nodeid}  {clip(what, width)}"
        )
    return lines
