"""Per-probe rows from an ``EvaluationResult``: ``ResponseRelevancy`` traces each row's report
as a ``relevancy_report`` step, and ``evaluate`` keeps the traces (``result.traces[i]``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeGuard

from .scoring.report import RelevancyReport
from .scoring.usage import Usage

__all__ = ["REPORT_TRACE", "probe_frame", "report_for", "reports_for", "usage_for"]

if TYPE_CHECKING:
    import pandas as pd

REPORT_TRACE = "relevancy_report"
FRAME_COLUMNS = ["row", "user_input", "response", "question", "noncommittal", "cosine", "score"]


def report_for(result: Any, i: int, metric: str | None = None) -> RelevancyReport:
    """Row ``i``'s report (IndexError past the end, LookupError when the row left none)."""
    rows = _row_traces(result)
    name = _metric_name(rows, metric)
    report = _report(rows[i], name)
    if report is None:
        raise LookupError(f"row {i} has no {name!r} relevancy report: it did not finish")
    return report


def reports_for(result: Any, metric: str | None = None) -> list[RelevancyReport | None]:
    """Every row's report in row order; None for a row that left none."""
    rows = _row_traces(result)
    name = _metric_name(rows, metric)
    return [_report(row, name) for row in rows]


def usage_for(result: Any, metric: str | None = None) -> Usage | None:
    """The run's requests and tokens summed; None when a row left no report or no usage."""
    return Usage.total(r.usage if r is not None else None for r in reports_for(result, metric))


def probe_frame(result: Any, metric: str | None = None) -> pd.DataFrame:
    """One row per probe, indexed by dataset row; rows without probes (failed) add none."""
    try:
        import pandas as pd
    except ImportError as exc:
        raise ImportError(
            "probe_frame needs pandas, which is not installed: pip install pandas"
        ) from exc
    records = [
        (i, r.user_input, r.response, p.question, p.noncommittal, p.cosine, r.score)
        for i, r in enumerate(reports_for(result, metric))
        if r is not None
        for p in r.probes
    ]
    return pd.DataFrame.from_records(records, columns=FRAME_COLUMNS).set_index("row")


def _row_traces(result: Any) -> list[dict[str, Any]]:
    rows = getattr(result, "traces", None)
    if not isinstance(rows, list):
        raise TypeError(
            f"expected the EvaluationResult of ragas.evaluate, got {type(result).__name__}"
        )
    return rows


def _metric_name(rows: list[dict[str, Any]], metric: str | None) -> str:
    names = sorted({name for row in rows for name, steps in row.items() if _holds(steps)})
    if metric is not None:
        if metric not in names:
            raise LookupError(f"no relevancy reports for metric {metric!r}; found {names}")
        return metric
    if not names:
        raise LookupError(
            "this result holds no relevancy reports: score with "
            "ragas_relevancy_ext.ResponseRelevancy (or answer_relevancy) in ragas.evaluate"
        )
    if len(names) > 1:
        raise LookupError(f"several metrics left relevancy reports {names}; pass metric=")
    return names[0]


def _holds(steps: object) -> TypeGuard[dict[str, Any]]:
    return isinstance(steps, dict) and REPORT_TRACE in steps


def _report(row: dict[str, Any], metric: str) -> RelevancyReport | None:
    steps = row.get(metric)
    if not _holds(steps):
        return None
    return RelevancyReport.from_dict(steps[REPORT_TRACE]["output"])
