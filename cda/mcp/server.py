"""``cda mcp``: CDA as a Model Context Protocol server, over stdio or streamable HTTP.

The tools are the operation registry's MCP door (:mod:`cda.operations`): ``check``, ``solve``,
``explain_conflict``, ``prove``, ``diagnose``, ``probe``, ``run_action``, ``guard_evaluate``,
``conduct_request``, ``investigate_*``, ``reflect_approve``, ``artifacts_get`` and the clause
sessions ``session_put|remove|show|solve``. Each tool's input schema is its operation's
parameters, its output the operation's result model (structured output); every call passes the
gate for its principal:

* over stdio (and over HTTP on loopback without ``--auth``) the caller is the local user, reading
  files only under the allowed roots — ``--allow-root DIR``, else the client's MCP roots, else the
  working directory — and running no code (``functions``) unless ``--allow-code``; it approves
  nothing (an agent steered by a prompt injection must not grant itself what a person grants);
  network egress only up to ``--egress-cap`` (default ``local``);
* over HTTP with ``--auth`` (required off loopback) the caller is its token's principal, as at
  ``cda serve``: a partner names no file, runs no code.

Every HTTP request passes the Host/Origin guard (:mod:`cda.adapters.http_guard`). Each call runs
under its own cancel token: the client's cancel (``notifications/cancelled``, or closing the
call's response stream over streamable HTTP) stops its solver (:meth:`_Door.stopped`). Refusals
and cancelled calls are receipts in ``OUT/gate.sqlite``; ``run_action`` writes its artifacts and receipts under ``--out``
(default: a temporary folder for the server's life), where ``artifacts_get`` reads them.

A mistake in the input is a tool error (``isError``) whose text is the compiler-style message
(``file:line:col: error: …`` and a caret) followed by the JSON object ``cda … --json`` prints
(``line``, ``column``, ``expected`` …); it never stops the server. The ``mcp`` SDK is imported
only by this command (extra ``cda[mcp]``).
"""

from __future__ import annotations

import inspect
import json
import logging
import shutil
import tempfile
import threading
import time
import warnings
import weakref
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, TextIO

from pydantic import Field, ValidationError
from pydantic.fields import FieldInfo

from cda.contracts.deadline import CancelToken, cancel_scope
from cda.errors import AccessDenied, CDAError
from cda.operations import Door, Principal, Refused, cda_version, for_door, invoke, local_user
from cda.operations.base import OperationError
from cda.operations.clause_session import ItemError

__all__ = ["McpOptions", "SdkChanged", "build_server", "cancel_requested", "main_mcp"]

_ROOT = Path(__file__).resolve().parents[2]
_LOG = logging.getLogger("cda.mcp")
STOP_GRACE_S = 10.0
"""Seconds a cancelled call's run has to stop before its receipt says it did not (``run_ended``
false: a call that reads no deadline, as at ``cda serve``'s cancel, docs/service.md)."""
_SOURCES = ("dsl", "fol", "bench", "statement", "inputs", "utterance")


class McpOptions(SimpleNamespace):
    """What ``cda mcp`` lets a person set (the defaults are the safe ones)."""

    allow_root: list[Path]
    allow_code: bool
    egress_cap: str
    out: Path | None
    guard_policies: Path | None
    guard_ledger: Path | None


def _options(**given: Any) -> McpOptions:
    base = {"allow_root": [], "allow_code": False, "egress_cap": "local", "out": None, "guard_policies": None,
            "guard_ledger": None}
    return McpOptions(**{**base, **{k: v for k, v in given.items() if k in base}})


def _refused_file(exc: AccessDenied, args: dict[str, Any]) -> str | None:
    """The file a refusal is about, as the client named it (an argument's value), else its name
    alone (the server's folders are not told)."""
    value: Any = args
    for part in exc.path:  # the gate's refusal names the argument (and the item of a list: ken[0])
        if isinstance(value, dict) and isinstance(part, str) and part in value:
            value = value[part]
        elif isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            value = value[part]
        else:
            break
    if exc.path and exc.path[0] in _SOURCES:  # a line of a text argument: named by the argument, never its text
        return "circuit.bench" if exc.path[0] == "bench" else str(exc.path[0])
    if isinstance(value, str) and value is not args:
        return value
    if exc.file is None:
        return None
    for value in args.values():
        if isinstance(value, str) and value and (exc.file == value or exc.file.endswith("/" + value.lstrip("./"))):
            return value
    return Path(exc.file).name


