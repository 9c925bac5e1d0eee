"""Scheduler's edges that mutation testing found unchecked, driven through its public methods
with a fake clock and sleep: how rate limits are parsed, kept to and learned, and how slots are
handed out, held back and refused. Nothing here reads the wall clock; waits are counted."""

from __future__ import annotations

import pytest

from ragas_relevancy_ext.run.scheduler import RateLimits


def test_rate_limits_share_divides_each_given_limit() -> None:
    """Each part's share is the limit divided by the parts, at least one; None stays None."""
    assert RateLimits(rpm=10, tpm=7).share(3) == RateLimits(rpm=3, tpm=2)
    assert RateLimits(embedding_rpm=2).share(5) == RateLimits(embedding_rpm=1)


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "3"])
def test_rate_limits_refuse_what_is_not_a_whole_number_of_one_or_more(value: object) -> None:
    """A limit of 0, a bool, a float or text is refused at construction."""
    with pytest.raises(ValueError, match="rpm"):
        RateLimits(rpm=value)  # type: ignore[arg-type]
