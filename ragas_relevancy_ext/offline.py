"""The offline stand-ins under their first name: see :mod:`ragas_relevancy_ext.testing.offline`."""

from .testing.offline import *  # noqa: F403
from .testing.offline import __all__  # noqa: F401
