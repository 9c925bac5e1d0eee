"""Score a Ray Data dataset on a pool of actors, each with its own metric and event loop.

The only module that imports Ray (the ``[ray]`` extra); docs/reference.md shows its use.
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

from ..scoring import otlp
from ..scoring.report import SKIPPED, TEXT_FIELDS, input_problem, row_key

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
ACTOR_NUM_CPUS = 0.25  # actors wait on the network: many fit on one node
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
    ray_remote_args: Mapping[str, Any] | None = None,
    otel: str | None = None,
) -> ray.data.Dataset:
    """Score every row of ``ds`` on ``concurrency`` actors, each building its metric once from
    the picklable ``metric_factory``; rows come back (in any order) with ``key`` and
    :data:`OUTPUT_COLUMNS`, a failing or set-aside row NaN with its reason.

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
    if missing := [c for c in (user_input, response) if c not in names]:
        raise ValueError(f"no column {missing[0]!r} (found: {', '.join(sorted(names))})")
    if taken := [c for c in (KEY_COLUMN, *OUTPUT_COLUMNS) if c in names]:
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
        otel: str | None = None,
        trace_parent: Mapping[str, str] | None = None,
    ):
        if otel:  # before the metric is built, so nothing it does goes untraced
            otlp.export_to(otel)
        self.trace_parent = trace_parent
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
        rows: list[Output | None] = [None if p is None else _set_aside(p) for p in problems]
        todo = [i for i, problem in enumerate(problems) if problem is None]
        inputs = [dict(zip(TEXT_FIELDS, texts[i], strict=True)) for i in todo]
        for i, output in zip(todo, self._score(inputs), strict=True):
            rows[i] = output
        values = zip(*rows, strict=True) if rows else [()] * len(OUTPUT_COLUMNS)
        for name, column, kind in zip(OUTPUT_COLUMNS, values, OUTPUT_TYPES, strict=True):
            batch = batch.append_column(name, pa.array(column, type=kind))
        return batch

    def _score(self, inputs: list[dict[str, Any]]) -> list[Output]:
        try:
            with otlp.attached(self.trace_parent):
                results = self.loop.run_until_complete(self.metric.abatch_score(inputs))
        except Exception as exc:  # a metric whose batch call raises: every row says why
            failure = f"{type(exc).__name__}: {exc}"
            return [(math.nan, f"batch failed: {failure}", failure, None)] * len(inputs)
        finally:
            otlp.flush()  # an actor may be ended at any time once its batch is back
        return [_row(result) for result in results]


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
