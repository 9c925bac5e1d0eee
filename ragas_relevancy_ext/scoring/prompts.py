"""Probe prompts: stock (RAGAS's own), diverse (N probes in one call), sequential (one by one),
angles (one probe per call, each from another angle). Ours are RAGAS ``PydanticPrompt``s, so
RAGAS's prompt tools work on them; :mod:`.probe_modes` says which mode uses which."""

from __future__ import annotations

from pydantic import BaseModel, Field
from ragas.metrics._answer_relevance import (
    ResponseRelevanceInput,
    ResponseRelevanceOutput,
    ResponseRelevancePrompt,
)
from ragas.metrics.collections.answer_relevancy.util import (
    AnswerRelevanceInput,
    AnswerRelevanceOutput,
    AnswerRelevancePrompt,
)
from ragas.prompt import PydanticPrompt

__all__ = [
    "ANGLES",
    "AngleProbeInput",
    "AngleProbePrompt",
    "AngleProbeOutput",
    "AnswerRelevanceInput",
    "AnswerRelevanceOutput",
    "AnswerRelevancePrompt",
    "DiverseProbeInput",
    "DiverseProbeOutput",
    "DiverseProbePrompt",
    "ProbeItem",
    "ResponseRelevanceInput",
    "ResponseRelevanceOutput",
    "ResponseRelevancePrompt",
    "SequentialProbeInput",
    "SequentialProbePrompt",
]


# Output models carry no docstring: pydantic would put it into the JSON schema of every prompt.
class ProbeItem(BaseModel):
    question: str = Field(..., description="A question the answer replies to")
    noncommittal: int = Field(..., description="1 if the answer is evasive, else 0")


class DiverseProbeInput(BaseModel):
    """The response, how many probes to write, and probes already taken."""

    response: str = Field(..., description="The answer to write questions for")
    n: int = Field(..., description="How many questions to write")
    avoid: list[str] | None = Field(default=None, description="Questions already written")


class DiverseProbeOutput(BaseModel):
    probes: list[ProbeItem]


class DiverseProbePrompt(PydanticPrompt[DiverseProbeInput, DiverseProbeOutput]):
    """N distinct probes, each a guess at the whole question, in one judge call."""

    input_model = DiverseProbeInput
    output_model = DiverseProbeOutput
    instruction = (
        "Write n different questions that the given answer replies to, each with a "
        "noncommittal flag.\n"
        "Each question guesses the WHOLE question the answer replies to, not one detail of it; "
        "vary the wording between questions and never repeat one. Do not write any question "
        "listed in avoid. Write each question in the language of the answer.\n"
        'noncommittal is 1 if the answer is evasive, vague or ambiguous ("I don\'t know", '
        '"I\'m not sure", "It depends"), else 0; give every question the same flag.'
    )
    examples = [
        (
            DiverseProbeInput(
                response="Paris is the capital of France, known for its museums.", n=3
            ),
            DiverseProbeOutput(
                probes=[
                    ProbeItem(question="What is the capital of France?", noncommittal=0),
                    ProbeItem(question="Which city is France's capital?", noncommittal=0),
                    ProbeItem(question="Name the French capital city.", noncommittal=0),
                ]
            ),
        ),
        (
            DiverseProbeInput(response="I'm not sure when the store opens.", n=2),
            DiverseProbeOutput(
                probes=[
                    ProbeItem(question="When does the store open?", noncommittal=1),
                    ProbeItem(question="What are the store's opening hours?", noncommittal=1),
                ]
            ),
        ),
    ]


class SequentialProbeInput(BaseModel):
    """The response and the probes written so far."""

    response: str = Field(..., description="The answer to write a question for")
    previous_questions: list[str] | None = Field(
        default=None, description="Questions already written"
    )


class SequentialProbePrompt(PydanticPrompt[SequentialProbeInput, AnswerRelevanceOutput]):
    """One probe per call, each asked to differ from the probes so far."""

    input_model = SequentialProbeInput
    output_model = AnswerRelevanceOutput
    instruction = (
        AnswerRelevancePrompt.instruction
        + "\nThe question must guess the WHOLE question the answer replies to, and be worded "
        "differently from every question in previous_questions. Write it in the language of "
        "the answer."
    )
    examples = [
        (
            SequentialProbeInput(
                response="Albert Einstein was born in Germany.",
                previous_questions=["Where was Albert Einstein born?"],
            ),
            AnswerRelevanceOutput(question="In which country was Einstein born?", noncommittal=0),
        ),
        (
            SequentialProbeInput(response="I don't know what the warranty covers."),
            AnswerRelevanceOutput(question="What does the warranty cover?", noncommittal=1),
        ),
    ]


# Ways of wording the one question a response answers: the wording only, never what is asked.
ANGLES: tuple[str, ...] = (
    "plain: as the asker most likely typed it",
    "short: the fewest words that still ask all of it",
    "full: one complete sentence naming the subject",
    "newcomer: as someone new to the subject asks",
    "expert: in the field's own terms",
    "casual: as said aloud to a friend",
    "formal: as written to customer support",
    "request: starting with Can you or Could you",
    "reworded: other words for the main terms",
    "first person: about the asker's own case",
)


class AngleProbeInput(BaseModel):
    """The response, the angle to word the question from, and probes already taken."""

    response: str
    angle: str
    avoid: list[str] | None = None


class AngleProbeOutput(BaseModel):
    question: str
    noncommittal: int


class AngleProbePrompt(PydanticPrompt[AngleProbeInput, AngleProbeOutput]):
    """One probe per call, worded from the call's angle, so concurrent calls do not collapse;
    the angle sits in the input, so all prompts share everything before it."""

    input_model = AngleProbeInput
    output_model = AngleProbeOutput
    angles: tuple[str, ...] = ANGLES
    instruction = (
        "Guess the WHOLE question the given answer replies to, not one detail of it, and word "
        "it from the given angle: the angle changes the wording only. Never write a question "
        "listed in avoid. Write it in the language of the answer.\n"
        'noncommittal is 1 if the answer is evasive, vague or ambiguous ("I don\'t know", '
        '"I\'m not sure", "It depends"), else 0.'
    )
    examples = [
        (
            AngleProbeInput(
                response="Paris is the capital of France, known for its museums.",
                angle="short: the fewest words that still ask all of it",
            ),
            AngleProbeOutput(question="France's capital?", noncommittal=0),
        ),
        (
            AngleProbeInput(
                response="I'm not sure when the store opens.",
                angle="formal: as written to customer support",
                avoid=["When does the store open?"],
            ),
            AngleProbeOutput(question="Could you tell me your opening hours?", noncommittal=1),
        ),
    ]

    def to_string(self, data: AngleProbeInput | None = None) -> str:
        """The instruction, one-line examples, then the input: no schema block."""
        examples = "\n".join(
            f"Example input: {given.model_dump_json(exclude_none=True)}\n"
            f"Example output: {wanted.model_dump_json()}"
            for given, wanted in self.examples
        )
        return (
            f"{self.instruction}\n"
            'Reply with one JSON object only: {"question": string, "noncommittal": 0 or 1}.\n\n'
            f"{examples}\n\n"
            + (
                f"input: {data.model_dump_json(exclude_none=True)}\n"
                if data is not None
                else "Input: (None)\n"
            )
            + "Output: "
        )

    def angle(self, index: int) -> str:
        """The angle of call ``index`` (from 0); past the list, the list again, numbered."""
        angles = self.angles
        base = angles[index % len(angles)]
        return base if index < len(angles) else f"{base} (wording {index // len(angles) + 1})"
