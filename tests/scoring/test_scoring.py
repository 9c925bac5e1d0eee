"""The pure scoring core (cosines, the noncommittal rule, probe similarity, the standard error),
checked against seed 004's worked numbers and at the float edges: values clipped to [-1, 1],
NaN without warnings, the sentence naming values that are not finite."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragas_relevancy_ext.scoring.cosines import (
    all_noncommittal,
    cosine_similarities,
    non_finite,
    probe_cosines,
    relevancy_score,
    score_stderr,
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


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_text_folds_as_the_same_text_with_other_characters_does(text):
    """ASCII text takes a faster path: it folds as it does with a non-ASCII word after it, and
    with its apostrophes written as typographic ones (the path for any other text)."""
    folded = normalise_question(text)
    assert normalise_question(text + " é") == " ".join([*folded.split(), "é"])
    assert normalise_question(text.replace("'", "’") + " é") == " ".join([*folded.split(), "é"])


def test_normalise_question_keeps_different_words_apart():
    assert normalise_question("When does it open?") != normalise_question("When does it close?")


def test_one_probe_has_no_similarity_and_warns_nothing():
    """One probe has no pair: None, said without numpy's "mean of empty slice" warning in the
    user's log."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cosines, similarity = probe_cosines(QUESTION, GENERATED[:1])
    assert similarity is None
    assert cosines.tolist() == pytest.approx([1.0])


def test_probe_similarity_is_the_mean_cosine_over_probe_pairs():
    def similarity(probes: list[list[float]] | np.ndarray) -> float | None:
        return probe_cosines(np.array([1.0, 1.0, 1.0])[: len(probes[0])], np.asarray(probes))[1]

    assert similarity([[1.0, 0.0]]) is None
    assert similarity([[1.0, 0.0], [2.0, 0.0]]) == pytest.approx(1.0)
    assert similarity([[1.0, 0.0], [0.0, 1.0]]) == pytest.approx(0.0)
    three = similarity(GENERATED)
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
    _, pair = probe_cosines(vector, np.stack([vector, vector, vector]))
    assert pair is not None and pair <= 1.0


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


def _vectors(n: int = 60, size: int = 8) -> list[np.ndarray]:
    rng = np.random.default_rng(20260)
    return [rng.normal(size=size) for _ in range(n)]


def test_a_probe_equal_or_opposite_to_the_question_stays_inside_one():
    # unit-length arithmetic rounds a vector's cosine with itself (or its negation) past 1 (or
    # -1) for about one vector in five; a score and a probe similarity stay inside [-1, 1]
    for v in _vectors():
        cosines, similarity = probe_cosines(v, np.stack([v, -v, v]))
        assert cosines.max() <= 1.0 and cosines.min() >= -1.0
        assert cosines[0] == pytest.approx(1.0) and cosines[1] == pytest.approx(-1.0)
        assert similarity is not None and -1.0 <= similarity <= 1.0
        same, opposite = (
            probe_cosines(v, np.stack([v, v, v]))[1],
            probe_cosines(v, np.stack([v, -v]))[1],
        )
        assert same is not None and same <= 1.0 and same == pytest.approx(1.0)
        assert opposite is not None and opposite >= -1.0 and opposite == pytest.approx(-1.0)


def test_non_finite_names_each_bad_value_by_its_position_up_to_five():
    assert non_finite([0.5, 0.25]) is None
    assert non_finite([0.5, math.nan, math.inf], "cosine") == (
        "2 of 3 cosine(s) not finite (cosine 2 is nan, cosine 3 is inf)"
    )
    assert non_finite([-math.inf], "value") == "1 of 1 value(s) not finite (value 1 is -inf)"
    message = non_finite([math.nan] * 7)
    assert message is not None
    assert message.startswith("7 of 7 cosine(s) not finite (cosine 1 is nan, ")
    assert "cosine 5 is nan)" in message and "cosine 6" not in message


