"""``python -m hma_policy``: the same as the ``hma-policy`` command."""

import sys

from .cli import main

sys.exit(main())
