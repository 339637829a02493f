"""``cda probe`` as the tests call it: the console script's ``main`` with the arguments of the old
``main_probe`` (the CLI door of the ``probe`` operation and its local loops)."""

from __future__ import annotations


def main_probe(path, observations, backend, top, prior, max_size, inject, strategy, vectors, seed, timeout,  # type: ignore[no-untyped-def]
               as_json, out, err):
    """``cda probe`` through the console script's ``main`` (the CLI door of the ``probe`` operation)."""
    from cda.cli.main import main

    argv = ["probe", str(path), "--backend", backend, "--top", str(top), "--prior", str(prior),
            "--strategy", strategy, "--vectors", str(vectors), "--seed", str(seed)]
    argv += ["--observations", str(observations)] if observations is not None else []
    argv += ["--max-size", str(max_size)] if max_size is not None else []
    argv += [a for g in inject or [] for a in ("--inject", g)]
    argv += ["--timeout", str(timeout)] if timeout is not None else []
    argv += ["--json"] if as_json else []
    return main(argv, out, err)
