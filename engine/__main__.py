"""``python -m hma_policy``: the same as the ``hma-policy`` command."""

from .cli import run

run()