def test_unit_rows_gives_nan_rows_without_a_warning():
    matrix = np.array([[0.0, 0.0], [1e308, 1e308], [3.0, 4.0], [math.inf, 1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = unit_rows(matrix)
    assert np.isnan(rows[0]).all()
    assert rows[1] == pytest.approx([math.sqrt(0.5)] * 2)
    assert rows[2] == pytest.approx([0.6, 0.8])
    assert np.isnan(rows[3]).any()


def test_the_standard_error_is_the_spread_over_the_root_of_the_count():
    cosines = [0.5, 0.7, 0.9]
    assert score_stderr(cosines, 0.7, False) == pytest.approx(0.2 / math.sqrt(3))
    # not measured: one probe, a score 0 by the noncommittal rule, a cosine or score not finite
    assert math.isnan(score_stderr([0.5], 0.5, False))
    assert math.isnan(score_stderr(cosines, 0.0, True))
    assert math.isnan(score_stderr([0.5, math.nan], 0.5, False))
    for score in (math.nan, math.inf, None):
        assert math.isnan(score_stderr(cosines, score, False))


def test_an_all_zero_question_gives_nan_cosines_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cosines, similarity = probe_cosines(np.zeros(3), np.array([[1.0, 0.0, 0.0], [0, 1, 0]]))
    assert np.isnan(cosines).all()
    assert similarity == pytest.approx(0.0)


@pytest.mark.parametrize("scale", [1e200, 1e-200])
def test_cosines_of_huge_or_tiny_vectors_are_those_of_the_same_directions(scale):
    # dot products of entries near 1e200 overflow and those near 1e-200 underflow: either alone
    # sends the vectors through unit length first
    question, *probes = _vectors(4)
    expected, similarity = probe_cosines(question, np.stack(probes))
    cosines, scaled_similarity = probe_cosines(question * scale, np.stack(probes) * scale)
    assert cosines == pytest.approx(expected, rel=1e-12)
    assert scaled_similarity == pytest.approx(similarity, rel=1e-12)


def test_a_product_that_underflows_is_no_error_under_the_callers_numpy_settings():
    # 1e-200 squared is below the smallest float: numpy reports it when the caller asked it to
    question = np.array([1.0, 1e-200])
    probes = np.array([[1.0, 1e-200], [1e-200, 1.0]])
    with np.errstate(all="raise"):
        cosines, similarity = probe_cosines(question, probes)
    assert cosines == pytest.approx([1.0, 2e-200])
    assert similarity == pytest.approx(2e-200)


def test_an_infinite_entry_gives_nan_cosines_without_a_warning():
    # inf * 0 in the dot products is an invalid operation numpy warns about
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cosines, similarity = probe_cosines(
            np.array([math.inf, 1.0]), np.array([[0.0, 1.0], [1.0, 1.0]])
        )
    assert np.isnan(cosines).all()
    assert similarity == pytest.approx(math.sqrt(0.5))


def test_probes_whose_pairs_have_no_cosine_have_no_similarity():
    cosines, similarity = probe_cosines(np.ones(3), np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))
    assert math.isnan(cosines[0]) and cosines[1] == pytest.approx(math.sqrt(1 / 3))
    assert similarity is None
    assert probe_cosines(np.ones(2), np.array([[0.0, 0.0], [1.0, 0.0]]))[1] is None


@pytest.mark.parametrize(
    ("question", "probes", "expected"),
    [
        # a cosine of about 1e-310: the division's result underflows
        ([1e150, 0.0], [[1e-160, 1e150], [1e150, 0.0]], [0.0, 1.0]),
        # the dot products overflow: unit rows, whose tiny entries' products underflow
        ([1e300, 1e100], [[1e100, 1e300], [1e300, 1e100]], [0.0, 1.0]),
        # scaled to unit length, an entry 1e500 times smaller than its row's largest underflows
        ([1e300, 1e-200], [[1e300, 1.0], [1.0, 1e300]], [1.0, 0.0]),
    ],
)
def test_no_floating_point_error_reaches_a_caller_whose_numpy_settings_raise(
    question, probes, expected
):
    with np.errstate(all="raise"):
        cosines, similarity = probe_cosines(np.array(question), np.array(probes))
    assert cosines.tolist() == pytest.approx(expected, abs=1e-12)
    assert similarity == pytest.approx(0.0, abs=1e-12)


def test_unit_rows_of_tiny_entries_are_no_error_under_numpy_settings_that_raise():
    with np.errstate(all="raise"):
        rows = unit_rows(np.array([[1e300, 1e-200], [1e-200, 1e-200], [0.0, 0.0]]))
    assert rows[0].tolist() == [1.0, 0.0]
    assert rows[1] == pytest.approx([math.sqrt(0.5)] * 2)
    assert np.isnan(rows[2]).all()


@pytest.mark.parametrize("width", [3, 64, 1536])
def test_cosines_are_each_probes_dot_over_the_product_of_norms_to_the_bit(width):
    """The dot products of the question and probes, each divided by the probe's norm times the
    question's, clipped to [-1, 1]: as numpy's general matrix product gives them from the same
    matrix, bit for bit; the similarity is the mean over the probe pairs."""
    rng = np.random.default_rng(width)
    for probes in range(1, 7):
        matrix = rng.normal(size=(probes + 1, width))
        matrix[1] = -matrix[0] if probes > 2 else matrix[1]  # a cosine of exactly -1 in play
        dots = np.matmul(matrix, np.array(matrix).T)  # two operands: BLAS's gemm, not syrk
        norms = np.sqrt(np.diagonal(dots))
        expected = np.clip(dots / np.outer(norms, norms), -1.0, 1.0)
        cosines, similarity = probe_cosines(matrix[0], matrix[1:])
        assert cosines.dtype == np.float64 and cosines.tolist() == expected[1:, 0].tolist()
        pairs = expected[1:, 1:][np.triu_indices(probes, 1)]
        if probes == 1:
            assert similarity is None
        else:
            assert similarity == pytest.approx(float(pairs.mean()), abs=1e-15)
