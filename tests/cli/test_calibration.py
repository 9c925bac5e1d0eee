"""Correlation, bootstrap and repeat spread against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from ragas_relevancy_ext.cli.stats import (
    agreement,
    bootstrap_interval,
    pearson,
    repeat_spread,
    spearman,
)

X = [1, 2, 3, 4, 5]
Y = [2, 4, 5, 4, 5]


def test_pearson_matches_hand_computation():
    # dx = -2..2, dy = -2, 0, 1, 0, 1: sum dx*dy = 6, sum dx^2 = 10, sum dy^2 = 6
    assert pearson(X, Y) == pytest.approx(6 / math.sqrt(60), abs=1e-12)


def test_pearson_of_a_line_is_one_and_of_a_falling_line_minus_one():
    assert pearson([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_spearman_matches_hand_computation_with_ties():
    # ranks of Y are 1, 2.5, 4.5, 2.5, 4.5: sum dx*dy = 7, sum dx^2 = 10, sum dy^2 = 9
    assert spearman(X, Y) == pytest.approx(7 / math.sqrt(90), abs=1e-12)


def test_spearman_sees_any_rising_relation_as_perfect():
    assert spearman([1, 2, 3, 4], [1, 8, 27, 64]) == pytest.approx(1.0)
    assert pearson([1, 2, 3, 4], [1, 8, 27, 64]) < 1.0


def test_undefined_correlations_are_nan():
    assert math.isnan(pearson([1, 2, 3], [4, 4, 4]))
    assert math.isnan(spearman([1], [2]))


def test_pairs_with_nan_are_left_out():
    assert pearson([1, 2, float("nan"), 3], [2, 4, 100, 6]) == pytest.approx(1.0)


def test_unequal_lengths_are_refused():
    with pytest.raises(ValueError, match="equal-length"):
        pearson([1, 2], [1, 2, 3])


def test_bootstrap_is_repeatable_and_brackets_the_estimate():
    x = [0.1, 0.4, 0.35, 0.8, 0.7, 0.9, 0.2, 0.55, 0.6, 0.3]
    y = [1, 2, 2, 5, 4, 5, 1, 3, 4, 2]
    first = bootstrap_interval(x, y, pearson, resamples=500, seed=7)
    assert first == bootstrap_interval(x, y, pearson, resamples=500, seed=7)
    assert first != bootstrap_interval(x, y, pearson, resamples=500, seed=8)
    low, high = first
    assert -1.0 <= low <= pearson(x, y) <= high <= 1.0


def test_bootstrap_of_a_perfect_relation_is_a_point():
    low, high = bootstrap_interval([1, 2, 3, 4, 5], [2, 4, 6, 8, 10], pearson, resamples=200)
    assert low == pytest.approx(1.0) and high == pytest.approx(1.0)


def test_bootstrap_needs_three_pairs():
    assert all(math.isnan(v) for v in bootstrap_interval([1, 2], [1, 2], pearson))


def test_agreement_counts_dropped_scores():
    result = agreement([0.1, 0.5, float("nan"), 0.9], [1, 3, 5, 5], resamples=200)
    assert result.n == 3 and result.dropped == 1
    assert result.pearson == pytest.approx(pearson([0.1, 0.5, 0.9], [1, 3, 5]))
    assert result.spearman == pytest.approx(1.0)


def test_repeat_spread_is_the_sample_deviation_per_row():
    spread = repeat_spread([[0.5, 0.7], [1.0, 1.0], [0.2, float("nan")]])
    assert spread.means == pytest.approx([0.6, 1.0, 0.2])
    assert spread.deviations[0] == pytest.approx(math.sqrt(0.02))
    assert spread.deviations[1] == 0.0
    assert math.isnan(spread.deviations[2])
    assert spread.mean_deviation == pytest.approx(math.sqrt(0.02) / 2)
    assert spread.repeats == 2
