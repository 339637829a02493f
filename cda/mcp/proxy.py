"""``cda guard proxy``: the guardian as an MCP gateway in front of real MCP servers.

The gateway is an MCP server (stdio, or streamable HTTP behind the Host/Origin guard and, with
``--auth``, the bearer tokens of ``cda mcp --http``) and an MCP client of each upstream server
(``--upstream NAME=COMMAND…`` started as a subprocess, ``--upstream-url NAME=URL``). It lists the
upstreams' tools as its own (``NAME.tool`` when there are several) and registers each in the
guardian file's MCP_TOOL_REGISTRY (name, the upstream's version, the input schema). For every
``tools/call`` it builds the guardian's proposed action — ``action_type`` the tool's name
(lowercased), ``tool`` its name and version, ``parameters`` the arguments (checked against the
tool's input schema), ``resources`` ``mcp:NAME/tool`` and those of the policy file's ``[[tool]]``
rule, ``cost_estimate`` and ``currency`` from that rule (0 when none matches), ``agent_id`` the
``--agent`` — and passes it through :meth:`cda.guardian.gate.Gate.call`, so the upstream is called
**only on APPROVE**, with the cost reserved before and settled after (released when the call
fails). A REJECT is a tool error naming the policy and the facts that violate it; an ESCALATE is a
tool error naming the escalation a person resolves (:mod:`cda.guardian.escalations`), and holds
nothing. The agent's next identical call after an approval goes through once.

Every decision is recorded in the guardian file (``decisions``) and is a receipt in the receipt
log (``--receipts``, default ``<ledger>.receipts.sqlite``, fsynced per commit with ``--fsync``), and
so is every upstream call (``guard.proxy.call``). docs/guardian.md, "The gateway".
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import shlex
import threading
import unicodedata
import uuid
from collections.abc import Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from cda.conductor.mcp_transport import DEFAULT_MAX_REPLY
from cda.errors import CDAError, innermost

__all__ = ["GuardProxy", "UpstreamSpec", "build_proxy_server", "main_proxy", "parse_upstream"]

STOP_GRACE_S = 30.0
"""Seconds a cancelled call's upstream has to answer the cancel before the gateway stops waiting."""
_VERSION_OK = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz.+-"


@dataclass(frozen=True)
class UpstreamSpec:
    """One upstream MCP server: its name, and a command line (stdio) or a URL (streamable HTTP)."""

    name: str
    command: tuple[str, ...] = ()
    url: str | None = None


def parse_upstream(text: str, *, url: bool, index: int) -> UpstreamSpec:
    """``NAME=COMMAND ARGS…`` (or ``NAME=URL``); without ``NAME=`` the name is ``upstream<index>``."""
    name, sep, rest = text.partition("=")
    if not sep or not name.replace("_", "").replace("-", "").isalnum() or " " in name or "/" in name:
        name, rest = f"upstream{index}", text
    if not name[0].isalpha() or len(name) > 32:
        raise CDAError(f"upstream name {name!r}: a letter, then letters, digits, _ or - (up to 32)")
    if url:
        if not rest.startswith(("http://", "https://")):
            raise CDAError(f"--upstream-url {text!r}: an http:// or https:// URL of a streamable HTTP MCP server")
        return UpstreamSpec(name, url=rest)
    try:
        words = tuple(shlex.split(rest))
    except ValueError as exc:
        raise CDAError(f"--upstream {text!r}: {exc}") from None
    if not words:
        raise CDAError(f"--upstream {text!r}: no command")
    return UpstreamSpec(name, command=words)


@dataclass
class _Tool:
    """An upstream tool as the gateway lists it."""

    listed: str  # the name the agent calls
    upstream: str
    name: str  # the upstream's name
    version: str
    schema: dict[str, Any]
    description: str | None
    listing: Any  # the upstream's Tool


@dataclass
class _Upstream:
    spec: UpstreamSpec
    client: Any = None
    version: str = "0"


