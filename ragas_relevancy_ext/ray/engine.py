"""Score a Ray Data dataset with the metric: a pool of actors, many judge calls in flight in each.

Usage (on a laptop, or a cluster with ``ray.init(address="auto")``)::

    import ray
    from ragas_relevancy_ext.ray.engine import score_dataset

    ds = ray.data.read_parquet("s3://bucket/answers/")
    scored = score_dataset(ds, make_metric, concurrency=8, batch_size=64)
    scored.write_parquet("s3://bucket/scored/")

Each actor builds its metric once, from ``metric_factory`` (a picklable zero-argument callable),
so no live client crosses a process boundary, and scores each batch with the metric's async
``abatch_score`` on one event loop of its own. Ray Data brings partitioned reading, back-pressure,
progress bars and retries: an actor that dies is restarted and its batch run again.

This module imports Ray; nothing else in the package imports it, so Ray loads only when used.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Iterable, Mapping
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

from ..scoring.report import SKIPPED, TEXT_FIELDS, input_problem, row_key

__all__ = [
    "KEY_COLUMN",
    "OUTPUT_COLUMNS",
    "row_key",
    "score_dataset",
    "with_keys",
]

KEY_COLUMN = "key"
# What score_dataset adds to every row, besides the content key.
OUTPUT_COLUMNS = ("score", "reason", "error", "report")
# Actors wait on the network, not the CPU: this share of a CPU each lets many fit on one node.
ACTOR_NUM_CPUS = 0.25
# (score, reason, error, report JSON) of one row
Output = tuple[float, str, str | None, str | None]


def with_keys(
    ds: ray.data.Dataset,
    settings_tag: str = "",
    *,
    skip_keys: Iterable[str] | None = None,
    user_input: str = "user_input",
    response: str = "response",
) -> ray.data.Dataset:
    """``ds`` with a ``key`` column, less the rows whose key is in ``skip_keys`` (rows already
    scored, for resuming).

    The key is :func:`~row_key` of the two texts and ``settings_tag`` (any text naming the
    settings that change a score: judge, embeddings, strictness, probe prompt), the key the
    command line's reports use too; a row with nothing to score (:func:`~input_problem`) is
    keyed with its problem, as there.
    """
    skip = sorted(set(skip_keys or ()))
    skip_ref = ray.put(pa.array(skip, type=pa.string())) if skip else None

    def add_keys(batch: pa.Table) -> pa.Table:
        problems = _problems(batch, user_input, response)
        texts = zip(
            batch[user_input].to_pylist(), batch[response].to_pylist(), problems, strict=True
        )
        keys = pa.array(
            [row_key(u, r, settings_tag, problem) for u, r, problem in texts], type=pa.string()
        )
        batch = batch.append_column(KEY_COLUMN, keys)
        if skip_ref is None:
            return batch
        done = pc.is_in(keys, value_set=ray.get(skip_ref))
        return batch.filter(pc.invert(done))

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
    ray_remote_args: Mapping[str, Any] | None = None,
) -> ray.data.Dataset:
    """Score every row of ``ds``; the rows come back with their columns plus ``key``, ``score``,
    ``reason``, ``error`` and ``report`` (the full report as JSON text).

    metric_factory: builds the metric in each actor (e.g. a function that makes an
        :class:`~ragas_relevancy_ext.AnswerRelevancy` with its judge and embeddings). It is
        pickled, so it must not hold a live client; the metric it returns is never pickled.
    concurrency: the actor pool size (Ray's ``ActorPoolStrategy(size=...)``): how many batches
        are scored at once, each by its own metric, on any node of the cluster.
    max_concurrency: judge and embedding calls in flight inside one actor (the metric's
        ``max_concurrency``; None keeps the factory's). Calls in flight over the whole run are at
        most ``concurrency * max_concurrency``: keep that under the provider's rate limit.
    batch_size: rows per ``abatch_score`` call. Give it several times ``max_concurrency`` rows,
        so an actor keeps its calls in flight while a batch's last rows finish.
    settings_tag, skip_keys: see :func:`with_keys`; rows whose key is in ``skip_keys`` are
        dropped before scoring, so a re-run after a crash scores only what is missing.
    num_cpus, ray_remote_args: what each actor asks Ray for (a quarter of a CPU by default:
        actors wait on the network).

    A row that fails (a judge error after retries, say) gets ``score`` NaN, the failure in
    ``error`` and ``reason``; the other rows of its batch are scored. A row with nothing to score
    (no text, or a blank one) is set aside as the command line sets it aside, never sent to the
    metric: NaN, ``error`` ``"skipped: <problem>"``, ``report`` None. Row order is not kept.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
    check_columns(ds.schema().names, user_input, response)
    keyed = with_keys(
        ds, settings_tag, skip_keys=skip_keys, user_input=user_input, response=response
    )
    # One batch per block (a streaming split, no shuffle), so even one big file feeds every actor.
    batches = keyed.repartition(target_num_rows_per_block=batch_size)
    return batches.map_batches(
        _Scorer,
        fn_constructor_kwargs={
            "metric_factory": metric_factory,
            "max_concurrency": max_concurrency,
            "user_input": user_input,
            "response": response,
        },
        batch_size=batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=concurrency),
        num_cpus=num_cpus,
        **dict(ray_remote_args or {}),
    )


def check_columns(names: Iterable[str], user_input: str, response: str) -> None:
    """ValueError when the texts' columns are missing or an output column is already there."""
    names = list(names)
    missing = [c for c in (user_input, response) if c not in names]
    if missing:
        raise ValueError(f"no column {missing[0]!r} (found: {', '.join(sorted(names))})")
    taken = [c for c in (KEY_COLUMN, *OUTPUT_COLUMNS) if c in names]
    if taken:
        raise ValueError(
            f"the input already has column(s) {', '.join(taken)}, which scoring adds; "
            "rename or drop them first"
        )


class _Scorer:
    """One actor: a metric built once and an event loop of its own, reused for every batch."""

    def __init__(
        self,
        metric_factory: Callable[[], Any],
        max_concurrency: int | None,
        user_input: str,
        response: str,
    ):
        self.metric = metric_factory()
        if max_concurrency is not None:
            if not hasattr(self.metric, "max_concurrency"):
                raise TypeError(
                    f"{type(self.metric).__name__} has no max_concurrency to set; "
                    "leave max_concurrency=None"
                )
            self.metric.max_concurrency = max_concurrency
        self.columns = (user_input, response)
        self.loop = asyncio.new_event_loop()

    def __call__(self, batch: pa.Table) -> pa.Table:
        problems = _problems(batch, *self.columns)
        texts = list(zip(*(batch[c].to_pylist() for c in self.columns), strict=True))
        rows = [None if problem is None else _set_aside(problem) for problem in problems]
        todo = [i for i, problem in enumerate(problems) if problem is None]
        inputs = [dict(zip(TEXT_FIELDS, texts[i], strict=True)) for i in todo]
        for i, output in zip(todo, self._score(inputs), strict=True):
            rows[i] = output
        for name, values in zip(OUTPUT_COLUMNS, _columns(rows), strict=True):
            batch = batch.append_column(name, values)
        return batch

    def _score(self, inputs: list[dict[str, Any]]) -> list[Output]:
        """The metric's outputs for ``inputs``, in order."""
        try:
            results = self.loop.run_until_complete(self.metric.abatch_score(inputs))
        except Exception as exc:  # a metric whose batch call raises: every row says why
            failure = f"{type(exc).__name__}: {exc}"
            return [(math.nan, f"batch failed: {failure}", failure, None)] * len(inputs)
        return [_row(result) for result in results]


def _problems(batch: pa.Table, user_input: str, response: str) -> list[str | None]:
    """:func:`~input_problem` of each row of ``batch``, read from
    its input columns (the key column is not one) with the texts under their field names."""
    names = {user_input: "user_input", response: "response"}
    columns = [c for c in batch.column_names if c != KEY_COLUMN]
    rows = batch.select(columns).to_pylist()
    return [input_problem({names.get(k, k): v for k, v in row.items()}) for row in rows]


def _set_aside(problem: str) -> Output:
    """(score, reason, error, report JSON) of a row with nothing to score."""
    error = f"{SKIPPED}{problem}"
    return math.nan, f"Not scored: {error}", error, None


def _row(result: Any) -> Output:
    """(score, reason, error, report JSON) of one metric result."""
    report = getattr(result, "report", None)
    value = result.value if hasattr(result, "value") else result
    score = float(value) if value is not None else math.nan
    reason = str(getattr(result, "reason", "") or "")
    if report is None:
        return score, reason, None, None
    payload = json.dumps(report.to_dict(), ensure_ascii=False, allow_nan=False, default=str)
    return score, reason, report.error, payload


def _columns(rows: list[Output | None]) -> list[pa.Array]:
    scores, reasons, errors, reports = zip(*rows, strict=True) if rows else ((), (), (), ())
    return [
        pa.array(scores, type=pa.float64()),
        pa.array(reasons, type=pa.string()),
        pa.array(errors, type=pa.string()),
        pa.array(reports, type=pa.string()),
    ]
