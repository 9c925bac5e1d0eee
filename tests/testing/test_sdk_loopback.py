"""The real google-genai, openai and instructor SDKs against the loopback server on 127.0.0.1.

No SDK is mocked: each test points a real client at ``LoopbackServer`` and checks what went
over the wire and what the metric made of it.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import math
import threading
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types
from openai import AsyncOpenAI, OpenAI
from ragas.embeddings import GoogleEmbeddings, OpenAIEmbeddings
from ragas.llms import llm_factory
from ragas.metrics.collections import AnswerRelevancy as StockAnswerRelevancy

from ragas_relevancy_ext import (
    AnswerRelevancy,
    EmbeddingCallError,
    EmbeddingShapeError,
    OneTextPerCall,
    gemini_embeddings,
)
from ragas_relevancy_ext.scoring.embeddings import embed_texts
from ragas_relevancy_ext.testing.loopback import Fault, LoopbackServer
from ragas_relevancy_ext.testing.offline import ScriptedJudge, count_tokens

QUESTION = "Where is order A17 now?"
RESPONSE = "Order A17 left the Leeds warehouse on 3 March and arrives on Friday."
REPLIES = [
    ("When did order A17 leave the warehouse?", 0),
    ("Where is order A17 now?", 0),
    ("When does order A17 arrive?", 0),
]


@pytest.fixture
def server() -> Any:
    with LoopbackServer(width=64) as running:
        yield running


def genai_client(server: LoopbackServer, **http_options: Any) -> genai.Client:
    return genai.Client(
        api_key="test", http_options=types.HttpOptions(base_url=server.url, **http_options)
    )


def expected_score(server: LoopbackServer, question: str, probes: list[tuple[str, int]]) -> float:
    """Answer relevancy from the server's own per-text vectors, computed here with numpy."""
    q = np.asarray(server.vector(question))
    p = np.asarray([server.vector(text) for text, _ in probes])
    cosines = p @ q / (np.linalg.norm(p, axis=1) * np.linalg.norm(q))
    return float(cosines.mean()) * (0.0 if all(flag for _, flag in probes) else 1.0)


def chat_probes(server: LoopbackServer) -> list[tuple[str, int]]:
    """The (question, noncommittal) pairs the chat endpoint answered, in arrival order."""
    replies = [json.loads(reply) for r in server.requests("chat") for reply in r.replies]
    return [(reply["question"], reply["noncommittal"]) for reply in replies]


# --- the Gemini endpoint answers as gemini-embedding-2 does ---------------------------------


@pytest.mark.slow
def test_genai_sends_a_list_as_one_content_and_gets_one_vector(server: LoopbackServer) -> None:
    client = genai_client(server)
    texts = ["first text", "second text", "third text"]

    result = client.models.embed_content(model="gemini-embedding-2", contents=texts)
    assert len(result.embeddings) == 1
    sent = server.requests("gemini")[-1]
    assert sent.path.endswith("/models/gemini-embedding-2:batchEmbedContents")
    assert sent.texts == tuple(texts)
    assert len(sent.body["requests"]) == 1  # the SDK made the list ONE multi-part content
    assert sent.headers["x-goog-api-key"] == "test"

    result = asyncio.run(
        client.aio.models.embed_content(model="gemini-embedding-2", contents=texts)
    )
    assert len(result.embeddings) == 1
    assert server.count("gemini") == 2


@pytest.mark.slow
def test_one_vector_per_text_when_the_knob_is_off(server: LoopbackServer) -> None:
    server.gemini_one_vector = False
    texts = ["first text", "second text", "third text"]
    client = genai_client(server)  # keep a reference: a collected Client closes its session
    for model in ("gemini-embedding-2", "gemini-embedding-001"):
        result = client.models.embed_content(model=model, contents=texts)
        assert [e.values for e in result.embeddings] == [server.vector(t) for t in texts]