@dataclass
class GuardProxy:
    """The gateway's state: the upstreams, their tools, the policy store, the guardian file."""

    upstreams: list[UpstreamSpec]
    policies: Path
    ledger: Path
    agent: str
    receipts: Path | None = None
    seed: int = 0
    simulator: Any = None
    fsync: bool = False
    max_reply_bytes: int = DEFAULT_MAX_REPLY
    tools: dict[str, _Tool] = field(default_factory=dict)
    _links: dict[str, _Upstream] = field(default_factory=dict)
    _local: threading.local = field(default_factory=threading.local)
    _log_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        from cda.guardian.guardian_db import is_identifier
        from cda.guardian.policies import load_policy_store

        if not is_identifier(self.agent, "_.:@-"):
            raise CDAError(f"--agent {self.agent!r}: letters, digits and _.:@- (up to 128), starting with one of "
                           "the first two")
        names = [u.name for u in self.upstreams]
        if not names:
            raise CDAError("give at least one upstream MCP server (--upstream NAME=COMMAND or --upstream-url NAME=URL)")
        if len(set(names)) != len(names):
            raise CDAError(f"two upstreams are named alike ({', '.join(sorted(names))}): name them NAME=…")
        if not self.ledger.is_file():
            raise CDAError(f"cannot read {self.ledger}: No such file (the guardian's SQLite file; "
                           f"`cda task budget AGENT AMOUNT --store {self.ledger}` creates it with a budget)")
        self.store = load_policy_store(self.policies)
        if self.receipts is None:
            from cda.store import companion

            self.receipts = companion(self.ledger, "receipts")
        from cda.actions.log_guard import SignedLog
        from cda.store import Durability

        # the receipt log as cda serve keeps its own: never corrupted by a killed process, fsynced
        # per commit only with --fsync (the money in the guardian file is fsynced at every commit);
        # its head signed after every receipt, so the newest cannot be cut off unseen
        self.log = SignedLog(self.receipts, "guard.proxy",
                             durability=Durability.FULL if self.fsync else Durability.NORMAL)

    # ------------------------------------------------------------------ upstreams
    async def start(self, stack: AsyncExitStack) -> None:
        """Connect every upstream, list its tools and register them (the guardian file's
        MCP_TOOL_REGISTRY and the gate's registry)."""
        from mcp import Client

        from cda.conductor.mcp_transport import capped_http, capped_stdio
        from cda.guardian.gate import ToolRegistry
        from cda.guardian.guardian_db import GuardianStore

        several = len(self.upstreams) > 1
        for spec in self.upstreams:
            target: Any = (capped_http(spec.url, max_bytes=self.max_reply_bytes) if spec.url is not None else
                           capped_stdio(list(spec.command), max_bytes=self.max_reply_bytes))
            try:
                client = await stack.enter_async_context(Client(target, read_timeout_seconds=300, cache=None))
                listed = (await client.list_tools()).tools
            except Exception as exc:  # noqa: BLE001 - any failure to reach it is one clear line
                cause = innermost(exc)
                raise CDAError(f"upstream {spec.name}: cannot connect or list its tools ({type(cause).__name__}: "
                               f"{cause})") from None
            info = client.server_info
            version = (getattr(info, "version", "") or "0")[:32]
            if not version[0].isalnum() or any(c not in _VERSION_OK for c in version):
                version = "0"
            self._links[spec.name] = _Upstream(spec, client, version)
            for listing in listed:
                name = f"{spec.name}.{listing.name}" if several else listing.name
                if name in self.tools:
                    raise CDAError(f"two upstream tools are listed as {name!r}")
                self.tools[name] = _Tool(name, spec.name, listing.name, version, dict(listing.input_schema or {}),
                                         listing.description, listing)
        self.registry = ToolRegistry(None)
        with GuardianStore.open(self.ledger) as store:
            self.registry._store = store
            for tool in self.tools.values():
                self.registry.register(_ref_name(tool), tool.version, tool.schema, self._forward(tool))
            self.registry._store = None

    def _forward(self, tool: _Tool) -> Any:
        """The registry's implementation of ``tool``: the call's own arguments (as the agent sent
        them) to the upstream, from the gate's worker thread to the event loop."""
        import anyio.from_thread

        def run(_parameters: Mapping[str, Any]) -> Any:
            client = self._links[tool.upstream].client
            scope = getattr(self._local, "scope", None) or anyio.CancelScope()
            arguments = self._local.arguments  # read here: the call below runs on the event loop's thread
            answer: list[Any] = []

            async def upstream() -> None:
                with scope:  # cancelled when the agent cancels its call: the SDK tells the upstream
                    answer.append(await client.call_tool(tool.name, arguments))

            try:
                anyio.from_thread.run(upstream)
            except (asyncio.CancelledError, concurrent.futures.CancelledError):  # the agent's call was cancelled
                pass
            if not answer:  # raised, so the gate releases the reservation (the upstream was told to stop)
                raise CallCancelled(f"{tool.listed}: the agent cancelled the call before {tool.upstream} answered")
            return answer[0]

        return run

    # ------------------------------------------------------------------ one call
    def _ledger(self) -> Any:
        """This worker thread's connection to the guardian file (reservations are atomic across them)."""
        from cda.guardian.ledger import Ledger

        ledger = getattr(self._local, "ledger", None)
        if ledger is None:
            ledger = self._local.ledger = Ledger.open(self.ledger)
        return ledger

    def action_for(self, tool: _Tool, arguments: Mapping[str, Any], action_id: str) -> Any:
        """The proposed action of a call (see the module's docstring), or the Malformed that says
        why there is none."""
        from cda.guardian.proposal import Malformed, read_action

        rule = self.store.tool_rule(tool.listed)
        resources = [f"mcp:{tool.upstream}/{tool.name}"]
        for template in rule.resources if rule is not None else ():
            assert rule is not None
            try:
                resources.append(template.format_map(_Arguments(arguments)))
            except _PathInjection as exc:
                from cda.contracts.receipt import canonical_json, sha256_hex

                return Malformed(f"$.parameters.{exc.key}",
                                 f"the argument {exc.key} ({json.dumps(exc.value[:64])}) cannot fill the resource "
                                 f"{template!r} of the [[tool]] rule {rule.name!r}: {exc.reason}",
                                 sha256_hex(canonical_json({"tool": tool.listed})))
            except (KeyError, ValueError, IndexError) as exc:
                from cda.contracts.receipt import canonical_json, sha256_hex

                return Malformed(f"$.parameters.{exc.args[0] if isinstance(exc, KeyError) else ''}".rstrip("."),
                                 f"the [[tool]] rule {rule.name!r} names the resource {template!r}, which this call's "
                                 f"arguments do not fill", sha256_hex(canonical_json({"tool": tool.listed})))
        return read_action({
            "action_id": action_id, "agent_id": self.agent,
            "tool": {"name": _ref_name(tool), "version": tool.version},
            "action_type": tool.listed.lower(), "resources": resources,
            "cost_estimate": str(rule.cost) if rule is not None else "0",
            "currency": rule.currency if rule is not None else "USD",
            "parameters": dict(arguments), "description": f"MCP tools/call {tool.listed}"[:1024],
        })

    def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """Decide one ``tools/call`` and make it only on APPROVE (run in a worker thread)."""
        from mcp_types import CallToolResult, TextContent

        from cda.contracts.receipt import Receipt
        from cda.guardian import escalations as esc
        from cda.guardian.decision import Decision, render
        from cda.guardian.gate import Gate, tool_id
        from cda.guardian.proposal import ProposedAction

        tool = self.tools.get(name)
        if tool is None:
            return _error(f"no tool {name!r} here (tools/list names them)")
        ledger = self._ledger()
        ref = tool_id(_ref_name(tool), tool.version)
        key = esc.call_key(self.agent, ref, dict(arguments))
        action_id = f"mcp-{uuid.uuid4().hex}"
        self._local.arguments = dict(arguments)
        resolved = esc.claim(ledger, key, self.store.digest, used_by=f"call:{action_id}")
        if resolved.escalation is not None and not resolved.approved:
            doc = resolved.escalation.resolution or {}
            self._receipt(Receipt(action_id=action_id, seq=0, kind="action", name="guard.proxy.refused",
                                  inputs_hash=key, result={"escalation": resolved.escalation.escalation_id,
                                                           "resolution": "reject"}, status="denied"))
            return _error(f"REJECT by {doc.get('by')}: escalation {resolved.escalation.escalation_id} was rejected: "
                          f"{doc.get('reason')}")
        if resolved.escalation is not None:  # a person approved this very call: it goes through once
            e = resolved.escalation
            try:
                result = self._forward(tool)(arguments)
            except BaseException:
                esc.release_claim(ledger, e)
                raise
            esc.settle_claim(ledger, e)
            self._call_receipt(action_id, key, tool, result, f"escalation:{e.escalation_id}", e.tx_id)
            return result
        action = self.action_for(tool, arguments, action_id)
        gate = Gate(self.registry, self.store, self.simulator, ledger, seed=self.seed, receipts=self)
        outcome = gate.call(action)
        record = outcome.record
        proposed = action if isinstance(action, ProposedAction) else None
        ledger.store.record_decision(record, proposed)
        if outcome.called:
            self._call_receipt(action_id, key, tool, outcome.result, f"decision:{record.receipt}", f"call:{action_id}")
            return outcome.result
        text = render(record)
        if record.decision is Decision.ESCALATE and proposed is not None:
            e, _ = esc.escalate(ledger.store, key=key, action=proposed, tool_id=ref, record=record,
                                proposed_by=f"gateway:{self.agent}")
            text = (f"ESCALATE: held for a person's decision as escalation {e.escalation_id} (nothing was called or "
                    f"reserved; once it is approved, the same call goes through once)\n{text}")
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True,
                                  structured_content={"escalation_id": e.escalation_id,
                                                      "decision": record.model_dump(mode="json")})
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True,
                              structured_content={"decision": record.model_dump(mode="json")})

    def _receipt(self, receipt: Any) -> str:
        with self._log_lock:
            return str(self.log.append(receipt))

    append = _receipt  # the gate's receipt sink, and the bearer gate's log of refusals

    def count(self, action_id: str) -> int:
        with self._log_lock:
            return int(self.log.count(action_id))

    def _call_receipt(self, action_id: str, key: str, tool: _Tool, result: Any, why: str, tx: str | None) -> None:
        from cda.contracts.receipt import Receipt

        self._receipt(Receipt(action_id=action_id, seq=1, kind="action", name="guard.proxy.call", inputs_hash=key,
                              result={"tool": tool.listed, "upstream": tool.upstream, "because": why, "tx_id": tx,
                                      "upstream_error": bool(getattr(result, "is_error", False))},
                              status="failed" if getattr(result, "is_error", False) else "ok"))

    def close(self) -> None:
        ledger = getattr(self._local, "ledger", None)
        if ledger is not None:
            ledger.close()
        self.log.close()


