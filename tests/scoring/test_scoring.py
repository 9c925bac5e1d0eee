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


def test_vectors_near_the_float_limits_neither_overflow_nor_underflow():
    tiny, huge = np.full(8, 1e-320), np.full(8, 1e308)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning in the user's log either
        cosines, similarity = probe_cosines(tiny, np.stack([huge, -huge, tiny]))
    assert cosines.tolist() == pytest.approx([1.0, -1.0, 1.0])
    assert similarity == pytest.approx(-1 / 3)


def _rounds_past_one() -> np.ndarray:
    """A vector whose unit vector's dot product with itself rounds to above 1."""
    rng = np.random.default_rng(19)
    for _ in range(10_000):
        vector = rng.normal(size=8)
        units = unit_rows(np.stack([vector, vector, vector]))
        if (units[1:] @ units[:1].T).max() > 1.0 and (units @ units.T).max() > 1.0:
            return vector
    raise AssertionError("no vector rounds past 1")


def test_a_cosine_rounded_past_one_is_kept_at_one():
    vector = _rounds_past_one()
    cosines, similarity = probe_cosines(vector, np.stack([vector, vector]))
    assert cosines.max() <= 1.0 and similarity is not None and similarity <= 1.0
    assert relevancy_score(cosines, [0, 0]) <= 1.0
    assert mean_pairwise_cosine(np.stack([vector, vector])) <= 1.0


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