@pytest.mark.slow
def test_stock_metric_with_plain_google_embeddings_breaks() -> None:
    with LoopbackServer(width=3072) as server:
        embeddings = GoogleEmbeddings(client=genai_client(server), model="gemini-embedding-2")
        metric = StockAnswerRelevancy(llm=ScriptedJudge(REPLIES), embeddings=embeddings)
        with pytest.raises(ValueError, match=r"shapes \(3,1024\) and \(3072,1\) not aligned"):
            metric.score(user_input=QUESTION, response=RESPONSE)


@pytest.mark.slow
def test_our_metric_with_plain_google_embeddings_names_the_fix(server: LoopbackServer) -> None:
    embeddings = GoogleEmbeddings(client=genai_client(server), model="gemini-embedding-2")
    metric = AnswerRelevancy(
        llm=ScriptedJudge(REPLIES), embeddings=embeddings, probe_prompt="stock"
    )
    with pytest.raises(EmbeddingShapeError, match="1 vector.*for 3 text.*OneTextPerCall"):
        metric.score(user_input=QUESTION, response=RESPONSE)


@pytest.mark.slow
def test_gemini_one_text_per_call_scores_as_per_text_embedding(server: LoopbackServer) -> None:
    judge = ScriptedJudge(REPLIES)
    metric = AnswerRelevancy(
        llm=judge,
        embeddings=gemini_embeddings(client=genai_client(server)),
        strictness=3,
        probe_prompt="stock",
    )

    result = metric.score(user_input=QUESTION, response=RESPONSE)

    assert result.value == pytest.approx(expected_score(server, QUESTION, REPLIES), rel=1e-12)
    sent = server.requests("gemini")
    assert len(sent) == len(REPLIES) + 1
    assert all(len(r.texts) == 1 for r in sent)
    assert sorted(r.texts[0] for r in sent) == sorted([QUESTION, *(q for q, _ in REPLIES)])
    assert all(r.model == "gemini-embedding-2" for r in sent)
    assert judge.calls == 3


@pytest.mark.slow
def test_gemini_max_concurrency_caps_requests_in_flight(server: LoopbackServer) -> None:
    server.latency = 0.05
    wrapped = gemini_embeddings(client=genai_client(server), max_concurrency=2)
    texts = [f"text number {i}" for i in range(6)]
    assert wrapped.embed_texts(texts) == [server.vector(t) for t in texts]
    assert server.peak_in_flight == 2
    assert server.count("gemini") == 6


# --- the OpenAI endpoints, through openai and instructor ------------------------------------


@pytest.mark.slow
def test_openai_end_to_end_through_llm_factory_and_openai_embeddings(
    server: LoopbackServer,
) -> None:
    async def scores() -> tuple[float, float]:
        client = AsyncOpenAI(base_url=server.openai_base_url, api_key="test")
        llm = llm_factory("gpt-4o-mini", provider="openai", client=client)
        embeddings = OpenAIEmbeddings(client=client, model="text-embedding-3-small")
        ours = AnswerRelevancy(
            llm=llm, embeddings=OneTextPerCall(embeddings), strictness=3, probe_prompt="stock"
        )
        result = await ours.ascore(user_input=QUESTION, response=RESPONSE)
        stock = StockAnswerRelevancy(llm=llm, embeddings=embeddings, strictness=3)
        return result.value, (await stock.ascore(user_input=QUESTION, response=RESPONSE)).value

    ours, stock = asyncio.run(scores())

    probes = chat_probes(server)[:3]
    assert ours == pytest.approx(expected_score(server, QUESTION, probes), rel=1e-12)
    assert stock == pytest.approx(ours, rel=1e-12)  # OpenAI answers per text: stock agrees
    first = server.requests("embeddings")[:4]  # ours: one text per request
    assert all(isinstance(r.body["input"], str) for r in first)
    assert sorted(r.texts[0] for r in first) == sorted([QUESTION, *(q for q, _ in probes)])
    assert server.counts == {"chat": 6, "embeddings": 6}  # stock batches its 3 probes: 4 + 2
    chat = server.requests("chat")[0].body
    assert chat["model"] == "gpt-4o-mini"
    assert chat["response_format"] == {"type": "json_object"}  # instructor's JSON mode


