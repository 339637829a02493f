"""The ``cda`` command line: ``main`` (the console script, argparse) and one module per subcommand group.

Each subcommand's module is imported only when it runs, so ``cda --help`` loads no solver.
"""
