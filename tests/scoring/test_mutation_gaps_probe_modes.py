"""The prompt text angles mode sends: one call per probe, each worded from its own angle and
carrying the response (mutation testing found the text sent in this mode unchecked)."""

from __future__ import annotations

from ragas_relevancy_ext import AnswerRelevancy
from ragas_relevancy_ext.scoring.prompts import AngleProbePrompt
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge

RESPONSE = "Refunds reach your card within five working days of the return."


def test_angles_mode_sends_one_prompt_per_probe_each_from_its_own_angle() -> None:
    judge = PretendJudge()
    metric = AnswerRelevancy(
        llm=judge, embeddings=HashEmbeddings(), strictness=3, probe_prompt="angles"
    )
    metric.score(user_input="How long do refunds take?", response=RESPONSE)
    angles = [AngleProbePrompt().angle(i) for i in range(3)]
    assert len(set(angles)) == 3
    assert len(judge.prompts) == 3
    # the sample's own input is the prompt's last part (after the examples)
    inputs = [prompt.rsplit("input: ", 1)[1] for prompt in judge.prompts]
    assert all(RESPONSE in text for text in inputs)
    assert sorted(angle for angle in angles for text in inputs if angle in text) == sorted(angles)
