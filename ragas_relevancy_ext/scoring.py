"""The arithmetic of answer relevancy: pure functions, no I/O, shared by every metric flavour."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = [
    "all_noncommittal",
    "cosine_similarities",
    "mean_pairwise_cosine",
    "non_finite",
    "relevancy_score",
    "unit_rows",
]


def cosine_similarities(question_vector: np.ndarray, probe_vectors: np.ndarray) -> np.ndarray:
    """Cosine of each probe vector with the question vector.

    Each vector is scaled to unit length first (by its largest value, then its norm), so
    values near the float limits (1e308, 1e-320) neither overflow nor underflow; equal to
    stock's dot / (norm * norm) wherever that is finite. Check the result with
    :func:`non_finite`.
    """
    question = unit_rows(np.asarray(question_vector, dtype=float).reshape(1, -1))
    probes = unit_rows(np.asarray(probe_vectors, dtype=float).reshape(len(probe_vectors), -1))
    return np.clip((probes @ question.T).reshape(-1), -1.0, 1.0)


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Each row scaled to length 1 without overflow (an all-zero or non-finite row gives NaN)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scale = np.max(np.abs(matrix), axis=1, keepdims=True)
        scaled = matrix / scale
        return scaled / np.linalg.norm(scaled, axis=1, keepdims=True)


def non_finite(values: Sequence[float], what: str = "cosine") -> str | None:
    """A sentence naming the values that are NaN or infinite, or None when all are finite."""
    bad = [i for i, v in enumerate(values, 1) if not math.isfinite(float(v))]
    if not bad:
        return None
    listed = ", ".join(f"{what} {i} is {float(values[i - 1])}" for i in bad[:5])
    return f"{len(bad)} of {len(values)} {what}(s) not finite ({listed})"


def relevancy_score(cosines: Sequence[float], noncommittal: Sequence[int]) -> float:
    """Mean cosine, times 0 when every probe is noncommittal; NaN (not measured) with no probe."""
    if len(cosines) != len(noncommittal):
        raise ValueError(f"{len(cosines)} cosines but {len(noncommittal)} noncommittal flags")
    if len(cosines) == 0:
        return float("nan")
    mean = float(np.mean(np.asarray(cosines, dtype=float)))
    return mean * int(not all_noncommittal(noncommittal))


def all_noncommittal(noncommittal: Sequence[int]) -> bool:
    """The stock rule: the answer dodges when every probe is flagged (no probe: not all flagged)."""
    return len(noncommittal) > 0 and bool(np.all(np.asarray(noncommittal)))


def mean_pairwise_cosine(vectors: np.ndarray) -> float | None:
    """Mean cosine over all pairs of probe vectors (1.0 = all alike: `probe_similarity`); None
    under two probes."""
    matrix = np.asarray(vectors, dtype=float)
    if matrix.ndim != 2 or matrix.shape[0] < 2:
        return None
    unit = unit_rows(matrix)
    sims = np.clip(unit @ unit.T, -1.0, 1.0)
    upper = np.triu_indices(matrix.shape[0], k=1)
    value = float(np.mean(sims[upper]))
    return value if math.isfinite(value) else None
