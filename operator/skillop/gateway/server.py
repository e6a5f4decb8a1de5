"""The gateway's MCP server: list the set, vet each call, forward it, audit it.

``tools/list`` answers the mounted set's ``mcp`` and ``agent_skill`` tools, no
more (``listing``). ``tools/call`` of anything else is the MCP error for an
unknown tool. A known tool goes through the call path's guards in order
(``pipeline``, ``guards``: the rug-pull check, approval, the forward within
``timeoutSeconds``); the result goes back as the upstream gave it, minus any
secret value it echoes.

Refusals and failures are tool results with ``isError`` and a reason the model
can read (the gateway's own words, no upstream or secret text). Every call, of
any outcome, is recorded once (``pipeline.CallRecord``): one audit line.

With ``callers`` in the set, each request is made for the caller its token names
(``identity``: over HTTP the front's door refuses one without a valid token; stdio has none).

Over HTTP (``serve``), ``front.Front`` answers most requests itself with plain JSON (the hot
path); the SDK's server handles the session's life, approvals and notifications. Both end in
``Gateway.call``. Connected clients are kept in ``sessions.Sessions`` (to be told
``list_changed``) and forgotten when their session ends. The mounts are watched (``mount``): on
a change the gateway re-reads the set, points the pool at the new upstreams and sends
``notifications/tools/list_changed`` to every connected client.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, Final

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import x_mcp_header_map
from mcp_types.methods import SERVER_RESULTS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from skillop.gateway import approval, pipeline, serve, wire
from skillop.gateway.approval_request import Requests
from skillop.gateway.audit import AuditLog
from skillop.gateway.front import Front
from skillop.gateway.guards import call_path
from skillop.gateway.identity.callers import Refusal
from skillop.gateway.identity.door import REQUEST_CALLER, Door
from skillop.gateway.listing import Listings
from skillop.gateway.mount import Mounts
from skillop.gateway.observe import INBOUND_HEADERS, NOTHING, Observer
from skillop.gateway.options import Options
from skillop.gateway.sdk_server import sdk_server
from skillop.gateway.search_tool import own_record, search_tools
from skillop.gateway.served import ServedSet, needs_approval
from skillop.gateway.sessions import Client, Sessions
from skillop.gateway.upstream import Pool
from skillop.gateway.vectors import SemanticRanker
from skillop.model.caller import ANONYMOUS, Caller
from skillop.model.toolset import CALL_TOOL, SEARCH_TOOL
from skillop.model.wording import count

#: What a client that cannot be asked is told when a call needs approval.
_NOBODY: Final = approval.Nobody(
    "the tool requires approval (requiresApproval) and this client does not support MCP"
    " elicitation, so nobody can be asked")


class Gateway:
    """One gateway process: the served set, the upstream pool, the connected clients."""

    def __init__(self, options: Options, *, audit: AuditLog | None = None,
                 observer: Observer = NOTHING) -> None:
        self.options = options
        self.served = ServedSet.empty()
        self.audit = audit or AuditLog()
        self.observer = observer  # metrics and traces (observe.py)
        #: Who makes and follows the ToolCallApprovals (``spec.approval.via: Request``).
        self.requests = Requests.from_environment(options.api_dir)
        self.calls = pipeline.Pipeline(
            call_path(self.requests, observer=observer, secrets_dir=options.upstream.secrets_dir,
                      ca_file=options.upstream.ca_file),
            [*observer.recorders, self.audit.record],
            say=serve.say, trace_id=observer.tracing.trace_id if observer.tracing else None)
        self._pool: Pool | None = None
        self._mounts = Mounts(options, serve.say)
        self._ranker = (SemanticRanker(options.search_cache_dir, serve.say)
                        if options.semantic_search else None)
        self.sessions = Sessions()
        #: Where ``serve_http`` listens, and its front, once it does.
        self.url: str | None = None
        self.front: Front | None = None
        self._routed: tuple[ServedSet, dict[str, dict[str, Any] | None]] = (self.served, {})
        self._tickets = approval.Tickets()
        #: ``list_changed`` for 2026-07-28 clients, who listen with ``subscriptions/listen``.
        self._bus = InMemorySubscriptionBus()
        #: Who the callers are, by the set's ``callers`` (identity/).
        self.door = Door(observer=observer, ca_file=options.upstream.ca_file)
        self.server = sdk_server(on_list_tools=self._list_tools, on_call_tool=self._call_tool,
                                 on_subscriptions_listen=ListenHandler(self._bus),
                                 get_tool_input_schema=self.input_schema)
        # The server's identity as 2026-07-28 answers carry it: one copy, read-only
        # (the SDK's property copies per call).
        self._listings = Listings(self.server.server_info_stamp)
        self.server.add_notification_handler(
            "notifications/initialized", types.NotificationParams, self._initialized)

    @property
    def connected_clients(self) -> int:
        """Clients whose session is open (the ones ``list_changed`` goes to)."""
        return len(self.sessions)

    # -- lifecycle -----------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        """Load the set, watch the mounts, warm the upstreams (``upstream.Pool``); until exit."""
        async with anyio.create_task_group() as tasks:
            self._pool = Pool(replace(self.options.upstream, observer=self.observer),
                              tasks.start_soon)
            self._listings.listed = self._pool.start_warming  # once a client has its listing
            self.reload()
            tasks.start_soon(self._watch)
            try:
                yield self
            finally:
                self._pool.close()
                await self.requests.close()
                tasks.cancel_scope.cancel()

    async def serve_http(self, host: str, port: int) -> None:
        """Streamable HTTP at ``http://host:port/mcp`` until cancelled (``serve``)."""
        await serve.serve_http(self, host, port)

    def reload(self) -> bool:
        """Re-read the mounts if they changed; True when the served listing changed."""
        served = self._mounts.read_if_changed(self.served)
        if served is None:
            return False
        old, self.served = self.served, served
        self.observer.serving(served)
        if self.door.update(served.callers) and served.callers is not None:
            serve.say(f"verifying callers' tokens from {served.callers.issuer}")
        if served.search is not None and self._ranker is not None:
            self._ranker.submit(served.search)
        assert self._pool is not None
        self._pool.update(served.upstreams, self._mounts.upstream_signatures(served))
        self._pool.connect_all()
        if old.hash != served.hash and old.hash:
            serve.say(f"reloaded {served.actor}: {count(len(served.tools), 'tool')}"
                      f" ({served.hash})")
        return (old.listing != served.listing
                or old.caller_rules.rules != served.caller_rules.rules)

    async def _watch(self) -> None:
        while True:
            await anyio.sleep(self.options.poll_interval)
            if self.reload():
                await self.notify_list_changed()
            if self.front is not None:
                for key in self.sessions.idle(self.options.session_idle_timeout,
                                              time.monotonic()):
                    await self.front.end_session(key)

    async def notify_list_changed(self) -> None:
        await self._bus.publish(ToolsListChanged())
        for key, client in self.sessions.items():
            try:
                if client.session is not None:
                    await client.session.send_tool_list_changed()
            except Exception:  # that client is gone
                self.sessions.forget(key)

    # -- MCP handlers --------------------------------------------------------------

    async def _initialized(self, ctx: ServerRequestContext[Any],
                           params: types.NotificationParams) -> None:
        headers = getattr(ctx.request, "headers", None)
        session_id = headers.get("mcp-session-id") if headers is not None else None
        caps = ctx.session.client_capabilities
        self.observer.count(lambda m: m.session_opened())
        self.sessions.add(session_id or f"stdio:{id(ctx.session)}", Client(
            ctx.session, can_elicit=caps is not None and caps.elicitation is not None,
            last_seen=time.monotonic(), protocol_version=ctx.protocol_version))

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """A served tool's input schema (the SDK checks a call's Mcp-Param headers)."""
        tool = self.served.tools.get(name)
        return tool.definition.input_schema if tool is not None else None

    def routed_schema(self, name: str) -> dict[str, Any] | None:
        """A served tool's input schema if any of its arguments is carried as an
        ``Mcp-Param-*`` header too (else the SDK's header check compares nothing);
        found once per tool and set."""
        served = self.served
        if self._routed[0] is not served:
            self._routed = (served, {})
        known = self._routed[1]
        if name not in known:
            tool = served.tools.get(name)
            if tool is None:
                return None  # not cached: any name may be asked for
            schema = tool.definition.input_schema
            known[name] = schema if x_mcp_header_map(schema) else None
        return known[name]

    async def _list_tools(self, ctx: ServerRequestContext[Any],
                          params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        """The listing for the request's caller (none for a refused one: stdio without a
        token); over HTTP as an event stream, in pages (``listing``)."""
        caller = await self.door.identify(getattr(ctx.request, "headers", None))
        if isinstance(caller, Refusal):
            return types.ListToolsResult(tools=[])
        return self._listings.page(
            self.served, params.cursor if params is not None else None, caller=caller,
            streamed=(ctx.request is not None
                      and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS))

    async def _call_tool(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams,
                         ) -> types.CallToolResult | types.InputRequiredResult:
        approver = approval.approver_of(ctx, params, self._tickets, _NOBODY)
        headers = getattr(ctx.request, "headers", None)
        # Asked from the request's own headers: the session's tasks may carry another
        # request's context (``REQUEST_CALLER`` is the front's, for its own answers).
        caller = await self.door.identify(headers)
        with self.observer.request("tools/call", params.name, meta=ctx.meta,  # its span
                                   headers=headers, protocol=ctx.protocol_version,
                                   caller=caller):
            if isinstance(caller, Refusal):
                return self._refused(params.name, caller)
            return await self.call(params.name, params.arguments or {}, approver=approver,
                                   caller=caller)

    async def answer(self, method: str, params: dict[str, Any],
                     client: Client) -> wire.Reply | None:
        """The front's answer (the JSON-RPC ``result`` or ``error`` member), or None when
        the SDK must: a call to approve by a client that can be asked, a malformed call."""
        if not self.options.fast_path or (method, client.protocol_version) not in SERVER_RESULTS:
            return None  # (ping is no 2026-07-28 method: the SDK says so)
        if method == "ping":
            return wire.Reply(result=self._listings.shaped("ping", client.protocol_version,
                                                           types.EmptyResult()))
        caller = ANONYMOUS if self.door.callers is None else (  # nobody to ask without
            REQUEST_CALLER.get() or await self.door.identify(INBOUND_HEADERS.get()))
        if isinstance(caller, Refusal):
            return None  # the SDK's handler refuses it, in the era's own form
        if method == "tools/list":
            return wire.Reply(result=self._listings.json(self.served, client.protocol_version,
                                                         caller=caller))
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
            return None
        tool = self.served.target(name, arguments)
        if (tool is not None and client.can_elicit and self.served.approval.via == "Elicitation"
                and needs_approval(self.served, tool, caller)):
            return None
        try:
            if self.observer.tracing is None:  # no span: not even an empty one
                result = await self.call(name, arguments or {}, approver=_NOBODY, caller=caller)
            else:
                with self.observer.request(method, name, meta=params.get("_meta"), caller=caller,
                                           headers=INBOUND_HEADERS.get(),
                                           protocol=client.protocol_version):
                    result = await self.call(name, arguments or {}, approver=_NOBODY,
                                             caller=caller)
        except MCPError as exc:
            return wire.Reply(error=(exc.code, exc.error.message))
        assert isinstance(result, types.CallToolResult)  # nobody was asked
        return wire.Reply(result=self._listings.shaped(method, client.protocol_version, result))

    def _refused(self, name: str, refusal: Refusal) -> types.CallToolResult:
        """A call refused for its caller's token: recorded, and said to the agent."""
        self.calls.record(own_record(self.served, name, time.perf_counter(), refusal.reason))
        return pipeline.error_result(f"refused: {refusal.reason}")

    async def call(self, name: str, arguments: dict[str, Any], *,
                   approver: approval.Approver, caller: Caller = ANONYMOUS,
                   ) -> types.CallToolResult | types.InputRequiredResult:
        """``tools/call``: the result (errors and refusals are results too), or the
        MCP error for an unknown tool; ``approver`` decides a ``requiresApproval``
        call (an ``InputRequiredResult`` when the client is to be asked first: that
        round is not audited, the round that decides is), for ``caller``. In Search mode,
        ``search_tools`` and ``call_tool`` are the gateway's own; ``call_tool`` goes
        down exactly the path a direct call of the tool it names takes."""
        served = self.served  # one call sees one set, whatever a reload does meanwhile
        if served.search is not None and name == SEARCH_TOOL:
            return await search_tools(served, arguments, self.calls.record,
                                      observer=self.observer, caller=caller)
        if served.search is not None and name == CALL_TOOL:
            inner, inner_arguments = arguments.get("name"), arguments.get("arguments")
            if not isinstance(inner, str) or not isinstance(inner_arguments, dict | None):
                self.calls.record(own_record(served, CALL_TOOL, time.perf_counter(),
                                             "malformed call_tool arguments"))
                return pipeline.error_result(f"refused: {CALL_TOOL} takes name (a string)"
                                             " and arguments (an object)")
            name, arguments = inner, inner_arguments or {}
        return pipeline.answer(await self.calls.run(pipeline.Call(
            served, name, arguments, approver, self._pool, self.options.default_timeout,
            caller=caller)))