class SdkChanged(RuntimeError):
    """The installed ``mcp`` SDK no longer keeps what this door reads of it (see
    :func:`cancel_requested`): an upgrade that needs this module changed, said loudly."""


def cancel_requested(ctx: Any) -> bool:
    """Whether the client sent ``notifications/cancelled`` for the call of tool context ``ctx``
    (False: the call's scope was cancelled otherwise: the connection closed, the server stops).

    The SDK sets a per-request event on the cancel notification (``DispatchContext.cancel_requested``,
    before it cancels the handler's scope). Its public face, ``BaseContext.cancel_requested``, is the
    low-level handler API's; a tool of ``MCPServer`` gets a ``Context`` whose ``request_context``
    holds a ``ServerSession``, which keeps that dispatch context as the private ``_request_outbound``
    (mcp 2.3: no public way from a tool, docs/agents.md "Cancelling a call"). This is the one place
    that reads it; an SDK that keeps it elsewhere raises :class:`SdkChanged`
    (``tests/test_mcp_cancel.py`` calls this through a real server, so an upgrade fails there)."""
    session = getattr(getattr(ctx, "request_context", None), "session", None)
    event: Any = getattr(getattr(session, "_request_outbound", None), "cancel_requested", None)
    if session is None or not callable(getattr(event, "is_set", None)):
        from importlib.metadata import version

        raise SdkChanged(f"the mcp SDK {version('mcp')} keeps no per-request cancel event where "
                         "cda.mcp.server.cancel_requested reads it (ServerSession._request_outbound.cancel_requested): "
                         "a client's cancel cannot be told from a lost connection; update cda/mcp/server.py")
    return bool(event.is_set())


def _tool_error(exc: CDAError, source: str, args: dict[str, Any] | None = None) -> Exception:
    """The SDK's tool error carrying the compiler-style message and the JSON error object."""
    from mcp.server.mcpserver.exceptions import ToolError

    from cda.errors import DSLError

    if isinstance(exc, AccessDenied):
        source = _refused_file(exc, args or {}) or source
        exc.file = None  # named as the client named it, in ``source``
    inner = exc.error if isinstance(exc, ItemError) else exc
    if isinstance(inner, DSLError) and inner.filename is None:
        inner.with_filename(source)
    data = inner.as_dict(source)
    if isinstance(exc, ItemError):
        data["item"] = exc.item
    if isinstance(exc, AccessDenied | OperationError):
        data["kind"] = "refused" if isinstance(exc, AccessDenied) else exc.code
        data["path"] = exc.path
    text = "cda: error: " + str(exc) if isinstance(exc, ItemError | AccessDenied) else exc.render()
    return ToolError(f"{text}\n{json.dumps(data, ensure_ascii=False)}")


