"""Score a Ray Dataset on a pool of actors (the ``[ray]`` extra): :func:`score_dataset`, each
provider key's rate limit kept for all of them by :class:`RayLimits`."""

from .engine import score_dataset
from .limits import RayLimits

__all__ = ["RayLimits", "score_dataset"]
