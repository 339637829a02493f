"""``python -m cda`` is the ``cda`` command."""

import sys

from cda.adapters.cli import main

sys.exit(main())
