"""``python -m cda`` is the ``cda`` command."""

import sys

if __name__ == "__main__":
    try:
        from cda.cli.main import main

        code = main()
    except KeyboardInterrupt:  # Ctrl-C while starting (importing), before a command handles it
        sys.stderr.write("\ncda: interrupted\n")
        code = 130
    sys.exit(code)
