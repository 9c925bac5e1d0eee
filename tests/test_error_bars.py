"""Error bars: a sample's standard error from its probes, a run's interval and variance split,
paired differences and failures, planning and thresholds, each against scipy, statsmodels or a
formula worked by hand, on small runs, missing rows and few clusters of unequal size."""

from __future__ import annotations

import dataclasses
import math
import statistics

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import linalg, stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.power import TTestPower

import ragas_relevancy_ext
from ragas_relevancy_ext.error_bars import (
    FAILURE_ALPHA,
    FEW_CLUSTERS,
    PlanModel,
    best_threshold,
    bootstrap_interval,
    detectable_drop,
    interval_text,
    mean_interval,
    method_text,
    p_text,
    pair_by_question,
    paired_difference,
    question_key,
    rough_text,
    rows_needed,
    run_error_bars,
)
from ragas_relevancy_ext.results import REPORT_TRACE
from ragas_relevancy_ext.scoring.report import Probe, RelevancyReport


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
UNEQUAL = ["a", "a", "a", "a", "a", "b", "b", "c", "d", "d", "d", "e"]  # 5 clusters, 1 to 5 rows
VALUES = [0.9, 0.7, 0.8, 0.75, 0.85, 0.3, 0.4, 0.0, 0.6, 0.55, 0.65, 0.2]


def test_the_interval_of_a_few_rows_is_students_t_with_missing_rows_left_out():
    bars = mean_interval(SCORES + [math.nan])
    reference = stats.ttest_1samp(SCORES, 0.0)
    assert (bars.n, bars.nans, bars.method, bars.df) == (5, 1, "t", 4)
    assert bars.mean == pytest.approx(statistics.fmean(SCORES))
    assert bars.stderr == pytest.approx(statistics.stdev(SCORES) / math.sqrt(5))
    ci = reference.confidence_interval(0.95)
    assert (bars.ci_low, bars.ci_high) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert "95% CI [" in bars.interval_text() and ", t, 4 df, n=5)" in bars.interval_text()


def cr2_by_matrices(y: list[float], labels: list[str]) -> tuple[float, float]:
    """CR2 and Bell-McCaffrey's degrees of freedom from their definitions, for the mean: each
    cluster's residuals times (I - H_gg)^(-1/2), and (tr B)^2 / tr(B^2) for B = M C M."""
    y_ = np.asarray(y)
    n = y_.size
    x = np.ones((n, 1))
    hat = x @ np.linalg.inv(x.T @ x) @ x.T
    residual = np.eye(n) - hat
    e = residual @ y_
    meat, columns = 0.0, []
    for g in dict.fromkeys(labels):
        rows = [i for i, label in enumerate(labels) if label == g]
        adjust = linalg.sqrtm(np.linalg.inv(np.eye(len(rows)) - hat[np.ix_(rows, rows)])).real
        a = np.zeros(n)
        a[rows] = adjust.T @ x[rows, 0] / n  # the mean's weights, adjusted
        meat += float(a @ e) ** 2
        columns.append(residual @ a)
    gram = np.array([[u @ v for v in columns] for u in columns])
    return math.sqrt(meat), float(np.trace(gram) ** 2 / np.sum(gram * gram))


def test_clustered_interval_is_cr2_with_bell_mccaffrey_degrees_of_freedom():
    bars = mean_interval(VALUES + [math.nan], clusters=UNEQUAL + ["z"])  # the NaN row's cluster
    stderr, df = cr2_by_matrices(VALUES, UNEQUAL)
    assert (bars.method, bars.clusters, bars.n) == ("cr2", 5, 12)
    assert (bars.stderr, bars.df) == pytest.approx((stderr, df), rel=1e-9)
    assert df < 4  # unequal clusters: fewer than G - 1
    half = stats.t.ppf(0.975, df) * stderr
    assert (bars.ci_low, bars.ci_high) == pytest.approx((bars.mean - half, bars.mean + half))
    text = bars.interval_text()
    assert "CR2 over 5 clusters" in text and "under 30 clusters: a rough interval" in text


