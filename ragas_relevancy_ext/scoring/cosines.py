"""The arithmetic of answer relevancy: pure functions, no I/O, shared by every metric flavour."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def probe_cosines(
    question_vector: np.ndarray, probe_vectors: np.ndarray
) -> tuple[np.ndarray, float | None]:
    """Each probe's cosine with the question and the probes' mean pairwise cosine, from one
    matrix of the vectors' dot products (stock's dot / (norm * norm)); vectors whose dot
    products would overflow or lose precision to underflow are scaled to unit length first.

    The product is of the matrix with a copy of itself: numpy hands a matrix times its own
    transpose to BLAS's ``syrk``, which OpenBLAS does three times slower than the general
    product at this size. The few dot products are divided as Python floats (the same IEEE
    operations numpy does on them, a fraction of its per-call cost at this size)."""
    question = np.asarray(question_vector, dtype=float).reshape(1, -1)
    probes = np.asarray(probe_vectors, dtype=float).reshape(len(probe_vectors), -1)
    matrix = np.concatenate((question, probes))
    with np.errstate(all="ignore"):  # whatever the caller's numpy settings: NaN is told after
        dots = (matrix @ matrix.copy().T).tolist()
        if not all(
            math.isfinite(row[i]) and row[i] >= _SMALLEST_SQUARES for i, row in enumerate(dots)
        ):
            units = unit_rows(matrix)
            dots = (units @ units.copy().T).tolist()
    norms = [math.sqrt(row[i]) for i, row in enumerate(dots)]
    cosines = [  # stock's order: dot / (norm of the probe * norm of the question)
        _clip(row[0] / (norm * norms[0])) for row, norm in zip(dots[1:], norms[1:], strict=True)
    ]
    pairs = [
        _clip(dots[i][j] / (norms[i] * norms[j]))
        for i in range(1, len(dots))
        for j in range(i + 1, len(dots))
    ]
    mean = sum(pairs) / len(pairs) if pairs else math.nan
    return np.array(cosines), mean if math.isfinite(mean) else None


def _clip(cosine: float) -> float:
    """Into [-1, 1], against rounding past 1 (NaN stays NaN)."""
    return -1.0 if cosine < -1.0 else 1.0 if cosine > 1.0 else cosine


# A vector's squares summing to less lose precision to underflow in its dot products.
_SMALLEST_SQUARES = 1e-250


def cosine_similarities(question_vector: np.ndarray, probe_vectors: np.ndarray) -> np.ndarray:
    """Cosine of each probe vector with the question vector (stock's dot / (norm * norm),
    without overflow or underflow near the float limits)."""
    return probe_cosines(question_vector, probe_vectors)[0]


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Each row scaled to length 1 by its largest value, then its norm, without overflow (an
    all-zero or non-finite row gives NaN)."""
    with np.errstate(invalid="ignore", under="ignore"):  # 0/0, and tiny values' squares
        scaled = matrix / np.max(np.abs(matrix), axis=1, keepdims=True)
        return scaled / np.linalg.norm(scaled, axis=1, keepdims=True)


def non_finite(values: Sequence[float] | np.ndarray, what: str = "cosine") -> str | None:
    """A sentence naming the values that are NaN or infinite, or None when all are finite."""
    bad = [i for i, v in enumerate(values, 1) if not math.isfinite(float(v))]
    if not bad:
        return None
    listed = ", ".join(f"{what} {i} is {float(values[i - 1])}" for i in bad[:5])
    return f"{len(bad)} of {len(values)} {what}(s) not finite ({listed})"


def relevancy_score(cosines: Sequence[float] | np.ndarray, noncommittal: Sequence[int]) -> float:
    """Mean cosine, times 0 when every probe is noncommittal; NaN (not measured) with no probe."""
    if len(cosines) != len(noncommittal):
        raise ValueError(f"{len(cosines)} cosines but {len(noncommittal)} noncommittal flags")
    if len(cosines) == 0:
        return float("nan")
    mean = float(np.asarray(cosines, dtype=float).sum() / len(cosines))
    return mean * int(not all_noncommittal(noncommittal))


def all_noncommittal(noncommittal: Sequence[int]) -> bool:
    """The stock rule: the answer dodges when every probe is flagged (no probe: not all flagged)."""
    return len(noncommittal) > 0 and all(noncommittal)


def score_stderr(cosines: Sequence[float], score: float | None, all_noncommittal: bool) -> float:
    """The standard error of one sample's score: its cosines' sd (ddof=1) over sqrt(n); NaN
    when the score is NaN, under two probes, with a cosine not finite, or when every probe is
    noncommittal (that score is 0 by rule, not a mean of cosines)."""
    values = np.asarray(cosines, dtype=float)
    if score is None or not math.isfinite(score) or values.size < 2 or all_noncommittal:
        return math.nan
    if not np.isfinite(values).all():
        return math.nan
    return float(values.std(ddof=1) / math.sqrt(values.size))