class _Door:
    """The MCP door's state: the folder its runs write into, who owns what, the clause sessions,
    the gate's receipt log, and the principal of a call."""

    def __init__(self, options: McpOptions) -> None:
        from cda.operations.artifacts import ArtifactShelf
        from cda.operations.gate import LogSink
        from cda.operations.guard import GuardDesk

        self.options = options
        if options.out is not None:
            self.out = Path(options.out)
            self.out.mkdir(parents=True, exist_ok=True)
        else:  # the server's own folder for its life, removed when it ends
            self.out = Path(tempfile.mkdtemp(prefix="cda-mcp-"))
            weakref.finalize(self, shutil.rmtree, self.out, True)
        self.owners: dict[str, str] = {}
        self.sessions: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.log: Any = None
        self.sink = LogSink(self)
        self.shelf = ArtifactShelf(self.out, self.out / "receipts.sqlite", self.owners.get)
        self.guardian = (GuardDesk.beside(options.guard_policies, options.guard_ledger)
                         if options.guard_policies is not None and options.guard_ledger is not None else None)
        self.fixed_roots = tuple(Path(r) for r in options.allow_root) or None
        self.stopping = False  # set when the HTTP server begins to stop: a call cut then was not cancelled

    # the gate's receipt log, opened on first refusal (LogSink calls append/count), its head signed
    # after every receipt
    def _gate_log(self) -> Any:
        if self.log is None:
            from cda.actions.log_guard import SignedLog

            self.log = SignedLog(self.out / "gate.sqlite", "mcp.gate")
        return self.log

    def append(self, receipt: Any) -> str:
        with self.lock:
            return str(self._gate_log().append(receipt))

    def count(self, action_id: str) -> int:
        with self.lock:
            return int(self._gate_log().count(action_id))

    async def stopped(self, ctx: Any, op: Any, who: Principal, token: CancelToken, ended: threading.Event,
                      env: SimpleNamespace) -> None:
        """A call whose request was cancelled: stop its run and wait until its thread is gone, then
        receipt it (``mcp.cancelled`` in ``OUT/gate.sqlite``, status ``cancelled``).

        The SDK cancels the handler's scope on the client's ``notifications/cancelled`` (and when
        the connection closes or the server stops); the run's :class:`CancelToken` then expires
        every deadline of the run and interrupts z3 or clingo in flight (docs/agents.md,
        "Cancelling a call"). The MCP specification forbids an answer to a cancelled request, so
        the receipt is the call's record: the run stopped, and when."""
        import anyio
        import anyio.to_thread

        try:
            asked = cancel_requested(ctx)
        except SdkChanged as exc:  # said in the receipt and the log, never taken for a lost connection
            _LOG.error("%s", exc)
            token.cancel(f"stopped, cause unknown: {exc}", "interrupted")
        else:
            if asked:
                token.cancel("cancelled by the client (notifications/cancelled)", "cancelled")
            elif self.stopping:
                token.cancel("interrupted: the server is stopping", "interrupted")
            elif getattr(getattr(ctx, "request_context", None), "request", None) is not None:
                # streamable HTTP at the 2026 protocol: a client cancels by closing the call's response stream
                token.cancel("cancelled by the client (it closed the call's response stream)", "cancelled")
            else:
                token.cancel("interrupted: the client's connection closed", "interrupted")
        with anyio.CancelScope(shield=True):
            gone = await anyio.to_thread.run_sync(ended.wait, STOP_GRACE_S)
            took = None if token.at is None else time.monotonic() - token.at
            detail: dict[str, Any] = {"operation": op.name, "tool": op.mcp, "principal": who.name, "role": who.role,
                                      "request_id": str(getattr(ctx, "request_id", "") or ""),
                                      "stopped": token.kind, "reason": token.reason, "run_ended": gone,
                                      "ended_after_s": round(took, 3) if gone and took is not None else None,
                                      "action_ids": [run.outputs.action_id for run in env.runs]}
            from cda.contracts.receipt import Receipt, canonical_json, sha256_hex

            self.append(Receipt(action_id="mcp", seq=self.count("mcp"), kind="action", name="mcp.cancelled",
                                inputs_hash=sha256_hex(canonical_json({k: detail[k] for k in ("operation", "principal",
                                                                                               "request_id")})),
                                result=detail, status="cancelled"))

    def env(self, who: Principal) -> SimpleNamespace:
        from cda.operations.investigate import desk_for

        def reflection() -> Any:
            from cda.actions.receipts import ReceiptLog
            from cda.actions.reflection import ReflectionStore
            from cda.keys.signing import local_signer

            db = self.out / "receipts.sqlite"
            return ReflectionStore(db, ReceiptLog(db, signer=local_signer()))  # its receipts vouched for

        return SimpleNamespace(out_dir=self.out, runs=[], sessions=self.sessions.setdefault(who.name, {}),
                               artifacts=self.shelf, investigations=desk_for(self.out / "investigations.sqlite",
                                                                             sessions_file=True),
                               conductor_db=self.out / "conductor.sqlite", guardian=self.guardian,
                               reflection=_Lazy(reflection), ken_cache={})

    async def principal(self, ctx: Any) -> Principal:
        request = getattr(ctx.request_context, "request", None)
        who = request.scope.get("cda.principal") if request is not None and hasattr(request, "scope") else None
        if who is not None:
            return who  # type: ignore[no-any-return]
        return local_user(await self._roots(ctx), code=self.options.allow_code, approves=False)

    async def _roots(self, ctx: Any) -> tuple[Path, ...]:
        if self.fixed_roots is not None:
            return self.fixed_roots
        try:
            session = ctx.session
            caps = session.client_capabilities
            if caps is not None and getattr(caps, "roots", None) is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the roots capability is deprecated by the protocol, still used
                    listed = await session.list_roots()
                paths = tuple(Path(str(r.uri).removeprefix("file://")) for r in listed.roots
                              if str(r.uri).startswith("file://"))
                if paths:
                    return paths
        except Exception:  # noqa: BLE001 - a client without roots: the working directory
            pass
        return (Path.cwd(),)


