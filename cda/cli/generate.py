"""A subcommand's arguments generated from its operation (:mod:`cda.operations.registry`).

Each parameter the operation takes at the CLI becomes an argument: the ones it lists as
positional in order, every other one a flag ``--name-with-dashes`` (the door's own name where the
operation declares one). The type comes from the parameter's model field: a ``Literal`` is a
choice, a ``bool`` a switch, a list of paths a repeatable flag, a checked number (``Checked``)
goes through the same checker of :mod:`cda.contracts.limits` as the model, under the flag's name
(a refusal is argparse's usage error, exit 2, one line). A parameter the user does not give is
left out, so the model's default applies — one default, wherever the call comes from.

:func:`params_of` turns the parsed arguments back into the operation's parameters.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any

from cda.errors import OptionError
from cda.operations.params import Checked, checker_of
from cda.operations.registry import Door, Operation

__all__ = ["add_operation_arguments", "cli_type", "params_of"]


def _number(flag: str, checked: Checked) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value: int | float = int(text) if checked.whole else float(text)
        except ValueError:
            if text.strip().lstrip("+-").isdigit():  # past Python's 4,300 digits for int(): out of any range
                raise argparse.ArgumentTypeError(f"{flag}: a number of {len(text.strip())} digits is out of range") from None
            kind = "a whole number" if checked.whole else "a number"
            shown = text if len(text) <= 40 else text[:20] + "…"
            raise argparse.ArgumentTypeError(f"{flag} must be {kind}, not {shown!r}") from None
        try:
            return checked.check(flag, value)
        except OptionError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = flag  # argparse names the type in some messages
    return parse


def _inner(annotation: Any) -> Any:
    """``X`` of ``X | None`` (and of ``Annotated[X, …]``)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _inner(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _inner(rest[0]) if len(rest) == 1 else annotation
    return annotation


def cli_type(op: Operation, name: str) -> dict[str, Any]:
    """The argparse keywords of parameter ``name`` of ``op`` (type, choices, action, default)."""
    field = op.params.model_fields[name]
    flag = "--" + op.name_at(Door.CLI, name).replace("_", "-")
    checked = checker_of(list(field.metadata))
    annotation = _inner(field.annotation)
    if checked is not None:
        return {"type": _number(flag, checked), "default": None}
    if annotation is bool:
        return {"action": "store_true", "default": None}
    if typing.get_origin(annotation) is typing.Literal:
        return {"choices": list(typing.get_args(annotation)), "default": None}
    if typing.get_origin(annotation) is list:
        return {"action": "append", "default": None}
    if isinstance(annotation, type) and annotation.__name__ == "KenSource":  # the CLI names a Ken file
        return {"default": None, "metavar": "FILE"}
    return {"default": None}


def add_operation_arguments(parser: argparse.ArgumentParser, op: Operation, *,
                            metavars: dict[str, str] | None = None, many: Sequence[str] = (),
                            own: Sequence[str] = (), optional: Sequence[str] = ()) -> None:
    """The arguments of ``op``'s parameters on ``parser`` (``many``: positional parameters that
    take one or more values, each a call of its own; ``own``: parameters the command's presenter
    reads from an option of its own, e.g. ``--mode top 5`` for ``mode`` and ``k``; ``optional``:
    positional parameters that may be left out, e.g. ``undo ID [STEP]``)."""
    metavars = metavars or {}
    for name in op.params_at(Door.CLI):
        if name in own:
            continue
        field = op.params.model_fields[name]
        keywords = cli_type(op, name)
        help_text = field.description or ""
        if name in op.cli_positional:
            keywords.pop("default", None)
            if keywords.get("action") == "append":
                keywords.pop("action")
                keywords["nargs"] = "+" if field.is_required() else "*"
            if name in many:
                keywords["nargs"] = "+"
            elif not field.is_required() and "nargs" not in keywords:
                keywords["nargs"] = "?"  # an optional positional (a request given as a document instead)
            if name in optional:
                keywords["nargs"], keywords["default"] = "?", None
            keywords["metavar"] = metavars.get(name, op.name_at(Door.CLI, name).upper())
            parser.add_argument(name, help=help_text, **keywords)
        else:
            flag = "--" + op.name_at(Door.CLI, name).replace("_", "-")
            if name in metavars:
                keywords["metavar"] = metavars[name]
            elif op.name_at(Door.CLI, name) != name and "action" not in keywords and "choices" not in keywords:
                keywords["metavar"] = op.name_at(Door.CLI, name).upper()  # --schema SCHEMA, not SCHEMA_
            if field.is_required():
                keywords["required"] = True
            parser.add_argument(flag, dest=name, help=help_text, **keywords)


def params_of(op: Operation, args: argparse.Namespace, **given: Any) -> dict[str, Any]:
    """The parameters of ``op`` the command line gave (``given`` overrides: one file of many)."""
    out: dict[str, Any] = {}
    for name in op.params_at(Door.CLI):
        value = given[name] if name in given else getattr(args, name, None)
        if value is not None:
            annotation = _inner(op.params.model_fields[name].annotation)
            named_file = isinstance(annotation, type) and annotation.__name__ == "KenSource"
            out[name] = {"path": value} if named_file and isinstance(value, str) else value
    return out
