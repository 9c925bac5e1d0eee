"""Error bars: a sample's standard error from its probes, a run's interval and variance split,
paired differences, planning and thresholds, each against a formula worked by hand."""

from __future__ import annotations

import math
import statistics
from statistics import NormalDist

import pytest

import ragas_relevancy_ext
from ragas_relevancy_ext.error_bars import (
    best_threshold,
    detectable_drop,
    mean_interval,
    pair_by_question,
    paired_difference,
    question_key,
    rows_needed,
    run_error_bars,
)
from ragas_relevancy_ext.results import REPORT_TRACE
from ragas_relevancy_ext.scoring.report import Probe, RelevancyReport

Z = NormalDist().inv_cdf(0.975)


def report(cosines, noncommittal=None, score=None) -> RelevancyReport:
    flags = noncommittal or [0] * len(cosines)
    probes = [Probe(f"p{i}", f, c) for i, (c, f) in enumerate(zip(cosines, flags, strict=True))]
    every = bool(cosines) and all(flags)
    if score is None:
        score = 0.0 if every else (sum(cosines) / len(cosines) if cosines else math.nan)
    return RelevancyReport("q", "a", score, len(cosines), "diverse", every, probes)


# -- one sample ------------------------------------------------------------------------------


def test_a_samples_stderr_is_its_probes_sd_over_root_n():
    cosines = [0.9, 0.7, 0.8, 0.6]
    assert report(cosines).score_stderr == pytest.approx(statistics.stdev(cosines) / 2.0)


def test_one_probe_all_noncommittal_or_nan_give_no_stderr():
    assert math.isnan(report([0.8]).score_stderr)
    assert math.isnan(report([0.8, 0.6], [1, 1]).score_stderr)  # 0 by the rule, not a mean
    assert math.isnan(report([0.8, math.nan]).score_stderr)
    assert math.isnan(report([], score=math.nan).score_stderr)


def test_some_noncommittal_probes_count_like_the_rest():
    cosines = [0.9, 0.5, 0.7]
    expected = statistics.stdev(cosines) / math.sqrt(3)
    assert report(cosines, [1, 0, 0]).score_stderr == pytest.approx(expected)


def test_the_report_carries_its_stderr_and_older_reports_still_load():
    r = report([0.9, 0.7, 0.8])
    data = r.to_dict()
    assert data["score_stderr"] == pytest.approx(statistics.stdev([0.9, 0.7, 0.8]) / math.sqrt(3))
    old = {k: v for k, v in data.items() if k != "score_stderr"}  # written before the field
    assert RelevancyReport.from_dict(old).score_stderr == pytest.approx(data["score_stderr"])
    assert RelevancyReport.from_dict(data) == r
    assert report([0.9]).to_dict()["score_stderr"] is None  # NaN is written as null


# -- one run ---------------------------------------------------------------------------------


SCORES = [0.2, 0.4, 0.6, 0.8, 0.5]


def test_clt_interval_of_a_known_sample():
    bars = mean_interval(SCORES + [math.nan])
    mean = sum(SCORES) / 5
    se = statistics.stdev(SCORES) / math.sqrt(5)
    assert (bars.n, bars.nans, bars.method) == (5, 1, "clt")
    assert bars.mean == pytest.approx(mean)
    assert bars.stderr == pytest.approx(se)
    assert (bars.ci_low, bars.ci_high) == pytest.approx((mean - Z * se, mean + Z * se))


def test_clustered_interval_of_a_known_sample():
    labels = ["a", "a", "b", "b", "b"]
    bars = mean_interval(SCORES, clusters=labels)
    mean = sum(SCORES) / 5
    sum_a = (0.2 - mean) + (0.4 - mean)
    sum_b = (0.6 - mean) + (0.8 - mean) + (0.5 - mean)
    se = math.sqrt((sum_a**2 + sum_b**2) * 2 / (2 - 1)) / 5
    assert (bars.method, bars.clusters) == ("clustered", 2)
    assert bars.stderr == pytest.approx(se)
    assert bars.ci_high == pytest.approx(mean + Z * se)
    # a cluster per row is the central-limit figure exactly
    assert mean_interval(SCORES, clusters=range(5)).stderr == pytest.approx(
        mean_interval(SCORES).stderr
    )


def test_variance_splits_into_between_and_within():
    errs = [0.01, 0.02, 0.03, math.nan, 0.02]
    bars = mean_interval(SCORES, stderrs=errs)
    within = (0.01**2 + 0.02**2 + 0.03**2 + 0.02**2) / 4
    assert bars.within_variance == pytest.approx(within)
    assert bars.between_variance == pytest.approx(statistics.variance(SCORES) - within)