def test_equal_clusters_give_statsmodels_cluster_robust_interval_and_g_minus_1():
    y = [0.2, 0.4, 0.6, 0.8, 0.5, 0.3, 0.9, 0.1]
    groups = [0, 0, 1, 1, 2, 2, 3, 3]
    fit = sm.OLS(np.asarray(y), np.ones(8)).fit(
        cov_type="cluster", cov_kwds={"groups": np.asarray(groups)}, use_t=True
    )
    bars = mean_interval(y, clusters=groups)
    assert bars.stderr == pytest.approx(float(fit.bse[0]), rel=1e-12)
    assert bars.df == pytest.approx(3)
    assert (bars.ci_low, bars.ci_high) == pytest.approx(tuple(fit.conf_int()[0]), rel=1e-12)
    # a cluster per row is Student's t exactly
    single = mean_interval(SCORES, clusters=range(5))
    assert (single.stderr, single.df) == pytest.approx((mean_interval(SCORES).stderr, 4))


def test_one_cluster_or_one_row_gives_no_interval():
    assert math.isnan(mean_interval(SCORES, clusters=["a"] * 5).ci_low)
    assert math.isnan(mean_interval([0.5]).ci_high)
    assert math.isnan(mean_interval([0.5], method="bootstrap").ci_high)


def test_variance_splits_into_between_and_within():
    errs = [0.01, 0.02, 0.03, math.nan, 0.02]
    bars = mean_interval(SCORES, stderrs=errs)
    within = (0.01**2 + 0.02**2 + 0.03**2 + 0.02**2) / 4
    assert bars.within_variance == pytest.approx(within)
    assert bars.between_variance == pytest.approx(statistics.variance(SCORES) - within)
    assert "within (probes) 0.00045 (" in bars.variance_text()


def test_bootstrap_is_seeded_and_resamples_whole_clusters():
    one = mean_interval(SCORES * 4, method="bootstrap", seed=3)
    # field by field, NaN (no within-question variance here) equal to NaN
    assert repr(one) == repr(mean_interval(SCORES * 4, method="bootstrap", seed=3))
    assert one.method == "bootstrap" and one.ci_low < one.mean < one.ci_high
    assert one.stderr == pytest.approx(statistics.stdev(SCORES * 4) / math.sqrt(20), rel=0.15)
    # two clusters, each constant: a resample of clusters has mean 0, 0.4 or 1, never between
    two = mean_interval([0, 0, 0, 1, 1], clusters="aaabb", method="bootstrap", resamples=500)
    assert (two.ci_low, two.ci_high, two.clusters) == (0.0, 1.0, 2)
    assert "bootstrap over 2 clusters" in two.interval_text()


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
        mean_interval(SCORES, method="cr2")
    with pytest.raises(ValueError, match="5 scores but 4 cluster labels"):
        mean_interval(SCORES, clusters="abcd")


def test_numbers_people_read():
    assert p_text(1e-300) == "p < 1e-16" and p_text(0.0) == "p < 1e-16"
    assert p_text(3.14e-5) == "p = 3.1e-05" and p_text(0.04512) == "p = 0.0451"
    assert p_text(math.nan) == "p = NaN"
    assert interval_text(-0.12271, 0.92271) == "[-0.1227, 0.9227]"


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


A9 = [0.61, 0.72, 0.55, 0.80, 0.66, 0.59, 0.74, 0.69, 0.63, math.nan]
B9 = [0.52, 0.73, 0.43, 0.82, 0.59, 0.62, 0.65, 0.71, 0.52, 0.7]