class _Lazy:
    """A reflection store opened on first use (most sessions never issue an approval)."""

    def __init__(self, make: Any) -> None:
        self.make, self.made = make, None

    def __getattr__(self, name: str) -> Any:
        if self.made is None:
            self.made = self.make()
        return getattr(self.made, name)


def _signature(op: Any, context: Any) -> inspect.Signature:
    """The tool function's signature: the operation's parameters (types, limits, defaults,
    descriptions) and the SDK's context."""
    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=context)]
    for name in op.params_at(Door.MCP):
        field: FieldInfo = op.params.model_fields[name]
        annotation = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
        if field.is_required():
            default: Any = inspect.Parameter.empty
            annotation = Annotated[annotation, Field(description=field.description)]
        elif field.default_factory is not None:
            default = Field(default_factory=field.default_factory, description=field.description)  # type: ignore[arg-type]
        else:
            default = Field(default=field.default, description=field.description)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default))
    return inspect.Signature(params, return_annotation=op.result)


def _source(op: Any, args: dict[str, Any]) -> str:
    for name in _SOURCES:
        if args.get(name) is not None:
            return "circuit.bench" if name == "bench" else name
    return str(args.get("path") or op.mcp)


def _tool(door: _Door, op: Any, context: Any) -> Any:
    import anyio
    import anyio.from_thread
    import anyio.to_thread

    async def tool(ctx: Any, **args: Any) -> Any:
        who = await door.principal(ctx)
        env = door.env(who)
        source = _source(op, args)

        token = CancelToken()  # the call's: every deadline of the run expires with it, the solver is interrupted
        ended = threading.Event()

        def progress(fraction: float, message: str) -> None:
            if not token.cancelled:  # nothing more is sent about a call that was cancelled
                anyio.from_thread.run(ctx.report_progress, fraction, 1.0, message)

        def call() -> Any:
            try:
                with cancel_scope(token):
                    return invoke(op, args, principal=who, door=Door.MCP, env=env, base_dir=Path.cwd(),
                                  egress_cap=door.options.egress_cap, sink=door.sink,  # type: ignore[arg-type]  # argparse choices
                                  progress=progress)
            finally:
                ended.set()

        try:
            # abandoned on cancel only to hear of the cancel at once: _stopped waits for the thread
            result = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            await door.stopped(ctx, op, who, token, ended, env)
            raise
        except ValidationError as exc:
            raise _tool_error(_invalid_params(op, exc), source) from None
        except Refused as exc:
            raise _tool_error(exc, source, args) from None
        except CDAError as exc:
            raise _tool_error(exc, source, args) from None
        for run in env.runs:  # what this caller ran is theirs to read back (artifacts_get)
            door.owners[run.outputs.action_id] = who.name
        return result

    signature = _signature(op, context)
    tool.__signature__ = signature  # type: ignore[attr-defined]
    tool.__annotations__ = {**{p.name: p.annotation for p in signature.parameters.values()},
                            "return": signature.return_annotation}  # what the SDK finds its Context by
    tool.__name__ = op.mcp
    return tool


