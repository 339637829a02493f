"""The CDA service (spec §7): a WebSocket ToolBus for control and SSE for streams, on one ASGI app.

Modules, each with one job: ``protocol`` (the ToolBus frames and their JSON Schemas; the methods
are the operation registry's, :mod:`cda.operations`), ``env`` (what the server offers its
operations), ``store`` (tolerant reads of the event store, the retention sweep),
``streams`` (the hub that wakes subscribers, the SSE endpoint), ``actions`` (running actions off
the event loop, approvals, cancel, restarts), ``toolbus`` (the WebSocket endpoint), ``page`` (the
static page), ``app`` (the routes), ``serve`` (``cda serve`` on uvicorn). Nothing here is imported
by ``import cda`` or ``cda --help``: starlette and uvicorn load only when the server starts.
"""
