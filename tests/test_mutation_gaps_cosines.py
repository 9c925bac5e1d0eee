"""The cosine arithmetic's edges that mutation testing found unchecked: the clip to [-1, 1],
the sentence naming non-finite values, NaN without warnings, and when a standard error is NaN."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from ragas_relevancy_ext.scoring.cosines import (
    mean_pairwise_cosine,
    non_finite,
    probe_cosines,
    score_stderr,
    unit_rows,
)


def _vectors(n: int = 60, size: int = 8) -> list[np.ndarray]:
    rng = np.random.default_rng(20260)
    return [rng.normal(size=size) for _ in range(n)]


def test_a_probe_equal_to_the_question_never_rounds_past_one() -> None:
    # unit-length arithmetic rounds a vector's cosine with itself to 1 + 2e-16 for about one
    # vector in five; a score must stay inside [-1, 1]
    for v in _vectors():
        cosines, similarity = probe_cosines(v, np.stack([v, -v, v]))
        assert cosines.max() <= 1.0 and cosines.min() >= -1.0
        assert cosines[0] == pytest.approx(1.0) and cosines[1] == pytest.approx(-1.0)
        assert similarity is not None and -1.0 <= similarity <= 1.0


def test_the_mean_pairwise_cosine_of_equal_probes_is_at_most_one() -> None:
    for v in _vectors():
        value = mean_pairwise_cosine(np.stack([v, v, v]))
        assert value is not None and value <= 1.0
        assert value == pytest.approx(1.0)


def test_non_finite_names_each_bad_value_by_its_position() -> None:
    assert non_finite([0.5, 0.25]) is None
    assert non_finite([0.5, math.nan, math.inf], "cosine") == (
        "2 of 3 cosine(s) not finite (cosine 2 is nan, cosine 3 is inf)"
    )
    assert non_finite([-math.inf], "value") == "1 of 1 value(s) not finite (value 1 is -inf)"


def test_non_finite_lists_at_most_five_but_counts_all() -> None:
    message = non_finite([math.nan] * 7)
    assert message is not None
    assert message.startswith("7 of 7 cosine(s) not finite (cosine 1 is nan, ")
    assert "cosine 5 is nan)" in message and "cosine 6" not in message


def test_unit_rows_gives_nan_rows_without_a_warning() -> None:
    matrix = np.array([[0.0, 0.0], [1e308, 1e308], [3.0, 4.0], [math.inf, 1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = unit_rows(matrix)
    assert np.isnan(rows[0]).all()
    assert rows[1] == pytest.approx([math.sqrt(0.5)] * 2)
    assert rows[2] == pytest.approx([0.6, 0.8])
    assert np.isnan(rows[3]).any()


@pytest.mark.parametrize("score", [math.nan, math.inf])
def test_a_score_that_is_not_finite_has_no_standard_error(score: float) -> None:
    assert math.isnan(score_stderr([0.5, 0.7, 0.9], score, False))


def test_no_score_has_no_standard_error() -> None:
    assert math.isnan(score_stderr([0.5, 0.7, 0.9], None, False))


def test_the_standard_error_is_the_spread_over_the_root_of_the_count() -> None:
    cosines = [0.5, 0.7, 0.9]
    assert score_stderr(cosines, 0.7, False) == pytest.approx(0.2 / math.sqrt(3))
    assert math.isnan(score_stderr([0.5], 0.5, False))
    assert math.isnan(score_stderr(cosines, 0.0, True))
    assert math.isnan(score_stderr([0.5, math.nan], 0.5, False))


def test_an_all_zero_question_gives_nan_cosines_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cosines, similarity = probe_cosines(np.zeros(3), np.array([[1.0, 0.0, 0.0], [0, 1, 0]]))
    assert np.isnan(cosines).all()
    assert similarity == pytest.approx(0.0)


@pytest.mark.parametrize("scale", [1e200, 1e-200])
def test_cosines_of_huge_or_tiny_vectors_are_those_of_the_same_directions(scale: float) -> None:
    # dot products of entries near 1e200 overflow and those near 1e-200 underflow: either alone
    # sends the vectors through unit length first
    question, *probes = _vectors(4)
    expected, similarity = probe_cosines(question, np.stack(probes))
    cosines, scaled_similarity = probe_cosines(question * scale, np.stack(probes) * scale)
    assert cosines == pytest.approx(expected, rel=1e-12)
    assert scaled_similarity == pytest.approx(similarity, rel=1e-12)


def test_a_product_that_underflows_is_no_error_under_the_callers_numpy_settings() -> None:
    # 1e-200 squared is below the smallest float: numpy reports it when the caller asked it to
    question = np.array([1.0, 1e-200])
    probes = np.array([[1.0, 1e-200], [1e-200, 1.0]])
    with np.errstate(all="raise"):
        cosines, similarity = probe_cosines(question, probes)
    assert cosines == pytest.approx([1.0, 2e-200])
    assert similarity == pytest.approx(2e-200)


def test_an_infinite_entry_gives_nan_cosines_without_a_warning() -> None:
    # inf * 0 in the dot products is an invalid operation numpy warns about
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cosines, similarity = probe_cosines(
            np.array([math.inf, 1.0]), np.array([[0.0, 1.0], [1.0, 1.0]])
        )
    assert np.isnan(cosines).all()
    assert similarity == pytest.approx(math.sqrt(0.5))


def test_probes_whose_pairs_have_no_cosine_have_no_similarity() -> None:
    cosines, similarity = probe_cosines(np.ones(3), np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))
    assert math.isnan(cosines[0]) and cosines[1] == pytest.approx(math.sqrt(1 / 3))
    assert similarity is None
    assert mean_pairwise_cosine(np.array([[0.0, 0.0], [1.0, 0.0]])) is None


def test_the_mean_pairwise_cosine_of_opposite_probes_is_at_least_minus_one() -> None:
    # a unit vector's product with its negation rounds below -1 for about one vector in five
    for v in _vectors():
        value = mean_pairwise_cosine(np.stack([v, -v]))
        assert value is not None and value >= -1.0
        assert value == pytest.approx(-1.0)
