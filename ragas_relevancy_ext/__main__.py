"""``python -m ragas_relevancy_ext``: the ``ragas-relevancy`` command."""

from .cli import main

main()