def test_paired_difference_of_nine_pairs_is_a_paired_t_test():
    result = paired_difference(A9, B9)
    reference = stats.ttest_rel(B9[:9], A9[:9])
    ci = reference.confidence_interval(0.95)
    assert (result.n_pairs, result.not_scored, result.df) == (9, 1, 8)
    assert result.p_value == pytest.approx(reference.pvalue, rel=1e-9)
    assert (result.ci_low, result.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert result.p_value > 0.05 and not result.worse_by_more_than(0.0)  # normal: p = 0.034
    one_sided = stats.ttest_rel(B9[:9], A9[:9], alternative="less").pvalue
    assert result.drop_p_value() == pytest.approx(one_sided, rel=1e-9)
    assert result.drop_p_value(0.01) > one_sided  # a margin makes the drop harder to show
    assert result.correlation == pytest.approx(stats.pearsonr(A9[:9], B9[:9]).statistic)
    assert (result.mean_a, result.mean_b) == pytest.approx(
        (statistics.fmean(A9[:9]), statistics.fmean(B9[:9]))
    )


def test_the_exit_rule_and_the_one_sided_p_value_agree():
    lower = [b - 0.06 for b in B9]
    result = paired_difference(A9, lower)
    assert result.worse_by_more_than(0.0) and result.drop_p_value() < 0.025
    margin = -result.ci_high  # the interval's top: just past it, the verdict turns
    assert result.worse_by_more_than(margin * 0.99) and not result.worse_by_more_than(margin)
    assert result.drop_p_value(margin) == pytest.approx(0.025)


def test_a_difference_without_spread_is_certain():
    same = paired_difference(SCORES, SCORES)
    assert (same.diff, same.p_value, same.drop_p_value()) == (0.0, 1.0, 1.0)
    exact = [0.5, 0.25, 0.75, 1.0, 0.0]  # binary fractions: every difference exactly -0.25
    lower = paired_difference(exact, [s - 0.25 for s in exact])
    assert lower.p_value == 0.0 and lower.drop_p_value() == 0.0
    assert lower.worse_by_more_than(0.2) and not lower.worse_by_more_than(0.25)  # width 0


def test_a_rise_in_failures_is_an_exact_mcnemar_test():
    a = [0.5 + 0.01 * i for i in range(40)]
    b = list(a)
    for i in range(12):  # B fails on A's 12 lowest; A fails on 1 that B scored
        b[i] = math.nan
    a[30] = math.nan
    result = paired_difference(a, b)
    assert (result.failed_only_a, result.failed_only_b, result.failed_both) == (1, 12, 0)
    table = [[27, 12], [1, 0]]  # (A scored, B scored) ... the discordant cells are 12 and 1
    assert 2 * result.failure_p_value == pytest.approx(mcnemar(table, exact=True).pvalue)
    exact = stats.binomtest(12, 13, 0.5, alternative="greater").pvalue
    assert result.failure_p_value == pytest.approx(exact)
    assert result.failures_rose() and result.failure_p_value < FAILURE_ALPHA
    assert not result.worse_by_more_than(0.0)  # the pairs left did not move
    few = paired_difference([0.5, 0.6, 0.7, 0.8], [0.5, math.nan, 0.7, math.nan])
    assert few.failure_p_value == pytest.approx(0.25) and not few.failures_rose()
    assert paired_difference(SCORES, SCORES).failure_p_value == 1.0  # nothing failed


def test_failed_rows_can_count_as_zero():
    a, b = [0.6, 0.7, 0.65, 0.8], [0.6, math.nan, 0.66, math.nan]
    result = paired_difference(a, b, failed_as_zero=True)
    assert (result.n_pairs, result.mean_b) == (4, pytest.approx((0.6 + 0.66) / 4))
    assert (result.failed_only_b, result.not_scored) == (2, 0)
    assert paired_difference(a, b).n_pairs == 2


def test_clustered_paired_difference_uses_cr2():
    a = VALUES
    b = [v - 0.05 * (i % 3) for i, v in enumerate(VALUES)]
    result = paired_difference(a + [0.5], b + [math.nan], clusters=UNEQUAL + ["z"])
    bars = mean_interval([y - x for x, y in zip(a, b, strict=True)], clusters=UNEQUAL)
    assert (result.stderr, result.df, result.clusters) == (bars.stderr, bars.df, 5)
    assert result.p_value == pytest.approx(2 * stats.t.sf(abs(bars.mean) / bars.stderr, bars.df))


# -- planning and thresholds -----------------------------------------------------------------


def test_detectable_drop_has_the_power_statsmodels_gives_it():
    model = PlanModel(questions=0.02, probes=0.003)
    sd = math.sqrt(0.02 + 0.003 / 3)
    for n in (5, 12, 200):
        drop = detectable_drop(n, model, strictness=3)
        power = TTestPower().power(drop / sd, n, 0.025, alternative="larger")
        assert power == pytest.approx(0.8, abs=1e-6)
    # a margin is added to the drop; a design effect widens it as root n shrinks
    assert detectable_drop(50, model, strictness=3, margin=0.01) == pytest.approx(
        detectable_drop(50, model, strictness=3) + 0.01
    )
    # 40 clusters of 5 as earlier, alike 0.25: design effect 1 + 0.25 (5 - 1) = 2, 39 df
    clustered = PlanModel(0.02, 0.003, cluster_sizes=(5, 5, 5, 5), alike=0.25)
    effects, dfs = clustered.draws(200)
    assert (effects == pytest.approx(2.0)) and (dfs == pytest.approx(39))
    drop = detectable_drop(200, clustered, strictness=3)
    nc = drop / math.sqrt((0.02 + 0.001) * 2.0 / 200)
    assert stats.nct.sf(stats.t.ppf(0.975, 39), 39, nc) == pytest.approx(0.8)
    assert math.isinf(detectable_drop(1, clustered, strictness=3))  # one cluster: no test
    unequal = PlanModel(0.02, 0.003, cluster_sizes=tuple(UNEQUAL.count(g) for g in "abcde"))
    assert unequal.draws(12)[1] == pytest.approx(mean_interval(VALUES, clusters=UNEQUAL).df)
    assert unequal.draws(24)[1] == pytest.approx(_df_of([5, 2, 1, 3, 1] * 2))
    # 3 rows of the 12 touch 1 to 3 clusters: the power is the mean over the draws
    unequal = PlanModel(0.02, 0.003, cluster_sizes=unequal.cluster_sizes, alike=0.5)
    effects, dfs = unequal.draws(3)
    assert dfs.size == 200 and (dfs == 0).any() and (dfs > 1).any() and (dfs <= 2).all()
    # 3 clusters of 1 row, 2 + 1, or 3 in one: sum of squared sizes / 3 is 1, 5/3 or 3
    assert set(np.round(effects, 6)) <= {1.0, round(1 + 0.5 * (5 / 3 - 1), 6), 2.0}
    drop = detectable_drop(3, unequal, strictness=3)
    powers = [
        stats.nct.sf(stats.t.ppf(0.975, df), df, drop / math.sqrt(0.021 * effect / 3))
        for effect, df in zip(effects, dfs, strict=True)
        if df > 0
    ]
    assert sum(powers) / dfs.size == pytest.approx(0.8)


def _df_of(sizes: list[int]) -> float:
    labels = [g for g, size in enumerate(sizes) for _ in range(size)]
    return mean_interval(list(range(len(labels))), clusters=labels).df


def test_rows_needed_is_the_fewest_that_find_the_drop():
    model = PlanModel(questions=0.02, probes=0.003)
    for detect in (0.2, 0.05, 0.011):
        n = rows_needed(detect, model, strictness=5)
        assert detectable_drop(n, model, strictness=5) <= detect
        assert detectable_drop(n - 1, model, strictness=5) > detect
    assert rows_needed(0.05, model, strictness=1) > rows_needed(0.05, model, strictness=12)


def test_a_plan_model_from_one_run_assumes_the_correlation():
    scores = [0.2, 0.4, 0.6, 0.8, 0.5, math.nan]
    errs = [0.01, 0.02, 0.03, 0.01, 0.02, math.nan]
    bars = mean_interval(scores, stderrs=errs)
    model = PlanModel.from_run(scores, errs, 3, 0.25)
    assert model.questions == pytest.approx(2 * 0.75 * bars.between_variance)
    assert model.probes == pytest.approx(2 * bars.within_variance * 3)
    assert (model.alike, model.cluster_sizes, model.df, model.clusters_df) == (0, (), 4, math.inf)
    factors, dfs = model.draws(10)
    assert dfs == pytest.approx(9)  # 10 pairs; the variance of 5 rows could be 4 / chi2(4) off
    chi2 = np.random.default_rng(ragas_relevancy_ext.error_bars.SEED).chisquare(4, factors.size)
    assert factors == pytest.approx(4 / chi2)
    sure = dataclasses.replace(model, df=math.inf)
    assert detectable_drop(10, model, strictness=3) > detectable_drop(10, sure, strictness=3)


def test_a_plan_model_from_two_runs_measures_the_difference():
    a, b = VALUES + [math.nan], [v + 0.1 * ((i * 7) % 5 - 2) for i, v in enumerate(VALUES)] + [0]
    errs = [0.02] * 13
    model = PlanModel.from_pairs(a, b, (errs, errs), (3, 5))
    d = [y - x for x, y in zip(a[:12], b[:12], strict=True)]
    assert model.questions == pytest.approx(statistics.variance(d) - 2 * 0.02**2)
    assert model.probes == pytest.approx(0.02**2 * 3 + 0.02**2 * 5)
    clustered = PlanModel.from_pairs(a, b, (errs, errs), (3, 3), UNEQUAL + ["z"])
    bars = mean_interval(d, clusters=UNEQUAL)
    effect = bars.stderr**2 * 12 / statistics.variance(d)
    alike = (effect - 1) / (sum(k * k for k in (5, 2, 1, 3, 1)) / 12 - 1)
    assert clustered.cluster_sizes == (5, 2, 1, 3, 1)
    assert clustered.alike == pytest.approx(max(alike, 0.0))
    assert (clustered.df, clustered.clusters_df) == (11, pytest.approx(bars.df))
    sure = dataclasses.replace(clustered, df=math.inf, clusters_df=math.inf)
    assert sure.draws(12)[0] == pytest.approx(1 + clustered.alike * (40 / 12 - 1))
    assert sure.draws(12)[1] == pytest.approx(bars.df)


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


def test_a_runs_summary_reads_its_mean_interval_method_and_variance_split():
    errs = [0.01, 0.02, 0.03, 0.01, 0.02]
    bars = mean_interval(SCORES, stderrs=errs)
    ci = stats.ttest_1samp(SCORES, 0.0).confidence_interval(0.95)
    stderr = statistics.stdev(SCORES) / math.sqrt(5)
    assert bars.interval_text() == (
        f"0.5000 ± {stderr:.4f} (95% CI [{ci.low:.4f}, {ci.high:.4f}], t, 4 df, n=5)"
    )
    within = sum(e * e for e in errs) / 5
    total = statistics.variance(SCORES)
    assert bars.variance_text() == (
        f"variance: between questions {total - within:.5f}, within (probes) {within:.5f} "
        f"({within / total:.0%} of the total)"
    )
    # no probes' spread known: no share; no spread at all: no share of nothing
    assert mean_interval(SCORES).variance_text() == (
        f"variance: between questions {total:.5f}, within (probes) NaN"
    )
    flat = mean_interval([0.5, 0.5, 0.5], stderrs=[0.0, 0.0, 0.0])
    assert flat.variance_text() == "variance: between questions 0.00000, within (probes) 0.00000"
    assert mean_interval([math.nan, math.nan]).interval_text() == "NaN"


def test_p_values_and_the_rough_warning_turn_where_they_say():
    assert p_text(1e-16) == "p = 1e-16" and p_text(1e-3) == "p = 0.0010"
    assert rough_text(FEW_CLUSTERS) == "" and rough_text(None) == ""
    assert rough_text(FEW_CLUSTERS - 1) == f"; under {FEW_CLUSTERS} clusters: a rough interval"


def test_run_error_bars_passes_every_choice_on():
    reports = [report([0.2 + 0.05 * i, 0.3 + 0.05 * i]) for i in range(12)]
    scores = [r.score for r in reports]
    asked = dict(clusters=UNEQUAL, method="bootstrap", level=0.8, resamples=300, seed=5)
    got = run_error_bars(reports, **asked)
    assert repr(got) == repr(
        mean_interval(scores, stderrs=[r.score_stderr for r in reports], **asked)
    )
    assert (got.clusters, got.level, got.method) == (5, 0.8, "bootstrap")
    assert got != run_error_bars(reports, **{**asked, "seed": 6})


def test_the_bootstrap_interval_is_scipys_percentile_bootstrap():
    x = [0.2, 0.9, 0.4, 0.7, 0.5, 0.1, 0.8, 0.6, 0.3, 0.55]
    bars = mean_interval(x, method="bootstrap", level=0.9, resamples=400, seed=11)
    reference = stats.bootstrap(
        (np.asarray(x),),
        np.mean,
        n_resamples=400,
        confidence_level=0.9,
        method="percentile",
        random_state=np.random.default_rng(11),
    )
    assert (bars.ci_low, bars.ci_high) == pytest.approx(tuple(reference.confidence_interval))
    assert bars.stderr == pytest.approx(reference.standard_error)
    two = mean_interval([0.2, 0.8], method="bootstrap", resamples=200)  # two rows: resampled
    assert 0.2 <= two.ci_low < two.ci_high <= 0.8
    assert math.isnan(mean_interval([math.nan, math.nan], method="bootstrap").ci_low)


def test_a_pairs_bootstrap_interval_is_seeded_and_takes_every_row():
    x = np.zeros(12)
    x[0] = 1.0
    ones = np.ones(12)

    def mean_of_x(a, b):
        return float(a.mean())

    low, high = bootstrap_interval(x, ones, mean_of_x, resamples=500, seed=2)
    assert low == 0.0 and high > 0.0  # row 0 is drawn into some resamples
    assert (low, high) == bootstrap_interval(x, ones, mean_of_x, resamples=500, seed=2)
    assert math.isfinite(bootstrap_interval(x[:3], ones[:3], mean_of_x)[1])  # 3 pairs will do
    assert math.isnan(bootstrap_interval(x[:2], ones[:2], mean_of_x)[0])
    rng = np.random.default_rng(0)
    normal = rng.normal(0.0, 1.0, 400)
    low, high = bootstrap_interval(normal, normal, mean_of_x, resamples=2000, level=0.95)
    half = 1.96 * normal.std(ddof=1) / math.sqrt(400)  # the 2.5% and 97.5% percentiles
    assert (high - low) / 2 == pytest.approx(half, rel=0.1)


def test_a_plan_model_from_one_run_in_clusters_takes_their_design_effect():
    errs = [0.02] * 12 + [0.5]
    model = PlanModel.from_run(VALUES + [math.nan], errs, 3, 0.5, UNEQUAL + ["z"])
    bars = mean_interval(VALUES, clusters=UNEQUAL)
    effect = bars.stderr**2 * 12 / statistics.variance(VALUES)
    assert model.cluster_sizes == (5, 2, 1, 3, 1)
    assert model.alike == pytest.approx((effect - 1) / (40 / 12 - 1))
    assert model.alike > 0 and model.clusters_df == pytest.approx(bars.df)


def test_a_plan_model_from_two_runs_takes_each_runs_probe_noise():
    a = VALUES + [math.nan]
    b = [v + 0.1 * ((i * 7) % 5 - 2) for i, v in enumerate(VALUES)] + [0.5]
    errs_a, errs_b = [0.02] * 12 + [0.9], [0.03] * 12 + [0.9]  # the unpaired row's left out
    model = PlanModel.from_pairs(a, b, (errs_a, errs_b), (3, 5))
    d = [y - x for x, y in zip(a[:12], b[:12], strict=True)]
    assert model.probes == pytest.approx(0.02**2 * 3 + 0.03**2 * 5)
    assert model.questions == pytest.approx(statistics.variance(d) - 0.02**2 - 0.03**2)
    two = PlanModel.from_pairs([0.2, 0.6], [0.5, 0.6], ([0.0, 0.0], [0.0, 0.0]), (3, 3))
    assert two.questions == pytest.approx(statistics.variance([0.3, 0.0]))
    none = PlanModel.from_pairs([math.nan, 0.5], [0.5, math.nan], ([0.0] * 2,) * 2, (3, 3), "ab")
    assert math.isnan(none.questions) and none.cluster_sizes == ()


def test_texts_of_intervals_methods_and_keys():
    assert interval_text(0.123456, 0.654321, 2) == "[0.12, 0.65]"
    assert method_text("bootstrap", None, math.nan) == "bootstrap"
    assert method_text("t", None, 4.0) == "t, 4 df"
    assert method_text("cr2", 12, 5.26) == "CR2 over 12 clusters, 5.3 df"
    assert question_key(" How  do I\tpay? ") == ("", "How do I pay?")
    assert question_key("q", 0) == ("0", "q")
    assert pair_by_question(["q", "q"], ["q", "q"]).repeated == 1  # twice is repeated


def test_the_probes_share_of_the_variance():
    errs = [0.15] * 5  # probes' noise, 0.0225, about half of the scores' variance
    bars = mean_interval(SCORES, stderrs=errs)
    total = statistics.variance(SCORES)
    assert bars.variance_text().endswith(f"({0.0225 / total:.0%} of the total)")


def test_a_paired_difference_at_another_level_with_failures_on_either_side():
    lower = [b - 0.06 for b in B9]
    result = paired_difference(A9, lower, level=0.9)
    ci = stats.ttest_rel(lower[:9], A9[:9]).confidence_interval(0.9)
    assert (result.ci_low, result.ci_high, result.level) == pytest.approx((ci.low, ci.high, 0.9))
    assert result.worse_by_more_than() == result.worse_by_more_than(0.0) is True
    a, b = [0.6, math.nan, 0.65, 0.8, math.nan], [0.6, 0.7, math.nan, 0.7, math.nan]
    counted = paired_difference(a, b, failed_as_zero=True)
    assert (counted.n_pairs, counted.mean_a, counted.mean_b) == (  # failed in both: 0 and 0
        5,
        pytest.approx((0.6 + 0.65 + 0.8) / 5),
        pytest.approx((0.6 + 0.7 + 0.7) / 5),
    )
    plain = paired_difference(a, b)
    assert (plain.failed_only_a, plain.failed_only_b, plain.failed_both) == (1, 1, 1)
    with pytest.raises(ValueError):
        paired_difference(a, b, clusters="abcdefg")  # a label for each pair, no more


def test_two_pairs_have_a_p_value_and_three_a_correlation():
    two = paired_difference([0.5, 0.7], [0.4, 0.5])
    assert two.df == 1 and math.isfinite(two.p_value) and math.isnan(two.correlation)
    a, b = [0.0, 1.0, 0.5], [0.2, 0.3, 0.9]  # A spans exactly 1
    assert paired_difference(a, b).correlation == pytest.approx(stats.pearsonr(a, b).statistic)
    assert paired_difference(b, a).correlation == pytest.approx(stats.pearsonr(b, a).statistic)


def test_clusters_no_more_alike_than_rows_give_no_design_effect():
    exact = [0.5, 0.25, 0.75, 1.0, 0.0]  # binary fractions: every difference exactly -0.25
    lower = [s - 0.25 for s in exact]
    flat = PlanModel.from_pairs(exact, lower, ([0.0] * 5,) * 2, (3, 3), "aabbc")
    assert flat.alike == 0.0  # every difference the same: nothing to be alike in
    alone = PlanModel.from_run(SCORES, [0.01] * 5, 3, 0.5, "abcde")
    assert alone.alike == 0.0 and alone.cluster_sizes == (1, 1, 1, 1, 1)


def test_a_pairs_bootstrap_interval_is_scipys_paired_percentile_bootstrap():
    x = np.asarray(VALUES)
    y = np.asarray([v * 0.5 + 0.1 * (i % 3) for i, v in enumerate(VALUES)])

    def corr(a, b):
        return float(np.corrcoef(a, b)[0, 1])

    got = bootstrap_interval(x, y, corr, resamples=300, level=0.8, seed=4)
    reference = stats.bootstrap(
        (x, y),
        corr,
        paired=True,
        vectorized=False,
        n_resamples=300,
        confidence_level=0.8,
        method="percentile",
        random_state=np.random.default_rng(4),
    )
    assert got == pytest.approx(tuple(reference.confidence_interval))


def test_thresholds_where_the_split_is_not_in_the_middle():
    lone = best_threshold([0.1, 0.2, 0.3, 0.4, 0.9], [False, False, False, False, True])
    assert lone.threshold == pytest.approx(0.65)
    upside_down = best_threshold([0.1, 0.2, 0.9], [True, True, False])  # no cut helps: all in
    assert upside_down.threshold == pytest.approx(0.1)
    scores = [0.9, 0.8, 0.7, 0.3, 0.2, 0.1, 0.75, 0.35, 0.6, 0.65]
    good = [True, True, True, False, False, False, False, True, False, True]
    wide = best_threshold(scores, good, resamples=200, seed=1)
    narrow = best_threshold(scores, good, resamples=200, seed=1, level=0.5)
    assert (wide.resamples, wide.seed) == (200, 1)
    assert wide.ci_low <= narrow.ci_low <= narrow.ci_high <= wide.ci_high
    assert narrow.ci_high - narrow.ci_low < wide.ci_high - wide.ci_low
    only_good = best_threshold([0.5, 0.7], [True, True])
    assert math.isnan(only_good.threshold) and math.isnan(only_good.bad_above)
