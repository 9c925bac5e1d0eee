"""One rate limit per provider key for every actor of a Ray run: a limit backend (the
``LimitBackend`` of ``run/limits.py``: ``store(name)`` and ``now()``) whose pyrate-limiter
state stores live on one Ray actor, reached asynchronously from each scoring actor."""

from __future__ import annotations

import time
from typing import Any

import ray
from pyrate_limiter import InMemoryStateStore, StateStore
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

__all__ = ["RayLimits"]


class RayLimits:
    """The keys' limits of one Ray run, on an actor started on this node (the driver's, so it
    leaves the cluster only with the run) that ends with the job. Pass it to the scoring actors;
    they read wall-clock time, which a cluster's nodes share."""

    def __init__(self) -> None:
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
        self.actor = _Limits.options(scheduling_strategy=here).remote()

    def store(self, name: str) -> StateStore:
        """The state of the limit called ``name``, kept on the actor."""
        return _OnActor(self.actor, name)

    @staticmethod
    def now() -> float:
        return time.time()


class _OnActor(StateStore):
    """One limit's state on the run's limits actor: each check one call, which the limiter
    awaits (a Ray object reference is awaitable)."""

    is_async = True

    def __init__(self, actor: Any, name: str) -> None:
        self.actor, self.name = actor, name

    def check(self, algorithm: Any, rates: Any, now: int, weight: int) -> Any:
        return self.actor.check.remote(self.name, algorithm, rates, now, weight)

    def read(self, algorithm: Any, rates: Any) -> Any:
        return self.actor.read.remote(self.name, algorithm, rates)

    def reset(self) -> Any:
        return self.actor.reset.remote(self.name)


class _LimitStates:
    """Every limit's state of a run, by name, each changed atomically (one call at a time)."""

    def __init__(self) -> None:
        self.stores: dict[str, InMemoryStateStore] = {}

    def check(self, name: str, algorithm: Any, rates: Any, now: int, weight: int) -> Any:
        store = self.stores.setdefault(name, InMemoryStateStore())
        return store.check(algorithm, rates, now, weight)

    def read(self, name: str, algorithm: Any, rates: Any) -> Any:
        return self.stores.setdefault(name, InMemoryStateStore()).read(algorithm, rates)

    def reset(self, name: str) -> None:
        self.stores.pop(name, None)


_Limits: Any = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(_LimitStates)
