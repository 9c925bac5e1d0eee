"""Score a Ray Dataset on a pool of actors (the ``[ray]`` extra): :func:`score_dataset`."""

from .engine import score_dataset

__all__ = ["score_dataset"]
