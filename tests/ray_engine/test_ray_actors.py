"""Ray actors as a cluster runs them: rows that keep going past a slow one, and a cluster of
1-CPU nodes that loses a node mid-run. Each test starts Ray (or a two-node cluster) of its own
and shuts it down, so they need the ``[ray]`` extra and fail, never skip, without it.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from typing import Any

import pytest

try:
    import ray
    import ray.data
    from ray import cloudpickle
    from ray.cluster_utils import Cluster
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
except ImportError as exc:
    raise ImportError(
        f"these tests need the [ray] extra: pip install -e '.[test,local,ray]' ({exc})"
    ) from exc

from pyrate_limiter import GCRA, InMemoryStateStore, Rate

from ragas_relevancy_ext.cli.ray_score import SettingsMetric
from ragas_relevancy_ext.cli.setup import Settings, prepare
from ragas_relevancy_ext.ray import RayLimits, score_dataset
from ragas_relevancy_ext.testing.loopback import LoggedRequest, LoopbackServer, pretend_reply

# Helpers below are shipped to the actors by value: the actors cannot import this test file.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SLOW = "(slowly)"  # a response holding this is judged 3 s slower: its reply is 3,000 tokens
SLOW_PADDING = " " * 12_000  # longer (JSON allows the spaces), at a millisecond a token
TOKEN_SECONDS = 0.001


def rows(n: int, slow_every: int = 0) -> list[dict[str, str]]:
    """``n`` rows; with ``slow_every``, the last of every ``slow_every`` rows is judged slowly."""
    return [
        {
            "user_input": f"What about topic {i}?",
            "response": f"Topic {i} is handled this way"
            + (f" {SLOW}." if slow_every and i % slow_every == slow_every - 1 else "."),
        }
        for i in range(n)
    ]


def slow_reply(messages: list[dict[str, Any]]) -> str:
    """The pretend judge's reply, made 3,000 tokens longer for a row marked slow."""
    reply = pretend_reply(messages)
    return reply + SLOW_PADDING if SLOW in json.dumps(messages) else reply


def settings_for(server: LoopbackServer, concurrency: int) -> Settings:
    return Settings(
        judge="openai:loop-judge",
        base_url=server.openai_base_url,
        embeddings="openai:loop-embed",
        max_retries=0,
        concurrency=concurrency,
    )


def slow_or_not(server: LoopbackServer) -> tuple[list[LoggedRequest], list[LoggedRequest]]:
    """The judge requests the server saw, (for rows marked slow, for the others)."""
    chats = server.requests("chat")
    slow = [r for r in chats if SLOW in json.dumps(r.body)]
    return slow, [r for r in chats if r not in slow]


@pytest.fixture
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.mark.slow
def test_one_actor_scores_past_its_slow_rows_as_the_local_engine_does(local_ray):
    """32 rows, one in eight judged 3 s slower, in batches of 4 on one actor: no slow row holds
    back the others, so every other row's judge answer comes before the first slow one's, as
    on the local engine (an actor holding a batch back would answer its fast rows after the
    slow one's 3 s). The time each takes is ``benchmarks/ray_bench.py --slow-rows``'s table."""
    items = rows(32, slow_every=8)
    with LoopbackServer(
        width=32, reply=slow_reply, endpoint_token_latency={"chat": TOKEN_SECONDS}
    ) as server:
        settings = settings_for(server, concurrency=8)
        results = asyncio.run(prepare(settings).metric().abatch_score(items))
        assert not any(math.isnan(r.value) for r in results)
        local = slow_or_not(server)

        server.reset()
        one_block = ray.data.from_items(items, override_num_blocks=1)
        scored = score_dataset(
            one_block, SettingsMetric(settings), concurrency=1, batch_size=4, max_concurrency=8
        ).take_all()
        on_ray = slow_or_not(server)

    assert sorted(r["user_input"] for r in scored) == sorted(r["user_input"] for r in items)
    assert not any(math.isnan(r["score"]) for r in scored)
    for slow, fast in (local, on_ray):
        assert (len(slow), len(fast)) == (4, 28)
        first_slow_answer = min(r.finished or math.inf for r in slow)
        assert sum((r.finished or math.inf) < first_slow_answer for r in fast) == 28


CHAT = "https://api.example/v1/chat/completions key 1234"  # a limit's name: endpoint and key
PER_MINUTE = [Rate(10, 60_000)]


@ray.remote
def take(limits: RayLimits, name: str, requests: int, now_ms: int) -> int:
    """How many of ``requests`` asked together at ``now_ms`` (in one process) the limit called
    ``name`` lets go."""

    async def ask() -> int:
        store = limits.store(name)
        decisions = [await store.check(GCRA(), PER_MINUTE, now_ms, 1) for _ in range(requests)]
        return sum(decision.allowed for decision in decisions)

    return asyncio.run(ask())


