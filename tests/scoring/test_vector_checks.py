"""The vector checks on replies numpy cannot read as one array (ragged, or vectors given as
iterators): the same errors, naming the same problems, as the whole-array path; and lists of
numbers, packed row by row, read bit for bit as numpy reads them."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from ragas_relevancy_ext import EmbeddingShapeError
from ragas_relevancy_ext.scoring.embeddings import check_vectors


def test_a_ragged_reply_with_more_vectors_than_texts_is_a_count_error():
    with pytest.raises(EmbeddingShapeError, match="3 vector\\(s\\) .* for 2 text\\(s\\); expected"):
        check_vectors([[0.1, 0.2], [0.3], [0.4, 0.5]], 2, "Ragged")


def test_a_ragged_reply_with_one_vector_per_text_names_the_lengths():
    with pytest.raises(EmbeddingShapeError, match="different lengths \\[2, 1\\]"):
        check_vectors([[0.1, 0.2], [0.3]], 2, "Ragged")


def test_empty_vectors_given_as_iterators_are_named_as_empty():
    with pytest.raises(EmbeddingShapeError, match="Lazy returned empty vectors for 2 text"):
        check_vectors([iter([]), iter([])], 2, "Lazy")


def test_vectors_given_as_iterators_are_read_like_lists():
    vectors = check_vectors([iter([1.0, 0.0]), iter([0.0, 2.0])], 2, "Lazy")
    assert vectors.tolist() == [[1.0, 0.0], [0.0, 2.0]]


def _numbers():
    rng = np.random.default_rng(19)
    yield rng.normal(size=(3, 1536)).tolist()
    yield (rng.normal(size=(2, 8)) * 1e300).tolist() + [[1e-320] * 8]
    yield [[1, 2**60 + 1, True, 3], [np.float32(0.1), np.int64(7), Decimal("0.1"), Fraction(1, 3)]]
    yield [[0.5, -0.0, 2.0]]


@pytest.mark.parametrize("vectors", list(_numbers()))
def test_lists_of_numbers_are_read_bit_for_bit_as_numpy_reads_them(vectors):
    expected = np.asarray(vectors, dtype=float)
    assert check_vectors(vectors, len(vectors), "Lists").tobytes() == expected.tobytes()


@pytest.mark.parametrize(
    "vectors",
    [
        [[1.0, 2.0], (3.0, 4.0)],
        [np.array([1.0, 2.0])],
        np.ones((2, 3)),
    ],
)
def test_other_replies_numpy_reads_are_read_as_numpy_reads_them(vectors):
    expected = np.asarray(vectors, dtype=float)
    assert check_vectors(vectors, len(expected), "Other").tobytes() == expected.tobytes()


@pytest.mark.parametrize("vectors", [[[1.0, 2.0], [3.0]], [[]]])
def test_replies_numpy_cannot_read_as_a_table_are_refused(vectors):
    with pytest.raises(EmbeddingShapeError):
        check_vectors(vectors, len(vectors), "Ragged")


def test_number_strings_and_none_are_read_as_numpy_reads_them():
    assert check_vectors([[1.0, "2.5"]], 1, "Text").tolist() == [[1.0, 2.5]]
    with pytest.raises(EmbeddingShapeError, match="NaN or infinite values for text 0 of 1"):
        check_vectors([[1.0, None]], 1, "Holes")