@pytest.mark.slow
def test_instructor_wraps_no_model_per_call_for_ours_and_sends_stocks_bytes(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # instructor before 1.15 builds the output model's schema class on every call, in
    # process_response; ours hands it one built once. Later ones build no class per call.
    made: list[str] = []
    try:
        import instructor.process_response as process_response
    except ImportError:
        process_response = None
    if process_response is not None:
        wrap = process_response.openai_schema

        def counted(model: Any) -> Any:
            made.append(model.__name__)
            return wrap(model)

        monkeypatch.setattr(process_response, "openai_schema", counted)

    async def run(metric_class: Any, **options: Any) -> None:
        client = AsyncOpenAI(base_url=server.openai_base_url, api_key="test")
        llm = llm_factory("gpt-4o-mini", provider="openai", client=client)
        embeddings = OpenAIEmbeddings(client=client, model="text-embedding-3-small")
        metric = metric_class(llm=llm, embeddings=embeddings, strictness=3, **options)
        await metric.ascore(user_input=QUESTION, response=RESPONSE)

    asyncio.run(run(AnswerRelevancy, probe_prompt="stock"))
    assert made == []  # instructor built no class for our 3 calls
    asyncio.run(run(StockAnswerRelevancy))
    assert len(made) == (3 if process_response is not None else 0)  # one per call for stock's
    chat = [json.dumps(r.body, sort_keys=True) for r in server.requests("chat")]
    assert len(chat) == 6 and chat[:3] == chat[3:]  # the same request bodies as stock's


@pytest.mark.slow
def test_a_custom_reply_function_drives_the_judge(server: LoopbackServer) -> None:
    seen: list[list[dict[str, Any]]] = []

    def evasive(messages: list[dict[str, Any]]) -> str:
        seen.append(messages)
        return json.dumps({"question": "Where is order A17?", "noncommittal": 1})

    server.reply = evasive

    async def score() -> float:
        client = AsyncOpenAI(base_url=server.openai_base_url, api_key="test")
        metric = AnswerRelevancy(
            llm=llm_factory("gpt-4o-mini", provider="openai", client=client),
            embeddings=OneTextPerCall(OpenAIEmbeddings(client=client)),
            probe_prompt="stock",
        )
        return (await metric.ascore(user_input=QUESTION, response="I am not sure.")).value

    assert asyncio.run(score()) == 0.0
    assert len(seen) == 3
    assert "I am not sure." in seen[0][-1]["content"]


@pytest.mark.slow
def test_chat_usage_counts_characters_over_four(server: LoopbackServer) -> None:
    server.reply = lambda messages: '{"question": "Q?", "noncommittal": 0}'
    system, user = "You answer in JSON.", "input: {}\nOutput: "
    reply = OpenAI(base_url=server.openai_base_url, api_key="test").chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        n=2,
    )
    assert [c.message.content for c in reply.choices] == [server.reply([])] * 2
    assert reply.usage.prompt_tokens == math.ceil(len(system + user) / 4)
    assert reply.usage.completion_tokens == 2 * count_tokens(server.reply([]))
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


@pytest.mark.slow
def test_openai_embeddings_match_in_base64_and_float(server: LoopbackServer) -> None:
    client = OpenAI(base_url=server.openai_base_url, api_key="test")
    texts = ["one text", "another text here"]
    want = [server.vector(t) for t in texts]

    default = client.embeddings.create(input=texts, model="text-embedding-3-small")
    assert server.requests("embeddings")[-1].body["encoding_format"] == "base64"
    assert [d.embedding for d in default.data] == want  # the SDK decoded float32 base64
    floats = client.embeddings.create(input=texts, model="m", encoding_format="float")
    assert [d.embedding for d in floats.data] == want
    raw = client.embeddings.create(input=texts, model="m", encoding_format="base64")
    decoded = [np.frombuffer(base64.b64decode(d.embedding), "<f4").tolist() for d in raw.data]
    assert decoded == want
    assert floats.usage.prompt_tokens == sum(count_tokens(t) for t in texts)