@pytest.mark.slow
def test_a_key_s_limit_is_one_for_every_process_of_the_run(local_ray):
    """Four processes asking at once for one key get, together, what one process alone gets
    from one store; another key's limit is its own."""
    limits = RayLimits()
    now_ms = int(limits.now() * 1000)
    alone = InMemoryStateStore()
    one_process = sum(alone.check(GCRA(), PER_MINUTE, now_ms, 1).allowed for _ in range(4 * 9))
    four = ray.get([take.remote(limits, CHAT, 9, now_ms) for _ in range(4)])
    assert sum(four) == one_process < 4 * 9
    assert ray.get(take.remote(limits, CHAT.replace("1234", "5678"), 9, now_ms)) == 9


@pytest.mark.slow
def test_actors_on_one_key_keep_to_its_limit_together(local_ray):
    """Two actors, each with 8 calls in flight, and ``--rpm`` given once, against a provider
    that enforces it per second: the key's limit holds for both together (each keeping to it
    alone would send twice as much, and half would be refused), and no row is lost."""
    items = rows(96)  # 24 s at the limit: both actors start well within it, and take batches
    with LoopbackServer(width=32, rpm=240, per_second=True) as server:
        settings = Settings(**{**vars(settings_for(server, concurrency=8)), "rpm": 240})
        scored = score_dataset(
            ray.data.from_items(items), SettingsMetric(settings), concurrency=2, batch_size=4
        ).take_all()
        chats, refused = server.count("chat"), server.rate_limited("chat")
    assert not any(math.isnan(r["score"]) for r in scored) and len(scored) == len(items)
    assert refused <= 0.1 * chats, (refused, chats)  # a loaded machine bunches a few requests


@pytest.fixture
def one_cpu_node():
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.mark.slow
def test_the_default_actors_leave_a_one_cpu_node_its_cpu_for_ray_data_s_own_tasks(one_cpu_node):
    """Two actors of the default size on one 1-CPU node: Ray Data's own tasks (1 CPU each)
    still run, so every row is scored (a part of the CPU taken by each actor left them none,
    and the run waited forever)."""
    with LoopbackServer(width=32) as server:
        metric = SettingsMetric(settings_for(server, concurrency=4))
        scored = score_dataset(ray.data.from_items(rows(16)), metric, batch_size=4).take_all()
    assert len(scored) == 16 and not any(math.isnan(r["score"]) for r in scored)


@pytest.fixture
def two_one_cpu_nodes():
    """A cluster of two 1-CPU nodes whose second runs Ray Data's work while it is there
    (a soft affinity: once it has gone, the first takes over)."""
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    worker = cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False)
    context = ray.data.DataContext.get_current()
    spread, context.scheduling_strategy = (
        context.scheduling_strategy,
        NodeAffinitySchedulingStrategy(worker.node_id, soft=True),
    )
    context.enable_progress_bars = False
    yield cluster, worker
    context.scheduling_strategy = spread
    ray.shutdown()
    cluster.shutdown()


# The one way to pin Ray Data's work to a node in every Ray the package accepts: Ray 2.60
# deprecates it for label selectors, which Ray 2.44 does not have.
@pytest.mark.filterwarnings(
    "ignore:`DataContext.scheduling_strategy` is deprecated:DeprecationWarning"
)
@pytest.mark.slow
def test_a_cluster_of_one_cpu_nodes_that_loses_the_actors_node_mid_run_loses_no_row(
    two_one_cpu_nodes,
):
    """Two 1-CPU nodes, score_dataset's default actors, both on the second node, which is
    removed once a batch is back: the actors start again on the first, the rows they had under
    way are scored again, and every row comes back once. A judge answer takes a second and
    each actor asks one at a time, so the rows take about 24 s: the node goes mid-run."""
    cluster, worker = two_one_cpu_nodes
    items = rows(48)
    with LoopbackServer(width=32, endpoint_latency={"chat": 1.0}) as server:
        metric = SettingsMetric(settings_for(server, concurrency=1))
        scored = score_dataset(ray.data.from_items(items), metric, batch_size=4)
        back: list[dict[str, Any]] = []
        asked_before = len(items)  # no batch back: the node never went mid-run
        for batch in scored.iter_batches(batch_format="pyarrow", batch_size=None):
            if not back:
                cluster.remove_node(worker)
                asked_before = server.count("chat")
            back += batch.to_pylist()
        asked = server.count("chat")

    assert asked_before < len(items) <= asked  # the node went mid-run; every row was asked
    keys = [r["key"] for r in back]
    assert len(keys) == len(set(keys))  # no duplicate
    assert sorted(r["user_input"] for r in back) == sorted(r["user_input"] for r in items)
    assert not any(math.isnan(r["score"]) for r in back)