class _Arguments(dict):  # type: ignore[type-arg]
    """A call's arguments for ``str.format_map``: each as its text; a missing one is a KeyError,
    one that would add path structure to the resource a :class:`_PathInjection`."""

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        super().__init__({k: v for k, v in arguments.items() if isinstance(v, str | int) and not isinstance(v, bool)})

    def __getitem__(self, key: str) -> Any:
        value = super().__getitem__(key)
        if isinstance(value, str) and (reason := _injects(value)):
            raise _PathInjection(key, value, reason)
        return value


class _PathInjection(Exception):
    """A template argument that is not one segment of a resource name (docs/guardian.md, "The MCP gateway")."""

    def __init__(self, key: str, value: str, reason: str) -> None:
        super().__init__(key)
        self.key, self.value, self.reason = key, value, reason


_SEPARATORS = "/\\\u2215\u2044\u29f8\u29f9\ufe68"
"""Slash, backslash and the look-alikes NFKC leaves alone (division slash, fraction slash, big
solidus, big reverse solidus, small reverse solidus)."""


def _injects(value: str) -> str | None:
    """Why ``value`` may not fill one ``{argument}`` of a resource template, or None: a segment
    holds no separator (``/``, ``\\``, nor a look-alike once NFKC-normalised), is not ``.`` or
    ``..`` or empty, and holds no control or invisible format character (``x/../prod`` and
    ``./prod`` once slipped past a ``prod/*`` rule)."""
    folded = unicodedata.normalize("NFKC", value)
    if not value:
        return "it is empty"
    if any(c in folded for c in _SEPARATORS):
        return "it contains a path separator"
    if folded in (".", ".."):
        return f"it is the path segment {folded!r}"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in value):
        return "it contains a control or invisible character"
    return None


