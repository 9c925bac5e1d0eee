"""Per-sample cost, ours against stock in the same run: requests per sample, wall time, CPU.

Two parts:

1. Requests and wall time: samples on the loopback OpenAI-compatible server (a child process)
   at concurrency 16, through the real openai SDK, judge latency as given; stock collections
   ``AnswerRelevancy`` (strictness 3) against ours (diverse) with embedding requests shared
   across samples and without. Once with a distinct question per row, once with every row
   repeating one of 50 questions.
2. CPU per sample with in-process stand-ins (``PretendJudge``, ``HashEmbeddings`` of the width
   shown; no server, no latency) at vector widths 64, 1536 and 3072: each metric's process time
   less a replay of the stand-in calls it made, i.e. the metric's own overhead. The stand-ins
   answer from memory after a first untimed run, so what is subtracted is small and the
   difference is not lost in their noise; the median of ``--repeats`` runs counts. "ours,
   traced" is "ours, shared requests" with a tracer provider set (OpenTelemetry SDK, batch span
   processor, in-memory exporter): a span per sample with its probe events, per judge call and
   per embeddings request, exported in the background thread and flushed at the end of the run
   (its CPU counted); every other row runs with no tracer provider, as a user without one.

Usage::

    python benchmarks/per_sample.py                 # 1,000 samples, 2,000 for CPU
    python benchmarks/per_sample.py --quick         # small sizes
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import (  # noqa: E402
    EMBED_MODEL,
    JUDGE_MODEL,
    RemoteServer,
    client,
    load_rows,
    quiet_ragas,
)
from ragas.embeddings import OpenAIEmbeddings  # noqa: E402
from ragas.llms import llm_factory  # noqa: E402
from ragas.metrics.collections import AnswerRelevancy as StockAnswerRelevancy  # noqa: E402

from ragas_relevancy_ext import AnswerRelevancy  # noqa: E402
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge  # noqa: E402

VARIANTS = ("stock", "ours, shared requests", "ours, 2 requests/sample")
TRACED = "ours, traced"
CPU_VARIANTS = (*VARIANTS, TRACED)  # part 2 also measures tracing on
WIDTHS = (64, 1536, 3072)
REPEATED_QUESTIONS = 50


def metric(variant: str, llm: Any, embeddings: Any, concurrency: int) -> Any:
    """Stock collections AnswerRelevancy, or ours (diverse) with or without shared requests."""
    if variant == "stock":
        return StockAnswerRelevancy(llm=llm, embeddings=embeddings, strictness=3)
    return AnswerRelevancy(
        llm=llm,
        embeddings=embeddings,
        strictness=3,
        max_concurrency=concurrency,
        batch_embeddings=variant != VARIANTS[2],
    )


def rows_for(samples: int, repeated: bool) -> list[dict[str, str]]:
    rows = load_rows(samples)
    if repeated:
        base = load_rows(REPEATED_QUESTIONS)
        for i, row in enumerate(rows):
            row["user_input"] = base[i % REPEATED_QUESTIONS]["user_input"]
    return rows


async def server_run(
    server: RemoteServer, variant: str, rows: list[dict[str, str]], concurrency: int
) -> tuple[float, int]:
    """Seconds for ``rows`` and NaN count; stock gets chunks of ``concurrency`` samples (its
    ``abatch_score`` starts every sample it is given at once), ours all rows."""
    api = client(server)
    llm = llm_factory(JUDGE_MODEL, provider="openai", client=api)
    scorer = metric(variant, llm, OpenAIEmbeddings(client=api, model=EMBED_MODEL), concurrency)
    await scorer.abatch_score(rows[:concurrency])  # warm-up: imports, first connections
    server.reset()
    size = concurrency if variant == "stock" else len(rows)
    started = time.perf_counter()
    results = []
    for start in range(0, len(rows), size):
        results.extend(await scorer.abatch_score(rows[start : start + size]))
    return time.perf_counter() - started, sum(1 for r in results if r.value != r.value)


def part_requests(samples: int, concurrency: int, latency: float) -> None:
    print(
        f"\n1. {samples} samples on the loopback server, concurrency {concurrency}, judge "
        f"{latency * 1000:.0f} ms/request, embeddings 0 ms; strictness 3, ours diverse."
    )
    header = (
        f"{'questions':<22} {'metric':<24} {'embed req/sample':>16} {'judge req/sample':>16} "
        f"{'wall s':>7} {'ratio':>6} {'NaN':>4}"
    )
    print(header)
    print("-" * len(header))
    with RemoteServer() as server:
        server.judge_latency(latency)
        for repeated in (False, True):
            rows = rows_for(samples, repeated)
            label = f"{REPEATED_QUESTIONS} repeated" if repeated else "distinct"
            base = None
            for variant in VARIANTS:
                seconds, nan = asyncio.run(server_run(server, variant, rows, concurrency))
                usage = server.usage()
                base = base or seconds
                print(
                    f"{label:<22} {variant:<24} "
                    f"{usage['embeddings']['requests'] / samples:>16.3f} "
                    f"{usage['chat']['requests'] / samples:>16.2f} {seconds:>7.2f} "
                    f"{seconds / base:>6.2f} {nan:>4}"
                )


class FreeJudge(PretendJudge):
    """PretendJudge answering each prompt once, then from memory, so the judge costs the
    metric a dict look-up per call; ``log`` (a list) records each call for :func:`replay`."""

    def __init__(self) -> None:
        super().__init__(keep=0)
        self.log: list[tuple[Any, ...]] | None = None
        self._memo: dict[tuple[str, type], Any] = {}

    def _reply(self, prompt: str, response_model: type) -> Any:
        if self.log is not None:
            self.log.append(("agenerate", prompt, response_model))
        key = (prompt, response_model)
        if key not in self._memo:
            self._memo[key] = super()._reply(prompt, response_model)
        return self._memo[key]


class FreeEmbeddings(HashEmbeddings):
    """HashEmbeddings computing each text's vector once and answering a list of texts in one
    call (RAGAS's default starts a task per text), so the embeddings cost the metric little.

    Each answer is a fresh list of floats, as an SDK hands back; the vectors are kept as arrays,
    which the garbage collector does not walk float by float (kept lists would make every full
    collection, whoever triggers it, cost in proportion to the width). ``log`` as
    :class:`FreeJudge`'s.
    """

    def __init__(self, width: int):
        super().__init__(width)
        self.log: list[tuple[Any, ...]] | None = None
        self._memo: dict[str, np.ndarray] = {}

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:
        if text not in self._memo:
            self._memo[text] = np.array(super().embed_text(text))
        return self._memo[text].tolist()

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        if self.log is not None:
            self.log.append(("aembed_text", text))
        return self.embed_text(text)

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        if self.log is not None:
            self.log.append(("aembed_texts", list(texts)))
        return [self.embed_text(text) for text in texts]


def replay(log: list[tuple[Any, ...]], judge: FreeJudge, embeddings: FreeEmbeddings) -> Any:
    """A bare loop making exactly the stand-in calls a metric's run made (``log``), in order."""

    async def loop() -> None:
        for name, *args in log:
            await getattr(judge if name == "agenerate" else embeddings, name)(*args)

    return loop


def metric_loop(variant: str, rows: list[dict[str, str]], judge: Any, embeddings: Any) -> Any:
    """Stock: ``ascore`` one sample after another; ours: ``abatch_score`` over all rows (traced:
    see :func:`traced`)."""
    scorer = metric(variant, judge, embeddings, 16)
    if variant == "stock":

        async def one_by_one() -> None:
            for row in rows:
                await scorer.ascore(**row)

        return one_by_one
    if variant == TRACED:
        return traced(lambda: scorer.abatch_score(rows))
    return lambda: scorer.abatch_score(rows)


def traced(run: Any) -> Any:
    """``run`` with a tracer provider of the package's own set for its length: the SDK's batch
    span processor (a queue large enough that no span is dropped) into an in-memory exporter,
    flushed before the run ends, so exporting counts too. ``.spans``: how many the last run
    exported."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ragas_relevancy_ext.scoring import tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=1_000_000))

    async def loop() -> None:
        previous = tracing.use_provider(provider)
        try:
            await run()
        finally:
            tracing.use_provider(previous)
            provider.force_flush()
            loop.spans = len(exporter.get_finished_spans())  # type: ignore[attr-defined]
            exporter.clear()  # kept, they would weigh on the other rows' garbage collections

    return loop


def process_seconds(run: Any) -> tuple[float, float]:
    """Process CPU time of ``asyncio.run(run())``, garbage collected first, and the part of it
    spent in the garbage collector's passes (timed by ``gc.callbacks``)."""
    gc.collect()
    spent = [0.0, 0.0]  # [in collections, start of the current one]

    def timing(phase: str, info: dict[str, int]) -> None:
        now = time.process_time()
        if phase == "start":
            spent[1] = now
        else:
            spent[0] += now - spent[1]

    gc.callbacks.append(timing)
    try:
        started = time.process_time()
        asyncio.run(run())
        return time.process_time() - started, spent[0]
    finally:
        gc.callbacks.remove(timing)


def cpu_overheads(
    rows: list[dict[str, str]], width: int, repeats: int
) -> dict[str, tuple[list[float], float]]:
    """Per variant: its overhead in ms/sample in each repeat, the stand-ins' ms/sample, and the
    median ms/sample of the metric's run spent in garbage collection.

    Each variant first runs once untimed: the stand-ins learn their answers and record the
    calls made. Then, per repeat, every variant (in rotated order, so load drifts spread
    evenly) is timed, followed by a replay of its recorded stand-in calls; overhead = metric
    less replay, both process CPU time.
    """
    runs = {}
    for variant in CPU_VARIANTS:
        judge, embeddings = FreeJudge(), FreeEmbeddings(width)
        log: list[tuple[Any, ...]] = []
        judge.log = embeddings.log = log
        run = metric_loop(variant, rows, judge, embeddings)
        asyncio.run(run())
        judge.log = embeddings.log = None
        runs[variant] = (run, replay(log, judge, embeddings))
    per_ms = 1000 / len(rows)
    overheads: dict[str, list[float]] = {v: [] for v in CPU_VARIANTS}
    bare: dict[str, list[float]] = {v: [] for v in CPU_VARIANTS}
    collecting: dict[str, list[float]] = {v: [] for v in CPU_VARIANTS}
    for repeat in range(repeats):
        shift = repeat % len(CPU_VARIANTS)
        for variant in CPU_VARIANTS[shift:] + CPU_VARIANTS[:shift]:
            run, stand_ins = runs[variant]
            metric_s, gc_s = process_seconds(run)
            bare_s, _ = process_seconds(stand_ins)
            overheads[variant].append((metric_s - bare_s) * per_ms)
            bare[variant].append(bare_s * per_ms)
            collecting[variant].append(gc_s * per_ms)
    spans = getattr(runs[TRACED][0], "spans", 0) / len(rows)
    print(f"  (width {width}: {TRACED} exported {spans:.2f} spans per sample)")
    return {
        v: (overheads[v], statistics.median(bare[v]), statistics.median(collecting[v]))
        for v in CPU_VARIANTS
    }


def part_cpu(samples: int, repeats: int) -> None:
    print(
        f"\n2. CPU per sample, {samples} samples, in-process stand-ins (PretendJudge and "
        "HashEmbeddings answering from memory after a first untimed run), median of "
        f"{repeats} repeat(s), variants interleaved. overhead = process CPU time of the metric "
        "less that of a replay of the very stand-in calls it made; ratio = median over repeats "
        "of ours / stock in the same repeat. gc = CPU of the metric's run spent in garbage "
        "collection (a full pass walks every object RAGAS's import left, some 250,000: "
        "hundreds of ms, about once per 2,000 samples for either metric, so it weighs more "
        "on the one that costs less per sample). ours, traced: spans exported through the "
        "OpenTelemetry SDK (see the top of this file); the other rows run with no tracer "
        "provider set."
    )
    header = (
        f"{'width':>5}  {'metric':<24} {'stand-ins ms/sample':>19} {'overhead ms/sample':>18} "
        f"{'ratio':>6} {'gc ms/sample':>12}"
    )
    print(header)
    print("-" * len(header))
    rows = load_rows(samples)
    for width in WIDTHS:
        measured = cpu_overheads(rows, width, repeats)
        stock = measured["stock"][0]
        for variant in CPU_VARIANTS:
            overheads, bare, collecting = measured[variant]
            ratio = statistics.median(o / s for o, s in zip(overheads, stock, strict=True))
            print(
                f"{width:>5}  {variant:<24} {bare:>19.3f} "
                f"{statistics.median(overheads):>18.3f} {ratio:>6.2f} {collecting:>12.3f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, default, text in (
        ("--samples", 1000, "samples on the server, per variant"),
        ("--cpu-samples", 2000, "samples per CPU measurement"),
        ("--concurrency", 16, "requests in flight (stock: samples at once)"),
        ("--latency", 0.05, "judge seconds per request"),
        ("--repeats", 3, "CPU runs per measurement (the median counts)"),
    ):
        parser.add_argument(flag, type=type(default), default=default, help=text)
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--skip-server", action="store_true", help="CPU part only")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    if args.quick:
        args.samples, args.cpu_samples, args.repeats = 200, 300, 1
    started = time.perf_counter()
    with quiet_ragas():
        if not args.skip_server:
            part_requests(args.samples, args.concurrency, args.latency)
        part_cpu(args.cpu_samples, args.repeats)
    print(f"\n(total {time.perf_counter() - started:.0f} s, {os.cpu_count()} CPU(s))")


if __name__ == "__main__":
    main()