def _invalid_params(op: Any, exc: ValidationError) -> OperationError:
    """A call's arguments the params model refused, as the gate names them at every door
    (``invalid_params``, the argument's path, the check's own words): never pydantic's text,
    its error URL or a model's class name."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    if op.name == "actions.run" and first["loc"] and first["loc"][0] == "inputs":
        message = f"inputs do not match CDAInputs: {where}: {message}"
    elif where:
        message = f"{where}: {message}"
    return OperationError("invalid_params", message, list(first["loc"]))


def _strict(tool: Any) -> Any:
    """``tool`` refusing an argument it does not take, as the ToolBus does (the gate's
    ``invoke`` names it): the SDK's argument model would drop it silently (a misspelt ``timout``
    on ``solve`` ran with no budget), so the model lets extras through to the gate and the input
    schema says ``additionalProperties: false``.

    Arguments the SDK's model refuses (``{"timeout": "abc"}``, a list for a number) are passed on
    unvalidated too: the SDK would answer with pydantic's own report (its URL, ``solveArguments``),
    and the gate refuses them with the same model, in its own words (:func:`_invalid_params`)."""
    from pydantic import ConfigDict

    base = tool.fn_metadata.arg_model

    def dump(self: Any) -> dict[str, Any]:
        return {**base.model_dump_one_level(self), **(self.model_extra or {})}

    def validate(cls: Any, obj: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return base.model_validate.__func__(cls, obj, *args, **kwargs)
        except ValidationError:
            if not isinstance(obj, dict):
                raise
            return cls.model_construct(**obj)  # the gate validates the call's parameters: its refusal answers

    # made under the SDK's own name (solveArguments)
    tool.fn_metadata.arg_model = type(base.__name__, (base,), {
        "model_config": ConfigDict(**{**base.model_config, "extra": "allow"}), "model_dump_one_level": dump,
        "model_validate": classmethod(validate), "__module__": base.__module__})
    tool.parameters["additionalProperties"] = False
    return tool


def build_server(options: McpOptions | None = None) -> Any:
    """The server, its tools (the registry's MCP door) and resources registered (the SDK imported here)."""
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.tools import Tool

    door = _Door(options if options is not None else _options())
    tools = [_strict(Tool.from_function(_tool(door, op, Context), name=op.mcp, description=op.summary,
                                        structured_output=True)) for op in for_door(Door.MCP)]
    server = MCPServer(
        tools=tools,
        name="cda",
        log_level="WARNING",
        version=cda_version(),
        instructions=(
            "CDA: constraint-driven abduction. Write a problem in the CDA DSL (resource cda://docs/dsl): "
            "check it, solve it (ranked explanations, verdicts on claims with proofs and counterexamples, "
            "next tests, conflicts), or build it item by item in a session and re-solve after each edit."
        ),
    )
    server.cda_door = door  # type: ignore[attr-defined]

    docs = _ROOT / "docs" / "dsl.md"
    if docs.is_file():
        @server.resource("cda://docs/dsl", name="dsl", description="The CDA DSL reference", mime_type="text/markdown")
        def dsl_reference() -> str:
            return docs.read_text(encoding="utf-8")

    examples = _ROOT / "examples"
    for path in sorted(examples.glob("*.cda")) + sorted(examples.glob("*.fol")) if examples.is_dir() else []:
        server.resource(f"cda://examples/{path.name}", name=path.stem, description=f"example problem {path.name}",
                        mime_type="text/plain")(_reader(path))
    return server


def _reader(path: Path) -> Any:
    def read() -> str:
        return path.read_text(encoding="utf-8")

    read.__name__ = f"example_{path.stem}"
    return read


def main_mcp(args: Any, err: TextIO) -> int:
    """``cda mcp``: serve until the client closes stdio (or until interrupted, over HTTP)."""
    from cda.adapters.http_guard import is_loopback

    options = _options(**vars(args))
    for root in options.allow_root:
        if not Path(root).is_dir():
            err.write(f"cda: error: --allow-root {root}: not a folder\n")
            return 2
    if (options.guard_policies is None) != (options.guard_ledger is None):
        err.write("cda: error: --guard-policies and --guard-ledger go together\n")
        return 2
    auth = None
    if args.http:
        from cda.adapters.auth import AuthConfig

        try:
            auth = AuthConfig.load(args.auth) if args.auth is not None else None
        except CDAError as exc:
            err.write(f"cda: error: {exc}\n")
            return 2
        if auth is None and not is_loopback(args.host):
            err.write(f"cda: error: --host {args.host}: without --auth FILE cda mcp --http binds loopback only "
                      "(every client would be the local user)\n")
            return 2
    try:
        server = build_server(options)
    except ImportError:
        err.write("cda: error: cda mcp needs the MCP SDK: pip install 'cda[mcp]'\n")
        return 2
    if not args.http:
        server.run("stdio")
        return 0
    from cda.mcp.http import serve_http

    return serve_http(server, args, auth, err)