def _cda_error_in(group: BaseExceptionGroup) -> CDAError | None:  # type: ignore[type-arg]
    """The CDAError a task group wrapped on its way out (an upstream that does not list its
    tools, a schema the registry refuses), or None when the group holds something else."""
    found = group.subgroup(CDAError)
    return None if found is None else innermost(found)  # type: ignore[return-value]


class CallCancelled(CDAError):
    """The agent cancelled a call while the upstream ran it: the upstream was sent the cancel, the
    reservation is released (as for any call that fails), and nothing is answered."""


def _ref_name(tool: _Tool) -> str:
    """The tool's name in the guardian's registry: the listed name (``NAME.tool`` with several)."""
    return tool.listed


def _error(text: str) -> Any:
    from mcp_types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def build_proxy_server(proxy: GuardProxy) -> Any:
    """The gateway's low-level MCP server: tools/list and tools/call (the SDK imported here)."""
    import anyio.to_thread
    import mcp_types as types
    from mcp.server.lowlevel import Server

    from cda.operations import cda_version

    async def list_tools(ctx: Any, params: Any) -> Any:
        tools = []
        for t in proxy.tools.values():
            tools.append(t.listing.model_copy(update={"name": t.listed}))
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> Any:
        arguments = dict(params.arguments or {})
        upstream = anyio.CancelScope()
        ended = threading.Event()

        def call() -> Any:
            proxy._local.scope = upstream  # this worker thread's call to the upstream is cancelled with it
            try:
                return proxy.call(params.name, arguments)
            except CallCancelled as exc:  # nobody is waiting for the answer: the receipt is the call's record
                from cda.contracts.receipt import Receipt, canonical_json, sha256_hex

                proxy.append(Receipt(action_id="guard.proxy", seq=proxy.count("guard.proxy"), kind="action",
                                     name="guard.proxy.cancelled", status="cancelled",
                                     inputs_hash=sha256_hex(canonical_json({"tool": params.name})),
                                     result={"tool": params.name, "reason": str(exc), "reservation": "released"}))
                return None
            finally:
                proxy._local.scope = None
                ended.set()

        try:
            return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():  # the agent cancelled: so is the upstream call in flight
            upstream.cancel()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(ended.wait, STOP_GRACE_S)
            raise

    return Server("cda-guard-proxy", version=cda_version(),
                  instructions="Tools of upstream MCP servers, each call decided by CDA's guardian first "
                  "(APPROVE: called; REJECT: refused with the policy; ESCALATE: held for a person).",
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve_stdio(proxy: GuardProxy) -> None:
    from mcp.server.stdio import stdio_server

    server = build_proxy_server(proxy)
    async with AsyncExitStack() as stack:
        await proxy.start(stack)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


def http_proxy_app(proxy: GuardProxy, args: Any, auth: Any) -> Any:
    """The gateway's streamable HTTP app, its upstreams connected in the app's lifespan, behind
    the same gatekeepers as ``cda mcp --http`` (:func:`cda.mcp.http.guarded`)."""
    from mcp.server.transport_security import TransportSecuritySettings

    from cda.mcp.http import guarded

    server = build_proxy_server(proxy)
    app: Any = server.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False), host=args.host)
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> Any:
        async with AsyncExitStack() as stack:
            await proxy.start(stack)
            async with inner(a):
                yield

    app.router.lifespan_context = lifespan
    return guarded(app, args, auth, proxy)


