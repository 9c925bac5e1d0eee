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
    min_source: str
    report: RelevancyReport | None = None
    timeout: float | None = None  # seconds the whole check may take, for the message
    unset: str | None = None  # why no judge or embeddings were set up

    def to_dict(self) -> dict[str, Any]:
        """Plain values (a pytest-xdist worker sends its checks to the main process)."""
        found = {f.name: getattr(self, f.name) for f in fields(self)}
        found.update(
            {
                k: found[k] if isinstance(found[k], str) else repr(found[k])
                for k in ("user_input", "response")
            }
        )
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
        if self.report is None or not math.isfinite(self.report.score):
            return "not measured"
        return "passed" if self.report.score >= self.min_score else "below"

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
        return (
            f"({self.cause or 'judge or embeddings failed; NaN is never a pass'}): {self.error()}"
        )

    def message(self) -> str:
        """The failure text: headline, probe table and reason (or cause and inputs), threshold."""
        # relevancy.score() sets no threshold, and no source
        threshold = [f"threshold: {fmt(self.min_score)} ({self.min_source})"] * bool(
            self.min_source
        )
        if self.verdict == "not measured":
            head = f"{self.location}: answer relevancy NOT MEASURED {self.why_not_measured()}"
            asked = f"question: {clip(str(self.user_input), 160)}"
            answered = f"response: {clip(str(self.response), 160)}"
            return "\n".join((head, asked, answered, *threshold))
        score, least = fmt(self.score), fmt(self.min_score)
        head = f"{self.location}: answer relevancy {score} is below {least}"
        assert self.report is not None  # a scored check has its report
        return "\n".join((head, format_report(self.report), *threshold))

    def exception(self) -> Exception:
        """What a check raises when it does not pass; not measured, it is logged once."""
        if self.verdict == "below":
            return RelevancyFailure(self.message())
        LOG.warning(
            "%s: answer relevancy NOT MEASURED %s",
            self.location,
            clip(self.why_not_measured(), 400),
        )
        return RelevancyNotMeasured(self.message())

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


CHECK_SPAN = "ragas_relevancy.check"


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
            tracing.end_span(begun[0], _outcome(check), _failure(check))


def _outcome(check: Check) -> dict[str, Any]:
    found: dict[str, Any] = {"ragas_relevancy.check.verdict": check.verdict}
    if math.isfinite(check.score):
        found["ragas_relevancy.score"] = check.score
    if check.cause is not None:
        found["ragas_relevancy.cause"] = check.cause
    return found


def _failure(check: Check) -> str | None:
    return None if check.verdict == "passed" else check.verdict.replace(" ", "_")


def summary_title(checks: list[Check]) -> str:
    """``answer relevancy: 40 checks, 2 below threshold, 1 not measured``."""
    below = sum(c.verdict == "below" for c in checks)
    missing = sum(c.verdict == "not measured" for c in checks)
    return (
        f"answer relevancy: {len(checks)} check(s), {below} below threshold, {missing} not measured"
    )


def summary_lines(checks: list[Check], width: int = 60) -> list[str]:
    """One line per check, worst first: score, threshold, verdict, test, question or error."""
    lines = []
    for check in sorted(checks, key=lambda c: (c.verdict != "not measured", c.score)):
        mark = {"passed": "ok", "below": "BELOW", "not measured": "NOT MEASURED"}[check.verdict]
        missing = check.verdict == "not measured"
        what = check.why_not_measured() if missing else str(check.user_input)
        lines.append(
            f"{fmt(check.score):>7}  min {fmt(check.min_score)}  {mark:<12}  {check.nodeid}  "
            f"{clip(what, width)}"
        )
    return lines
