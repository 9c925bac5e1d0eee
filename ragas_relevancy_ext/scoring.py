"""The arithmetic of answer relevancy: pure functions, no I/O, shared by every metric flavour."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["all_noncommittal", "cosine_similarities", "mean_pairwise_cosine", "relevancy_score"]


def cosine_similarities(question_vector: np.ndarray, probe_vectors: np.ndarray) -> np.ndarray:
    """Cosine of each probe vector with the question vector, computed as stock RAGAS does."""
    question = np.asarray(question_vector, dtype=float).reshape(1, -1)
    probes = np.asarray(probe_vectors, dtype=float).reshape(len(probe_vectors), -1)
    norm = np.linalg.norm(probes, axis=1) * np.linalg.norm(question, axis=1)
    return np.dot(probes, question.T).reshape(-1) / norm


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
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    sims = unit @ unit.T
    upper = np.triu_indices(matrix.shape[0], k=1)
    return float(np.mean(sims[upper]))
