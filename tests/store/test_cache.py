"""The judge-reply cache: a re-run reuses every probe and asks the judge nothing."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest
from pydantic import BaseModel

from ragas_relevancy_ext import AnswerRelevancy
from ragas_relevancy_ext.scoring.prompts import AnswerRelevanceOutput
from ragas_relevancy_ext.store.cache import CachedJudge, disk_store, reply_key
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge, ScriptedJudge

ROWS = [
    {"user_input": "Where is order A17?", "response": "Order A17 shipped on 3 March."},
    {"user_input": "Can I pay by card?", "response": "Yes, we take Visa and Mastercard."},
]


def run(judge, rows=ROWS, embeddings=None, probe_prompt="stock"):
    metric = AnswerRelevancy(
        llm=judge,
        embeddings=embeddings or HashEmbeddings(),
        strictness=3,
        probe_prompt=probe_prompt,
    )
    return asyncio.run(metric.abatch_score(rows))


def probes_of(results):
    return [[(p.question, p.noncommittal) for p in r.report.probes] for r in results]


@pytest.mark.parametrize("probe_prompt", ["stock", "sequential", "diverse", "angles"])
def test_rerun_with_other_embeddings_makes_no_judge_call(tmp_path, probe_prompt):
    first_judge = PretendJudge()
    first = run(
        CachedJudge(first_judge, disk_store(tmp_path), "offline"), probe_prompt=probe_prompt
    )
    assert first_judge.calls > 0

    again_judge = PretendJudge()
    cached = CachedJudge(again_judge, disk_store(tmp_path), "offline")
    again = run(cached, embeddings=HashEmbeddings(width=64), probe_prompt=probe_prompt)
    assert again_judge.calls == 0
    assert (cached.hits, cached.misses) == (first_judge.calls, 0)
    assert probes_of(again) == probes_of(first)
    assert [r.value for r in again] != [r.value for r in first]  # other embeddings, other cosines


def test_stock_mode_keeps_n_independent_replies_for_one_prompt(tmp_path):
    replies = [("When did A17 ship?", 0), ("Has A17 shipped?", 0), ("Where is A17?", 1)]
    row = ROWS[:1]
    first = run(CachedJudge(ScriptedJudge(replies), disk_store(tmp_path), "judge-x"), row)
    assert probes_of(first) == [replies]

    empty = ScriptedJudge([])  # would raise if asked
    again = run(CachedJudge(empty, disk_store(tmp_path), "judge-x"), row)
    assert empty.calls == 0
    assert probes_of(again) == [replies]
    assert again[0].value == first[0].value


def test_started_over_a_judge_answers_a_prompt_asked_again_with_its_first_reply(tmp_path):
    replies = [("When did A17 ship?", 0), ("Has A17 shipped?", 0), ("Where is A17?", 1)]
    cached = CachedJudge(ScriptedJudge(replies * 2), disk_store(tmp_path), "judge-x")
    row = ROWS[:1]
    first = run(cached, row)
    cached.start_over()  # the same prompts again: the replies stored for the first askings
    again = run(cached, row)
    assert probes_of(again) == probes_of(first) == [replies]
    assert (cached.hits, cached.misses) == (3, 3)


def test_other_judge_models_do_not_share_replies(tmp_path):
    run(CachedJudge(PretendJudge(), disk_store(tmp_path), "model-a"), ROWS[:1])
    other = PretendJudge()
    run(CachedJudge(other, disk_store(tmp_path), "model-b"), ROWS[:1])
    assert other.calls == 3


def test_failed_calls_are_not_cached(tmp_path):
    class Down(PretendJudge):
        async def agenerate(self, prompt, response_model):
            self.prompts.append(prompt)
            raise ConnectionError("judge unreachable")

    down = run(CachedJudge(Down(), disk_store(tmp_path), "m"), ROWS[:1])
    assert "judge unreachable" in down[0].report.reason
    judge = PretendJudge()
    run(CachedJudge(judge, disk_store(tmp_path), "m"), ROWS[:1])
    assert judge.calls == 3


def test_key_depends_on_model_prompt_output_and_occurrence():
    keys = {
        reply_key("m", "p", AnswerRelevanceOutput, 0),
        reply_key("m", "p", AnswerRelevanceOutput, 1),
        reply_key("n", "p", AnswerRelevanceOutput, 0),
        reply_key("m", "q", AnswerRelevanceOutput, 0),
    }
    assert len(keys) == 4
    assert reply_key("m", "p", AnswerRelevanceOutput, 0) == reply_key(
        "m", "p", AnswerRelevanceOutput, 0
    )


def test_key_depends_on_the_output_model():
    class Other(AnswerRelevanceOutput):
        pass

    assert reply_key("m", "p", AnswerRelevanceOutput, 0) != reply_key("m", "p", Other, 0)


def test_one_prompt_asked_for_two_output_models_gets_two_replies(tmp_path):
    from ragas_relevancy_ext.scoring.prompts import DiverseProbeOutput

    judge = ScriptedJudge([("Where is A17?", 0), [("When did A17 ship?", 0)]])
    cached = CachedJudge(judge, disk_store(tmp_path), "m")
    one = asyncio.run(cached.agenerate("same prompt", AnswerRelevanceOutput))
    listed = asyncio.run(cached.agenerate("same prompt", DiverseProbeOutput))
    assert judge.calls == 2 and cached.misses == 2
    assert one.question == "Where is A17?"
    assert [p.question for p in listed.probes] == ["When did A17 ship?"]


def test_a_stale_reply_is_asked_again_and_replaced(tmp_path):
    # a reply stored under an output model of the same name but another shape (an older
    # version of the model) does not parse any more: the judge is asked again
    class AnswerRelevanceOutput(BaseModel):  # the old shape, same name, so the same key
        text: str

    old_judge = ScriptedJudge([{"text": "an old reply"}])
    asyncio.run(
        CachedJudge(old_judge, disk_store(tmp_path), "m").agenerate("prompt", AnswerRelevanceOutput)
    )
    from ragas_relevancy_ext.scoring.prompts import AnswerRelevanceOutput as Current

    judge = ScriptedJudge([("Where is A17?", 1)])
    cached = CachedJudge(judge, disk_store(tmp_path), "m")
    reply = asyncio.run(cached.agenerate("prompt", Current))
    assert (reply.question, reply.noncommittal) == ("Where is A17?", 1)
    assert (judge.calls, cached.hits, cached.misses) == (1, 0, 1)

    again = CachedJudge(ScriptedJudge([]), disk_store(tmp_path), "m")
    assert asyncio.run(again.agenerate("prompt", Current)) == reply
    assert (again.hits, again.misses) == (1, 0)


def test_the_key_of_a_reply_stays_the_same_from_version_to_version():
    # a disk cache written now must be found by the next version: this is today's key, from
    # [KEY_VERSION, model, output model's name, prompt, occurrence] as JSON, non-ASCII as is
    key = reply_key("openai:gpt-4o-mini", "Où est la commande A17 ?", AnswerRelevanceOutput, 2)
    assert key == (
        "ragas-relevancy-ext:05b0f0588452b9b4253fd663c3229cec7708bac9c391d956d3459d8ce01cf73c"
    )


def _in_a_forked_child(work) -> int:
    """Run ``work()`` in a forked child, killed after 30 s; its exit code (0: it returned True)."""
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        code = 1
        try:
            signal.alarm(30)  # a hang ends the child, and the test fails on its code
            code = 0 if work() else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_forked_child_writes_the_cache_with_a_writer_of_its_own():
    from ragas_relevancy_ext.store import cache

    def writer() -> Any:
        return cache._writer(os.getpid())  # as CachedJudge finds the writer of its process

    writer().submit(int).result()  # the parent's writer thread exists: the child has none
    assert _in_a_forked_child(lambda: writer().submit(int, "7").result() == 7) == 0


def test_a_forked_child_loads_the_language_model_a_parent_thread_was_loading():
    from ragas_relevancy_ext.scoring import languages

    with languages._LOADING:  # as a parent thread loading the model at the fork holds it
        code = _in_a_forked_child(lambda: languages.detect_language("Where is my order?") == "en")
    assert code == 0