@pytest.mark.slow
def test_a_synchronous_openai_client_works_one_text_per_call(server: LoopbackServer) -> None:
    client = OpenAI(base_url=server.openai_base_url, api_key="test")
    wrapped = OneTextPerCall(OpenAIEmbeddings(client=client))
    texts = ["alpha text", "beta text", "gamma text"]
    assert wrapped.embed_texts(texts) == [server.vector(t) for t in texts]
    assert server.count("embeddings") == 3


def test_the_log_finds_a_header_whatever_case_the_client_writes_its_name(
    server: LoopbackServer,
) -> None:
    # openai 1.x sends "Authorization", openai 3.x (on httpx2) "authorization"
    url = urlsplit(server.openai_base_url)
    body = json.dumps({"model": "loop-embed", "input": "hi"})
    for name in ("Authorization", "authorization"):
        connection = http.client.HTTPConnection(url.hostname, url.port)
        connection.request("POST", f"{url.path}/embeddings", body, {name: "Bearer k"})
        assert connection.getresponse().status == 200
        connection.close()
    assert [r.headers.get("authorization") for r in server.log] == ["Bearer k", "Bearer k"]


# --- ragas.evaluate with a legacy metric ----------------------------------------------------


@pytest.mark.slow
def test_ragas_evaluate_with_the_legacy_metric_and_gemini_one_text_per_call(
    server: LoopbackServer,
) -> None:
    from langchain_openai import ChatOpenAI
    from ragas import EvaluationDataset, evaluate
    from ragas.llms import LangchainLLMWrapper
    from ragas.metrics import ResponseRelevancy

    llm = LangchainLLMWrapper(
        ChatOpenAI(model="gpt-4o-mini", base_url=server.openai_base_url, api_key="test")
    )
    data = EvaluationDataset.from_list([{"user_input": QUESTION, "response": RESPONSE}])
    result = evaluate(
        data,
        metrics=[ResponseRelevancy()],
        llm=llm,
        embeddings=gemini_embeddings(client=genai_client(server)),
        show_progress=False,
    )

    probes = chat_probes(server)
    assert len(probes) == 3  # one chat request with n=3
    score = result.to_pandas()["answer_relevancy"].iloc[0]
    assert score == pytest.approx(expected_score(server, QUESTION, probes), rel=1e-12)
    assert server.count("gemini") == 4
    assert all(len(r.texts) == 1 for r in server.requests("gemini"))


# --- faults and latency ---------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("rate_limit", openai.RateLimitError),
        ("server_error", openai.InternalServerError),
        ("hang", openai.APITimeoutError),
        ("malformed", ValueError),
    ],
)
def test_openai_sdk_sees_each_transport_fault(
    server: LoopbackServer, kind: str, error: type[Exception]
) -> None:
    server.faults = [Fault(kind, at=(1,))]
    client = OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0, timeout=0.3)
    with pytest.raises(error) as caught:
        client.embeddings.create(input="text", model="m")
    if kind == "rate_limit":
        assert caught.value.response.headers["retry-after"] == "1"
    assert client.embeddings.create(input="text", model="m").data[0].embedding == (
        server.vector("text")
    )
    assert [r.fault for r in server.log] == [kind, None]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "code"), [("rate_limit", 429), ("server_error", 500), ("malformed", None)]
)
def test_genai_sdk_sees_each_transport_fault(
    server: LoopbackServer, kind: str, code: int | None
) -> None:
    server.faults = [Fault(kind, at=(1,), endpoint="gemini")]
    client = genai_client(server)
    with pytest.raises((genai_errors.APIError, ValueError)) as caught:
        client.models.embed_content(model="gemini-embedding-2", contents="text")
    if code is not None:
        assert caught.value.code == code
    assert client.models.embed_content(model="gemini-embedding-2", contents="text").embeddings