def test_bootstrap_is_seeded_and_around_the_mean():
    one = mean_interval(SCORES * 4, method="bootstrap", seed=3)
    # field by field, NaN (no within-question variance here) equal to NaN
    assert repr(one) == repr(mean_interval(SCORES * 4, method="bootstrap", seed=3))
    assert one.method == "bootstrap" and one.ci_low < one.mean < one.ci_high
    assert one.stderr == pytest.approx(statistics.stdev(SCORES * 4) / math.sqrt(20), rel=0.15)


def test_error_bars_reads_reports_and_an_evaluate_result():
    reports = [report([0.9, 0.7]), report([0.5, 0.6, 0.4]), None, report([], score=math.nan)]
    bars = run_error_bars(reports)
    assert (bars.n, bars.nans) == (2, 2)
    assert bars.mean == pytest.approx((0.8 + 0.5) / 2)
    within = (
        (statistics.stdev([0.9, 0.7]) ** 2) / 2 + statistics.stdev([0.5, 0.6, 0.4]) ** 2 / 3
    ) / 2
    assert bars.within_variance == pytest.approx(within)

    class Result:  # what ragas.evaluate returns: one trace per row
        traces = [{"relevancy": {REPORT_TRACE: {"output": r.to_dict()}}} for r in reports[:2]]

    assert run_error_bars(Result()).mean == pytest.approx(bars.mean)
    assert ragas_relevancy_ext.run_error_bars is run_error_bars  # exported at the package root


def test_bad_method_and_missing_clusters_are_named():
    with pytest.raises(ValueError, match="method must be one of"):
        mean_interval(SCORES, method="jackknife")
    with pytest.raises(ValueError, match="needs each row's cluster"):
        mean_interval(SCORES, method="clustered")


# -- two runs --------------------------------------------------------------------------------


def test_pairing_by_question_ignores_order_responses_and_spacing():
    a = [question_key(q) for q in ["Where is X?", "How  do I pay?", "Why?", "Only in A"]]
    b = [question_key(q) for q in ["Why?", "Only in B", " How do I pay? ", "Where is X?"]]
    pairing = pair_by_question(a, b)
    assert sorted(pairing.pairs) == [(0, 3), (1, 2), (2, 0)]
    assert (pairing.only_a, pairing.only_b, pairing.repeated) == ([3], [1], 0)


def test_a_repeated_question_pairs_in_row_order():
    pairing = pair_by_question(["q", "r", "q"], ["q", "q", "q"])
    assert pairing.pairs == [(0, 0), (2, 1)]
    assert (pairing.only_a, pairing.only_b, pairing.repeated) == ([1], [2], 1)
    assert question_key("q", 7) != question_key("q", 8)  # an id column tells them apart


def test_paired_difference_of_known_pairs():
    a = [0.5, 0.6, 0.7, 0.8, math.nan]
    b = [0.4, 0.6, 0.5, 0.75, 0.9]
    result = paired_difference(a, b)
    d = [-0.1, 0.0, -0.2, -0.05]
    se = statistics.stdev(d) / 2
    mean = sum(d) / 4
    assert (result.n_pairs, result.not_scored) == (4, 1)
    assert result.diff == pytest.approx(mean)
    assert (result.mean_a, result.mean_b) == pytest.approx((0.65, 0.5625))
    assert (result.ci_low, result.ci_high) == pytest.approx((mean - Z * se, mean + Z * se))
    assert result.p_value == pytest.approx(2 * NormalDist().cdf(-abs(mean) / se))
    assert result.worse_by_more_than(0.0) is (mean + Z * se < 0)
    assert not result.worse_by_more_than(abs(mean) + Z * se)


# -- planning and thresholds -----------------------------------------------------------------


def test_rows_needed_for_a_known_variance():
    var_d = 2 * (1 - 0.5) * 0.02 + 2 * (0.001 * 3) / 5  # between, within at 3 probes, 5 now
    z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)
    expected = math.ceil(z**2 * var_d / 0.02**2)
    kwargs = dict(between=0.02, within=0.001, strictness_then=3, strictness=5, correlation=0.5)
    assert rows_needed(0.02, **kwargs) == expected
    assert detectable_drop(expected, **kwargs) <= 0.02 < detectable_drop(expected - 1, **kwargs)


def test_threshold_of_a_known_split():
    scores = [0.9, 0.8, 0.7, 0.3, 0.2, 0.1, 0.75, math.nan]
    good = [True, True, True, False, False, False, False, True]
    cut = best_threshold(scores, good, resamples=200, seed=1)
    # midway between 0.3 and 0.7: every good row and one bad of four above it, J = 0.75; the
    # next cuts up give 2/3 - 1/4 and 2/3 - 0
    assert cut.threshold == pytest.approx(0.5)
    assert (cut.good_above, cut.bad_above) == (1.0, 0.25)
    assert (cut.n_good, cut.n_bad, cut.dropped) == (3, 4, 1)
    assert cut.ci_low <= cut.threshold <= cut.ci_high
