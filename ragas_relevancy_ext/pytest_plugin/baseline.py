"""The session's checks as a JSONL report (``--relevancy-report``, the format of ``score --out``)
and against a baseline report (``--relevancy-baseline``), paired by question."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..error_bars import PairedDifference
    from .checks import Check


@dataclass(frozen=True)
class Gate:
    """The checks against the baseline: the paired difference and whether the session fails."""

    baseline: Path
    margin: float
    result: PairedDifference | None
    only_here: int
    only_there: int
    failed: bool
    problem: str | None = None

    def lines(self) -> list[str]:
        """The terminal summary's lines for the gate."""
        from ..scoring.report import fmt

        head = f"baseline {self.baseline}: "
        if self.result is None:
            return [head + (self.problem or "no comparison")]
        r = self.result
        by = f" by more than {self.margin:g}" if self.margin else ""
        verdict = (
            f"FAILED: significantly worse than the baseline{by}"
            if self.failed
            else f"no significant drop{by}"
        )
        return [
            head + f"{r.n_pairs} paired check(s) (only here {self.only_here}, only in the "
            f"baseline {self.only_there}, NaN in either {r.not_scored})",
            f"mean {fmt(r.mean_b)} vs baseline {fmt(r.mean_a)}: change {fmt(r.diff)} "
            f"({r.level:.0%} CI {fmt(r.ci_low)} to {fmt(r.ci_high)}, p = {fmt(r.p_value, 4)}): "
            + verdict,
        ]


def compare_with_baseline(checks: Sequence[Check], baseline: Path, margin: float) -> Gate:
    """Pair the scored checks with the baseline's rows by question and test for a drop."""
    from ..cli.errors import UsageError
    from ..cli.saved import SavedRun
    from ..error_bars import pair_by_question, paired_difference, question_key

    try:
        run = SavedRun.read(baseline)
    except UsageError as exc:  # a baseline that cannot be read fails the session: never ignored
        return Gate(baseline, margin, None, 0, 0, True, f"cannot be read: {exc}")
    scored = [c for c in checks if c.report is not None]
    pairing = pair_by_question(
        [question_key(r.user_input) for r in run.reports],
        [question_key(c.user_input) for c in scored],
    )
    only = (len(pairing.only_b), len(pairing.only_a))
    if not pairing.pairs:
        return Gate(baseline, margin, None, *only, False, "no check asks a question of it")
    result = paired_difference(
        [run.reports[i].score for i, _ in pairing.pairs],
        [scored[j].score for _, j in pairing.pairs],
    )
    if result.n_pairs < 2:
        problem = f"{result.n_pairs} check(s) scored in both: at least 2 are needed"
        return Gate(baseline, margin, None, *only, False, problem)
    return Gate(baseline, margin, result, *only, result.worse_by_more_than(margin))


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


def write_report(path: Path, checks: Sequence[Check], used: list[tuple[str, str]]) -> int:
    """Write the scored checks as report lines, whole (a temporary file, then a rename)."""
    from ..cli.output.files import write_atomically
    from ..cli.output.jsonl import report_line
    from ..scoring.report import row_key

    labels = dict(used)
    scored = [c for c in checks if c.report is not None]
    lines = [
        report_line(
            number,
            row_key(check.user_input, check.response),
            check.report,  # type: ignore[arg-type]  (scored)
            labels.get("relevancy_judge", ""),
            labels.get("relevancy_embeddings", ""),
            {"nodeid": check.nodeid, "min_score": check.min_score},
        )
        for number, check in enumerate(scored, 1)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, "".join(lines).encode("utf-8"))
    return len(lines)