def main_proxy(args: Any, err: TextIO) -> int:
    """``cda guard proxy``: serve until the client closes stdio (or until interrupted, over HTTP)."""
    import anyio

    from cda.adapters.http_guard import is_loopback

    try:
        specs = [parse_upstream(u, url=False, index=i) for i, u in enumerate(args.upstream, 1)]
        specs += [parse_upstream(u, url=True, index=len(specs) + i) for i, u in enumerate(args.upstream_url, 1)]
        simulator = None
        if args.sim is not None:
            from cda.guardian.simulation import load_simulator

            simulator = load_simulator(args.sim, samples=args.samples)
        proxy = GuardProxy(specs, args.policies, args.ledger, args.agent, args.receipts, args.seed, simulator,
                           args.fsync, args.max_reply_bytes)
    except CDAError as exc:
        err.write(exc.render() + "\n")
        return 2
    auth = None
    try:
        if not args.http:
            try:
                anyio.run(_serve_stdio, proxy)
            except BaseExceptionGroup as group:  # the upstreams' task groups wrap a CDAError on its way out
                error = _cda_error_in(group)
                if error is None:
                    raise
                err.write(error.render() + "\n")
                return 2
            return 0
        from cda.adapters.auth import AuthConfig

        auth = AuthConfig.load(args.auth) if args.auth is not None else None
        if auth is None and not is_loopback(args.host):
            err.write(f"cda: error: --host {args.host}: without --auth FILE cda guard proxy --http binds loopback "
                      "only (every client would spend the agent's budget)\n")
            return 2
        from cda.mcp.http import serve_app

        return serve_app(http_proxy_app(proxy, args, auth), args, err)
    except CDAError as exc:
        err.write(exc.render() + "\n")
        return 2
    finally:
        proxy.close()
