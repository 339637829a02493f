"""Public names loaded on first use: one module ``__getattr__`` (PEP 562) for every package that
re-exports names from heavier modules (``cda``, ``cda.contracts``, ``cda.verifiers``).

A package lists where each public name lives; the name's module is imported the first time the
name is read, and the value is kept in the package so the next read costs nothing. ``import cda``
and each ``cda`` command then pay only for what they touch.

>>> import sys, types
>>> pkg = types.ModuleType("pkg"); sys.modules["pkg"] = pkg
>>> pkg.__getattr__, pkg.__dir__ = lazy_exports("pkg", {"Fraction": "fractions"})
>>> pkg.Fraction(1, 3), "Fraction" in vars(pkg), "Fraction" in dir(pkg)
(Fraction(1, 3), True, True)
>>> pkg.nonesuch
Traceback (most recent call last):
...
AttributeError: module 'pkg' has no attribute 'nonesuch'
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from importlib.util import find_spec
from types import ModuleType
from typing import Any

from cda.errors import MissingExtra

__all__ = ["lazy_exports", "require_extra"]


def lazy_exports(package: str, home: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose public name ``n`` lives in the
    module ``home[n]``."""

    def __getattr__(name: str) -> Any:
        where = home.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(where), name)
        setattr(sys.modules[package], name, value)
        _unshadow(package, home)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *home})

    return __getattr__, __dir__


def _unshadow(package: str, home: Mapping[str, str]) -> None:
    """Importing a submodule binds it on its package under its own name, hiding a public name
    spelled the same (``cda.policy.analyze`` the function and ``cda.policy.analyze`` the
    module): every such name whose module is loaded is bound to its value again."""
    pkg = sys.modules[package]
    for name, where in home.items():
        if isinstance(vars(pkg).get(name), ModuleType) and where in sys.modules:
            setattr(pkg, name, getattr(sys.modules[where], name))


def require_extra(extra: str, what: str, *modules: str) -> None:
    """Raise :class:`~cda.errors.MissingExtra` naming ``extra`` unless every one of ``modules``
    is installed: an optional part of CDA says what to install, instead of a
    ``ModuleNotFoundError`` from deep inside (``cda serve`` after a plain ``pip install -e .``).

    >>> require_extra("test", "a doctest", "json")
    >>> require_extra("service", "cda serve", "json", "no_such_module_cda")
    Traceback (most recent call last):
    ...
    cda.errors.MissingExtra: cda serve needs the 'service' extra (no_such_module_cda is not installed): pip install 'cda[service]' (in a clone: pip install -e '.[service]')
    """
    missing = []
    for name in modules:
        try:
            if find_spec(name) is None:
                missing.append(name)
        except (ImportError, ValueError):  # a parent package missing, or set to None in sys.modules
            missing.append(name)
    if missing:
        are = "is" if len(missing) == 1 else "are"
        raise MissingExtra(f"{what} needs the {extra!r} extra ({', '.join(missing)} {are} not installed): "
                           f"pip install 'cda[{extra}]' (in a clone: pip install -e '.[{extra}]')")
