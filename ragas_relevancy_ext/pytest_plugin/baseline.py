"""The session's checks as a JSONL report (``--relevancy-report``, the format of ``score --out``)
and against a baseline report (``--relevancy-baseline``), as ``ragas-relevancy diff`` compares
two runs: the baseline is A, the session B."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..cli.diff import Comparison
    from ..cli.saved import SavedRun
    from .checks import Check

SHARED = 0.5  # under this share of the session's checks asking a baseline question, it fails


@dataclass(frozen=True)
class Gate:
    """The checks against the baseline: the comparison and whether the session fails."""

    baseline: Path
    margin: float
    comparison: Comparison | None
    failed: bool
    problem: str | None = None

    def lines(self) -> list[str]:
        """The terminal summary's lines for the gate."""
        from ..cli.diff import lines

        head = f"baseline {self.baseline} (A) against this session (B): "
        if self.comparison is None:
            return [head + (self.problem or "no comparison")]
        first, *rest = lines(self.comparison, self.margin)
        return [head + first, *rest]


def read_baseline(path: Path, settings: Mapping[str, Any], refuse: bool) -> SavedRun:
    """The baseline, read whole before any test runs: a damaged one is a usage error naming the
    file and the row; with ``refuse``, so is one scored with other settings than ``settings``."""
    from ..cli.errors import UsageError
    from ..cli.saved import SavedRun

    try:
        run = SavedRun.read(path)
    except UsageError as exc:
        raise pytest.UsageError(f"--relevancy-baseline {exc}") from None
    mine = session_settings(settings)
    differ = [f"{k} {v} vs {mine[k]}" for k, v in run.settings.items() if mine.get(k, v) != v]
    if refuse and differ:
        raise pytest.UsageError(
            f"--relevancy-baseline {path} was scored with other settings ({'; '.join(differ)}); "
            "--relevancy-baseline-settings refuse stops the session"
        )
    return run


def session_settings(settings: Mapping[str, Any], reports: Sequence[Any] = ()) -> dict[str, str]:
    """The settings that change a score, for the session's ``settings`` (``Settings`` keyword
    arguments) and its checks' ``reports``, as :func:`..cli.saved.settings_of` reads them from
    report lines; {} when the checks cannot be measured (no judge, a bad spec)."""
    from ..cli.saved import settings_of

    scored = _scored_with(settings)
    if scored is None:
        return {}
    rows = [(r.strictness, r.probe_prompt) for r in reports]
    rows = rows or [(scored["strictness"], scored["probe_prompt"])]
    return settings_of([{"settings": scored, "strictness": k, "probe_prompt": p} for k, p in rows])


def _scored_with(settings: Mapping[str, Any]) -> dict[str, Any] | None:
    from ..cli.setup import Settings, check_settings

    try:
        return check_settings(Settings(**settings)).scored_with if "judge" in settings else None
    except Exception:  # a bad spec or a missing key: every check is then not measured
        return None


def compare_with_baseline(
    checks: Sequence[Check], baseline: Path, margin: float, settings: Mapping[str, Any]
) -> Gate:
    """Pair the scored checks with the baseline's rows by question and compare them as ``diff``
    does; fewer than half of the checks asking a baseline question fails the session."""
    from ..cli.diff import compare_runs
    from ..cli.errors import UsageError
    from ..cli.saved import SavedRun

    reports = [c.report for c in checks if c.report is not None]
    session = SavedRun(
        Path("this session"),
        list(range(1, len(reports) + 1)),
        reports,
        [{}] * len(reports),
        {},
        session_settings(settings, reports),
    )
    try:
        comparison = compare_runs(read_baseline(baseline, settings, False), session)
    except UsageError as exc:
        return Gate(baseline, margin, None, True, f"{exc}: the gate cannot judge this session")
    if len(comparison.pairs) < SHARED * len(reports):
        problem = (
            f"only {len(comparison.pairs)} of the session's {len(reports)} checks ask a question "
            f"of it (under {SHARED:.0%}): the gate cannot judge this session; write a new "
            "baseline with --relevancy-report"
        )
        return Gate(baseline, margin, None, True, problem)
    return Gate(baseline, margin, comparison, comparison.regressed(margin))


def check_report_target(path: Path) -> None:
    """Refuse, before any test runs, a ``--relevancy-report`` file this tool did not write."""
    from ..cli.output.jsonl import ReportFile, ReportFileError

    try:
        ReportFile(path)  # reads and checks every line; writes nothing
    except (OSError, ReportFileError):
        raise pytest.UsageError(
            f"--relevancy-report {path} exists and is not a report of ragas-relevancy; it was "
            "left as it is: give a new file"
        ) from None


def write_report(
    path: Path, checks: Sequence[Check], used: list[tuple[str, str]], settings: Mapping[str, Any]
) -> int:
    """Write the scored checks as report lines, whole (a temporary file, then a rename)."""
    from ..cli.output.files import write_atomically
    from ..cli.output.jsonl import report_line
    from ..scoring.report import row_key

    labels, scored_with = dict(used), _scored_with(settings)
    scored = [(c, c.report) for c in checks if c.report is not None]
    lines = [
        report_line(
            number,
            row_key(check.user_input, check.response),
            report,
            labels.get("relevancy_judge", ""),
            labels.get("relevancy_embeddings", ""),
            {"nodeid": check.nodeid, "min_score": check.min_score},
            settings=scored_with,
        )
        for number, (check, report) in enumerate(scored, 1)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, "".join(lines).encode("utf-8"))
    return len(lines)
