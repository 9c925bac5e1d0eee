"""Score a Ray Data dataset on a pool of actors, each with its own metric.

Each actor scores several batches at once on Ray Data's event loop, their rows in one stream
of the metric's (one window, one set of requests in flight), so a slow row holds back only the
batch it is in. The only module that imports Ray (the ``[ray]`` extra); docs/reference.md
shows its use.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import itertools
import json
import math
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

try:
    import pyarrow as pa
    import pyarrow.compute as pc
    import ray
    import ray.data
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError(
        "ragas_relevancy_ext.ray.engine needs Ray Data: pip install 'ragas-relevancy-ext[ray]'"
        f" ({exc})"
    ) from exc

from ..scoring import otlp
from ..scoring.languages import detector_ready
from ..scoring.report import SKIPPED, TEXT_FIELDS, input_problem, row_key
from .limits import RayLimits

__all__ = [
    "KEY_COLUMN",
    "OUTPUT_COLUMNS",
    "row_key",
    "score_dataset",
    "with_keys",
]

KEY_COLUMN = "key"
OUTPUT_COLUMNS = ("score", "reason", "error", "report")  # added to every row, besides the key
OUTPUT_TYPES = (pa.float64(), pa.string(), pa.string(), pa.string())
# Actors wait on the network and take no CPU of Ray's, so a node's CPUs are left to Ray Data's
# own read and write tasks (a CPU taken in part leaves a 1-CPU node none to run them).
ACTOR_NUM_CPUS = 0.0
BATCHES_PER_ACTOR = 8  # batches an actor scores at once: rows go on while a slow one is held
Output = tuple[float, str, str | None, str | None]  # (score, reason, error, report JSON)


def with_keys(
    ds: ray.data.Dataset,
    settings_tag: str = "",
    *,
    skip_keys: Iterable[str] | None = None,
    user_input: str = "user_input",
    response: str = "response",
) -> ray.data.Dataset:
    """``ds`` with the command line's ``key`` column (texts, ``settings_tag``, and the problem of
    a row with nothing to score), less the rows whose key is in ``skip_keys`` (resuming)."""
    skip = sorted(set(skip_keys or ()))
    skip_ref = ray.put(pa.array(skip, type=pa.string())) if skip else None

    def add_keys(batch: pa.Table) -> pa.Table:
        problems = _problems(batch, user_input, response)
        texts = zip(
            batch[user_input].to_pylist(), batch[response].to_pylist(), problems, strict=True
        )
        keys = pa.array([row_key(u, r, settings_tag, p) for u, r, p in texts], type=pa.string())
        batch = batch.append_column(KEY_COLUMN, keys)
        if skip_ref is None:
            return batch
        return batch.filter(pc.invert(pc.is_in(keys, value_set=ray.get(skip_ref))))

    return ds.map_batches(add_keys, batch_format="pyarrow", zero_copy_batch=True)


def score_dataset(
    ds: ray.data.Dataset,
    metric_factory: Callable[[], Any],
    *,
    concurrency: int = 2,
    batch_size: int = 64,
    max_concurrency: int | None = None,
    settings_tag: str = "",
    skip_keys: Iterable[str] | None = None,
    user_input: str = "user_input",
    response: str = "response",
    num_cpus: float = ACTOR_NUM_CPUS,
    otel: str | None = None,
    limits: RayLimits | None = None,
) -> ray.data.Dataset:
    """Score every row of ``ds`` on ``concurrency`` actors, each building its metric once from
    the picklable ``metric_factory`` and scoring :data:`BATCHES_PER_ACTOR` batches at once;
    rows come back (in any order) with ``key`` and :data:`OUTPUT_COLUMNS`, a failing or
    set-aside row NaN with its reason.

    Every actor keeps to each provider key's rate limit together, through ``limits`` (by
    default a :class:`RayLimits` of the run's own; pass one to share it between runs), unless
    the metric's ``rate_limits`` say where they are kept (``shared``).

    ``otel``: an OTLP/HTTP traces URL (``http://HOST:4318/v1/traces``) each actor sends its
    spans to (the ``[otel]`` extra), under the span current here; sent after every batch."""
    for name, value in (("concurrency", concurrency), ("batch_size", batch_size)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
    check_columns(ds.schema().names, user_input, response)
    keyed = with_keys(
        ds, settings_tag, skip_keys=skip_keys, user_input=user_input, response=response
    )
    # One batch per block (a streaming split, no shuffle), so even one big file feeds every actor.
    return keyed.repartition(target_num_rows_per_block=batch_size).map_batches(
        _Scorer,
        fn_constructor_kwargs={
            "metric_factory": metric_factory,
            "max_concurrency": max_concurrency,
            "user_input": user_input,
            "response": response,
            "otel": otel,
            "trace_parent": otlp.carrier() if otel else None,
            "limits": limits or RayLimits(),
        },
        batch_size=batch_size,
        batch_format="pyarrow",
        num_cpus=num_cpus,
        **_actor_pool(concurrency, BATCHES_PER_ACTOR),
    )


def _actor_pool(actors: int, calls: int) -> dict[str, Any]:
    """``map_batches`` arguments for ``actors`` actors each running ``calls`` batches at once:
    Ray 2.60 takes that from the pool (``max_concurrent_calls_per_actor``), and warns that
    remote arguments such as ``max_concurrency``, which earlier versions take, will go."""
    parameters = inspect.signature(ray.data.ActorPoolStrategy).parameters
    current = "max_concurrent_calls_per_actor" in parameters
    at_once: dict[str, Any] = {"max_concurrent_calls_per_actor": calls} if current else {}
    pool = ray.data.ActorPoolStrategy(size=actors, max_tasks_in_flight_per_actor=calls, **at_once)
    return {"compute": pool} if current else {"compute": pool, "max_concurrency": calls}


def check_columns(names: Iterable[str], user_input: str, response: str) -> None:
    """ValueError when the texts' columns are missing or an output column is already there."""
    names = list(names)
    if missing := [c for c in (user_input, response) if c not in names]:
        raise ValueError(f"no column {missing[0]!r} (found: {', '.join(sorted(names))})")
    if taken := [c for c in (KEY_COLUMN, *OUTPUT_COLUMNS) if c in names]:
        raise ValueError(
            f"the input already has column(s) {', '.join(taken)}, which scoring adds; "
            "rename or drop them first"
        )


class _Scorer:
    """One actor: a metric built once, whose rows from every batch under way go through one
    stream of its (:meth:`ascore_each`); a metric without one scores each batch as a whole."""

    def __init__(
        self,
        metric_factory: Callable[[], Any],
        max_concurrency: int | None,
        user_input: str,
        response: str,
        otel: str | None = None,
        trace_parent: Mapping[str, str] | None = None,
        limits: RayLimits | None = None,
    ):
        if otel:  # before the metric is built, so nothing it does goes untraced
            otlp.export_to(otel)
        self.trace_parent = trace_parent
        self.metric = metric_factory()
        if limits is not None:
            _keep_to(self.metric, limits)
        if max_concurrency is not None:
            if not hasattr(self.metric, "max_concurrency"):
                raise TypeError(
                    f"{type(self.metric).__name__} has no max_concurrency to set; "
                    "leave max_concurrency=None"
                )
            self.metric.max_concurrency = max_concurrency
        self.columns = (user_input, response)
        self.stream: _Stream | None = None

    async def __call__(self, batch: pa.Table) -> AsyncIterator[pa.Table]:
        problems = _problems(batch, *self.columns)
        texts = list(zip(*(batch[c].to_pylist() for c in self.columns), strict=True))
        rows: list[Output | None] = [None if p is None else _set_aside(p) for p in problems]
        todo = [i for i, problem in enumerate(problems) if problem is None]
        inputs = [dict(zip(TEXT_FIELDS, texts[i], strict=True)) for i in todo]
        for i, output in zip(todo, await self._score(inputs), strict=True):
            rows[i] = output
        values = zip(*rows, strict=True) if rows else [()] * len(OUTPUT_COLUMNS)
        for name, column, kind in zip(OUTPUT_COLUMNS, values, OUTPUT_TYPES, strict=True):
            batch = batch.append_column(name, pa.array(column, type=kind))
        yield batch

    async def _score(self, inputs: list[dict[str, Any]]) -> list[Output]:
        try:
            with otlp.attached(self.trace_parent):
                if not hasattr(self.metric, "ascore_each"):
                    results = await self.metric.abatch_score(inputs)
                else:
                    if self.stream is None or self.stream.task.done():
                        self.stream = _Stream(self.metric)  # a stream that failed is replaced
                    results = await asyncio.gather(*map(self.stream.score, inputs))
        except Exception as exc:  # a metric whose stream or batch call raises: every row says why
            failure = f"{type(exc).__name__}: {exc}"
            return [(math.nan, f"batch failed: {failure}", failure, None)] * len(inputs)
        finally:  # an actor may be ended at any time once its batch is back
            await asyncio.to_thread(otlp.flush)
        await detector_ready()  # reasons name languages: the model loads off the event loop
        return [_row(result) for result in results]


class _Stream:
    """The metric's ``ascore_each`` over rows handed in as batches come, each answered on a
    future of its own; the task (under the span current when it starts) lives with the actor.
    Should the stream itself fail, every row handed in and not answered gets its error."""

    def __init__(self, metric: Any):
        self.rows: asyncio.Queue[tuple[dict[str, Any], asyncio.Future[Any]]] = asyncio.Queue()
        self.waiting: dict[int, asyncio.Future[Any]] = {}
        self.task = asyncio.get_running_loop().create_task(self._run(metric))

    def score(self, row: dict[str, Any]) -> asyncio.Future[Any]:
        """The future of ``row``'s result."""
        future = asyncio.get_running_loop().create_future()
        self.rows.put_nowait((row, future))
        return future

    async def _inputs(self) -> AsyncIterator[dict[str, Any]]:
        for index in itertools.count():
            row, self.waiting[index] = await self.rows.get()
            yield row

    async def _run(self, metric: Any) -> None:
        try:
            async for index, result in metric.ascore_each(self._inputs()):
                future = self.waiting.pop(index)
                if not future.done():  # not cancelled with its batch
                    future.set_result(result)
        except Exception as exc:
            left = [*self.waiting.values()]
            while not self.rows.empty():
                left.append(self.rows.get_nowait()[1])
            for future in left:
                if not future.done():
                    future.set_exception(exc)


def _keep_to(metric: Any, limits: RayLimits) -> None:
    """Have ``metric`` pace each key through ``limits``, with every actor of the run, unless
    its rate limits name where they are kept (a file, one machine's; a backend of its own); a
    metric with no ``rate_limits`` (stock's) keeps to none."""
    from .. import RateLimits

    if hasattr(metric, "rate_limits"):
        rates = metric.rate_limits or RateLimits()
        if rates.shared is None:
            metric.rate_limits = dataclasses.replace(rates, shared=limits)


def _problems(batch: pa.Table, user_input: str, response: str) -> list[str | None]:
    """:func:`input_problem` of each row, read with the texts under their field names."""
    names = {user_input: "user_input", response: "response"}
    rows = batch.select([c for c in batch.column_names if c != KEY_COLUMN]).to_pylist()
    return [input_problem({names.get(k, k): v for k, v in row.items()}) for row in rows]


def _set_aside(problem: str) -> Output:
    error = f"{SKIPPED}{problem}"
    return math.nan, f"Not scored: {error}", error, None


def _row(result: Any) -> Output:
    report = getattr(result, "report", None)
    value = result.value if hasattr(result, "value") else result
    score = float(value) if value is not None else math.nan
    reason = str(getattr(result, "reason", "") or "")
    if report is None:
        return score, reason, None, None
    payload = json.dumps(report.to_dict(), ensure_ascii=False, allow_nan=False, default=str)
    return score, reason, report.error, payload
