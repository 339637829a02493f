"""``python -m cda`` is the ``cda`` command."""

import sys

from cda.adapters.cli import main

if __name__ == "__main__":
    sys.exit(main())