@pytest.mark.slow
def test_a_hung_gemini_request_times_out_and_stop_releases_it() -> None:
    hang = 600.0  # far longer than any run: only stop() can end it
    server = LoopbackServer(faults=[Fault("hang", at=(1,))], hang_seconds=hang).start()
    stopper = threading.Thread(target=server.stop, daemon=True)
    try:
        client = genai_client(server, timeout=300)  # milliseconds
        with pytest.raises(Exception, match="(?i)timed out|timeout"):  # the client gave up
            client.models.embed_content(model="gemini-embedding-2", contents="text")
        assert server.in_flight == 1  # while the server still holds the request
    finally:
        stopper.start()
        stopper.join(timeout=hang / 2)  # not a timing check: without the release, 600 s
    assert not stopper.is_alive() and server.in_flight == 0


@pytest.mark.slow
def test_vector_faults_fail_the_checks(server: LoopbackServer) -> None:
    texts = ["alpha text", "beta text", "gamma text"]
    client = OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
    one_by_one = OneTextPerCall(OpenAIEmbeddings(client=client), max_concurrency=1)
    # with one call at a time, request n carries text n-1

    async def batch() -> Any:
        aclient = AsyncOpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
        return await embed_texts(OpenAIEmbeddings(client=aclient), texts)

    server.faults = [Fault("wrong_count", at=(1,), endpoint="embeddings")]
    with pytest.raises(EmbeddingShapeError, match=r"4 vector\(s\).*for 3 text\(s\)"):
        asyncio.run(batch())

    server.reset()
    server.faults = [Fault("wrong_size", at=(2,), endpoint="embeddings")]
    with pytest.raises(EmbeddingShapeError, match=r"different lengths \[64, 32, 64\]"):
        one_by_one.embed_texts(texts)

    server.reset()
    server.faults = [Fault("nan", at=(3,), endpoint="embeddings")]
    with pytest.raises(EmbeddingShapeError, match="NaN or infinite values for text 2 of 3"):
        one_by_one.embed_texts(texts)


@pytest.mark.slow
def test_a_provider_error_names_the_text_index(server: LoopbackServer) -> None:
    server.faults = [Fault("server_error", at=(2,), endpoint="embeddings")]

    async def embed() -> Any:
        client = AsyncOpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
        wrapped = OneTextPerCall(OpenAIEmbeddings(client=client), max_concurrency=1)
        return await wrapped.aembed_texts(["alpha text", "beta text", "gamma text"])

    with pytest.raises(EmbeddingCallError, match="OpenAIEmbeddings failed on text 1 of 3"):
        asyncio.run(embed())


@pytest.mark.slow
def test_fractional_faults_are_seeded() -> None:
    def outcomes(seed: int) -> list[str | None]:
        with LoopbackServer(faults=[Fault("server_error", fraction=0.5)], seed=seed) as server:
            client = OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
            for _ in range(20):
                try:
                    client.embeddings.create(input="text", model="m")
                except openai.InternalServerError:
                    pass
            return [r.fault for r in server.log]

    first = outcomes(seed=3)
    assert first == outcomes(seed=3)
    assert 0 < first.count("server_error") < 20


@pytest.mark.slow
def test_latency_delays_every_answer(server: LoopbackServer) -> None:
    server.latency = 0.2
    client = OpenAI(base_url=server.openai_base_url, api_key="test")
    client.embeddings.create(input="text", model="m")
    (entry,) = server.requests("embeddings")
    assert entry.waited == pytest.approx(0.2)  # what the server held back, counted by it
    assert entry.status == 200


