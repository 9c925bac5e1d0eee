"""The pure scoring core, checked against seed 004's worked numbers."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from ragas_relevancy_ext.scoring.cosines import (
    all_noncommittal,
    cosine_similarities,
    mean_pairwise_cosine,
    probe_cosines,
    relevancy_score,
    unit_rows,
)
from ragas_relevancy_ext.scoring.probe_modes import normalise_question

QUESTION = np.array([1.0, 2.0, 0.0])
GENERATED = np.array([[1.0, 2.0, 0.0], [2.0, 3.0, 1.0], [0.0, 1.0, 3.0]])


def test_toy_vectors_give_seed_cosines_and_mean():
    cosines = cosine_similarities(QUESTION, GENERATED)
    assert [round(c, 4) for c in cosines] == [1.0, 0.9562, 0.2828]
    assert round(relevancy_score(cosines, [0, 0, 0]), 4) == 0.7463


def test_every_probe_noncommittal_gives_zero():
    cosines = cosine_similarities(QUESTION, GENERATED)
    assert relevancy_score(cosines, [1, 1, 1]) == 0.0
    # one committal probe is enough to keep the mean
    assert relevancy_score(cosines, [1, 1, 0]) == pytest.approx(float(np.mean(cosines)))


def test_opposite_direction_is_minus_one_and_not_clipped():
    cosines = cosine_similarities(QUESTION, -QUESTION.reshape(1, -1))
    assert cosines[0] == pytest.approx(-1.0)
    assert relevancy_score(cosines, [0]) == pytest.approx(-1.0)


def test_no_probe_is_not_measured_and_is_not_all_noncommittal():
    assert math.isnan(relevancy_score([], []))
    assert all_noncommittal([]) is False


def test_mismatched_lengths_are_an_error():
    with pytest.raises(ValueError, match="2 cosines but 1"):
        relevancy_score([0.5, 0.5], [0])


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("What is the capital of France?", "what is the capital of france"),
        ("What  is the\tcapital of France ?", "What is the capital of France?"),
        ("Where's order A17?!", "wheres order a17"),
    ],
)
def test_normalise_question_folds_case_space_and_punctuation(a, b):
    assert normalise_question(a) == normalise_question(b)


def test_normalise_question_keeps_different_words_apart():
    assert normalise_question("When does it open?") != normalise_question("When does it close?")


def test_one_probe_has_no_similarity_and_warns_nothing():
    """One probe has no pair: None, said without numpy's "mean of empty slice" warning in the
    user's log."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mean_pairwise_cosine(np.array([[1.0, 0.0]])) is None
        cosines, similarity = probe_cosines(QUESTION, GENERATED[:1])
    assert similarity is None
    assert cosines.tolist() == pytest.approx([1.0])


def test_mean_pairwise_cosine():
    assert mean_pairwise_cosine(np.array([[1.0, 0.0]])) is None
    assert mean_pairwise_cosine(np.array([[1.0, 0.0], [2.0, 0.0]])) == pytest.approx(1.0)
    assert mean_pairwise_cosine(np.array([[1.0, 0.0], [0.0, 1.0]])) == pytest.approx(0.0)
    three = mean_pairwise_cosine(GENERATED)
    pairs = [
        float(GENERATED[i] @ GENERATED[j])
        / (np.linalg.norm(GENERATED[i]) * np.linalg.norm(GENERATED[j]))
        for i, j in ((0, 1), (0, 2), (1, 2))
    ]
    assert three == pytest.approx(sum(pairs) / 3)
    assert not math.isnan(three)


def _unit_rows_as_written_before(matrix):
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scaled = matrix / np.max(np.abs(matrix), axis=1, keepdims=True)
        return scaled / np.linalg.norm(scaled, axis=1, keepdims=True)


def _vector_sets():
    rng = np.random.default_rng(19)
    for width in (2, 3, 64, 1536, 3072):
        for probes in (1, 2, 3, 5):
            yield rng.normal(size=width), rng.normal(size=(probes, width))
    tiny, huge = np.full(8, 1e-320), np.full(8, 1e308)
    yield tiny, np.stack([huge, -huge, tiny])
    yield huge, np.stack([np.arange(8.0), np.zeros(8), np.full(8, np.nan)])
    yield np.arange(8.0), np.stack([np.full(8, np.inf), np.arange(8.0)[::-1]])


def test_probe_cosines_are_bit_for_bit_those_of_the_plain_numpy_formulas():
    for question, probes in _vector_sets():
        q = _unit_rows_as_written_before(question.reshape(1, -1))
        p = _unit_rows_as_written_before(probes)
        expected = np.clip((p @ q.T).reshape(-1), -1.0, 1.0)
        cosines, similarity = probe_cosines(question, probes)
        assert cosines.tobytes() == expected.tobytes()
        assert cosine_similarities(question, probes).tobytes() == expected.tobytes()
        np.testing.assert_array_equal(unit_rows(probes), p)  # NaN where NaN, else equal
        if len(probes) < 2:
            assert similarity is None and mean_pairwise_cosine(probes) is None
            continue
        pairs = np.clip(p @ p.T, -1.0, 1.0)[np.triu_indices(len(probes), k=1)]
        value = float(np.mean(pairs))
        assert (
            similarity == mean_pairwise_cosine(probes) == (value if math.isfinite(value) else None)
        )


def _normalised_by_regular_expressions(question):
    import re
    import string

    folded = re.sub("['‘’]", "", question.casefold())
    folded = re.sub(f"[{re.escape(string.punctuation)}¿¡“”]", " ", folded)
    return re.sub(r"\s+", " ", folded).strip()


def test_normalise_question_folds_exactly_as_the_regular_expressions_do():
    import random
    import string

    rng = random.Random(19)
    alphabet = string.printable + "‘’¿¡“”ÉßİΣς\u00a0\u2003\u3000\u200b\u0085\x1c語"
    texts = ["".join(rng.choices(alphabet, k=rng.randint(0, 40))) for _ in range(3000)]
    # ASCII only: the bytes-table path
    texts += ["".join(rng.choices(string.printable, k=rng.randint(0, 40))) for _ in range(3000)]
    texts += ["Where's order A17?!", "  ¿Qué   pasó?  ", "STRASSE ß", "l’été", ""]
    for text in texts:
        assert normalise_question(text) == _normalised_by_regular_expressions(text), repr(text)


@pytest.mark.parametrize("probe_prompt", ["stock", "diverse"])
def test_distinct_probes_count_folded_questions_in_every_mode(probe_prompt):
    from ragas_relevancy_ext.scoring.probe_modes import ProbeSet

    probes = ProbeSet()
    questions = ["When did A17 ship?", "when did A17 ship", "Where is A17?"]
    for question in questions:
        if probe_prompt == "stock":
            probes.keep_as_stock(question, 0, "call")
        else:
            probes.offer(question, 0, "call")
    assert probes.distinct() == 2
    assert len(probes.questions) == (3 if probe_prompt == "stock" else 2)