@pytest.mark.slow
def test_token_latency_waits_per_token_of_the_longest_reply(server: LoopbackServer) -> None:
    reply = '{"question": "Where is order A17 now?", "noncommittal": 0}'
    server.reply = lambda messages: reply
    server.token_latency = 0.001
    server.endpoint_token_latency = {"chat": 0.01}
    client = OpenAI(base_url=server.openai_base_url, api_key="test")
    client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "input: {}"}], n=3
    )
    client.embeddings.create(input="text", model="m")
    chat, embedding = server.requests("chat")[0], server.requests("embeddings")[0]
    # n choices are written side by side: one reply's tokens count, not the three's
    expected = 0.01 * count_tokens(reply)
    assert server.writing_seconds(chat) == pytest.approx(expected)  # not a timing: computed
    assert chat.completion_tokens == 3 * count_tokens(reply)
    assert chat.waited == pytest.approx(expected)  # the server held the answer that long
    assert server.writing_seconds(embedding) == 0.0  # not a timing: no tokens to write
    assert embedding.waited == 0.0


@pytest.mark.slow
def test_the_command_line_sets_the_token_latency(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragas_relevancy_ext.testing import loopback

    made: list[LoopbackServer] = []

    class Stop(Exception):
        pass

    def start(self: LoopbackServer) -> LoopbackServer:
        made.append(self)
        raise Stop

    monkeypatch.setattr(LoopbackServer, "start", start)
    with pytest.raises(Stop):
        loopback.main(
            ["--latency", "0.1", "--token-latency", "0.02", "--chat-token-latency", "0.01"]
        )
    assert (made[0].latency, made[0].token_latency) == (0.1, 0.02)
    assert made[0].endpoint_token_latency == {"chat": 0.01}


def test_fault_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="fault kind"):
        Fault("explode")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fraction"):
        Fault("hang", fraction=1.5)
    with pytest.raises(ValueError, match="not of chat"):
        Fault("nan", endpoint="chat")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["stock", "diverse"])
def test_max_concurrency_bounds_requests_at_the_server_through_one_text_per_call(
    server: LoopbackServer, mode: str
) -> None:
    server.latency = 0.02

    async def run() -> None:
        client = AsyncOpenAI(base_url=server.openai_base_url, api_key="test")
        metric = AnswerRelevancy(
            llm=llm_factory("gpt-4o-mini", provider="openai", client=client),
            embeddings=OneTextPerCall(OpenAIEmbeddings(client=client), max_concurrency=8),
            strictness=10,
            probe_prompt=mode,
            max_concurrency=4,
        )
        rows = [{"user_input": f"{QUESTION} ({i})", "response": RESPONSE} for i in range(8)]
        results = await metric.abatch_score(rows)
        assert all(r.report.error is None for r in results)

    asyncio.run(run())
    assert server.count("embeddings") >= 8 * 11  # one request per text
    assert server.peak_in_flight == 4


@pytest.mark.slow
def test_gemini_embeddings_built_with_a_timeout_give_up_on_a_hung_request(
    server: LoopbackServer,
) -> None:
    """``--timeout`` reaches google-genai's client: a held request fails as a timeout."""
    from ragas_relevancy_ext.cli.providers import build_embeddings

    server.faults = [Fault("hang", at=(1,), endpoint="gemini")]
    server.hang_seconds = 30.0  # without the timeout, the request ends only then, unanswered
    built = build_embeddings(
        "gemini:gemini-embedding-2",
        base_url=server.url,
        timeout=0.5,
        environ={"GEMINI_API_KEY": "test"},
    )
    with pytest.raises(EmbeddingCallError) as caught:
        asyncio.run(built.value.aembed_text("text"))
    chain, error = [], caught.value
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert any(isinstance(e, TimeoutError) for e in chain), chain
    assert asyncio.run(built.value.aembed_text("text")) == pytest.approx(server.vector("text"))
    assert [r.fault for r in server.log] == ["hang", None]
