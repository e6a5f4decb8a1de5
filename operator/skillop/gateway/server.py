"""The gateway's MCP server: list the set, vet each call, forward it, audit it.

``tools/list`` answers the mounted set's ``mcp`` and ``agent_skill`` tools, no
more. ``tools/call`` of anything else is the MCP error for an unknown tool. A
known tool goes through, in order:

1. the rug-pull check: the upstream's live definition (listed on connect, on
   every ``list_changed``, before which calls wait, and at least every
   ``relist_interval`` seconds) must still have the ToolSet's ``upstreamDigest``;
2. approval, for ``requiresApproval``: by default a ToolCallApproval object a
   person decides (``approval_request.ByRequest``); with the Actor's
   ``spec.approval.via: Elicitation``, the client is asked (``approval``): an MCP
   elicitation, or the 2026-07-28 input-required flow; a client that cannot be
   asked is refused, and told why; then the definition is checked again;
3. the forward, under the tool's name upstream, bounded by ``timeoutSeconds``;
   the result goes back as the upstream gave it, minus any secret value it echoes.

Refusals and failures are tool results with ``isError`` and a reason the model
can read (the gateway's own words, no upstream or secret text). Every call, of
any outcome, writes one audit line.

Over HTTP, ``front.Front`` answers most requests itself with plain JSON (the hot
path); the SDK's server handles the session's life, approvals and notifications.
Both end in ``Gateway.call``. Connected clients are kept in ``front.Sessions``
(to be told ``list_changed``) and forgotten when their session ends.

Hot reload: every ``poll_interval`` seconds the gateway stats the mounted files
(kubelet updates a ConfigMap or Secret volume by swapping its ``..data`` link,
which changes the files' identity; a packed set's index and chunks too, docs/toolset.md);
on a change it re-reads the set, points the
pool at the new upstreams and sends ``notifications/tools/list_changed`` to every
connected client. A set that cannot be read leaves the current one served.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

import anyio
import mcp_types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import x_mcp_header_map
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.methods import SERVER_RESULTS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter

from skillop import __version__
from skillop.gateway import approval, wire
from skillop.gateway.approval_request import ByRequest, PendingCall, Requests
from skillop.gateway.audit import AuditLog, AuditRecord, Outcome
from skillop.gateway.caller import CONNECT_TIMEOUT_SECONDS
from skillop.gateway.front import Client, Front, Sessions
from skillop.gateway.observe import INBOUND_HEADERS, NOTHING, Observer, observing
from skillop.gateway.secrets import DEFAULT_CONFIGMAPS_DIR, file_signature, secrets_signature
from skillop.gateway.served import (
    MAX_MATCHES,
    ServedSet,
    ServedTool,
    ServerKey,
    ToolSetError,
    load_served_set,
)
from skillop.gateway.upstream import (
    CallFailed,
    Connection,
    Link,
    Pool,
    SessionLost,
    Settings,
    UpstreamUnavailable,
)
from skillop.gateway.vectors import SemanticRanker
from skillop.model.settings import API_DIR, GATEWAY_RELIST_INTERVAL
from skillop.model.toolset import CALL_TOOL, INDEX_KEY, PACKED_KEY, SEARCH_TOOL, TOOLS_KEY
from skillop.model.visible import visible
from skillop.model.wording import count
from skillop.sources.egress import EgressGuard
from skillop.sources.mcp_discovery import one_line

#: What a client that cannot be asked is told when a call needs approval.
_NOBODY: Final = approval.Nobody(
    "the tool requires approval (requiresApproval) and this client does not support MCP"
    " elicitation, so nobody can be asked")
#: An approval prompt shows each argument whole; longer ones cannot be approved.
_MAX_SHOWN_VALUE: Final = 2000
_MAX_PROMPT: Final = 8000


def _file_identity(path: Path) -> object:
    """What changes when a file is replaced (kubelet swaps the directory under it)."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size)


def _chunk_keys(directory: Path) -> list[str]:
    """A packed set's chunk files (the Actor's ConfigMap and its parts project them)."""
    try:
        return sorted(name for name in os.listdir(directory) if name.startswith(PACKED_KEY))
    except OSError:
        return []


#: The most JSON a page of a listing sent as an event stream holds: well under the
#: 1 MiB the MCP SDK's client accepts in one event (``DEFAULT_MAX_SSE_EVENT_SIZE``).
LISTING_PAGE_BYTES: Final = 512 * 1024


def _cursor(set_hash: str, page: int) -> str:
    """An opaque cursor: the page, in the set it was given for."""
    return f"{set_hash.removeprefix('sha256:')[:16]}.{page}"


def _page_of(cursor: str | None, set_hash: str, starts: Sequence[int]) -> int | None:
    """The page ``cursor`` names in this set (0 without one); None when it names
    none of them (another set's, or not one of ours)."""
    if cursor is None:
        return 0
    prefix, _, page = cursor.partition(".")
    if prefix != set_hash.removeprefix("sha256:")[:16] or not (
            page.isascii() and page.isdigit() and len(page) <= 6):
        return None
    index = int(page)
    return index if 0 < index < len(starts) and page == str(index) else None


@dataclass(frozen=True, slots=True)
class Options:
    """Where the mounts are and how the gateway behaves (``skillop gateway`` flags)."""

    toolset_dir: Path
    secrets_dir: Path
    allow: tuple[str, ...]
    configmaps_dir: Path = DEFAULT_CONFIGMAPS_DIR
    ca_file: Path | None = None
    poll_interval: float = 1.0
    default_timeout: float = 60.0
    connect_timeout: float = CONNECT_TIMEOUT_SECONDS
    #: Upstreams are listed again at least this often (``--relist-interval``).
    relist_interval: float = GATEWAY_RELIST_INTERVAL.default
    #: An HTTP session nothing was asked in for this long is ended (as the SDK would).
    session_idle_timeout: float = 30 * 60.0
    #: The front answers one-shot requests itself (off: the SDK's server answers
    #: every request, the reference the fast path is tested against).
    fast_path: bool = True
    #: Seconds a request has to arrive whole, headers and body (``--request-timeout``).
    request_timeout: float = 10.0
    #: The projected ServiceAccount token, CA and namespace (approval requests).
    api_dir: Path = Path(API_DIR.default)
    #: ``search_tools``: rank with the sentence model when it is installed (off:
    #: lexical only), and where its vectors are cached (None: in memory only).
    semantic_search: bool = True
    search_cache_dir: Path | None = None
    #: Where Prometheus scrapes ``/metrics`` (``--metrics-listen``; None: no metrics).
    metrics_listen: str | None = None


class _Bound:
    """A forward's ``timeoutSeconds``: one timer of the event loop that cancels the
    calling task when it fires (the gateway runs on anyio's asyncio backend).

    An anyio cancel scope bounded the forward before; made and left on every call,
    with the anyio state it keeps for each new task (every request's is new), it
    cost a call through an idle gateway about a tenth of its CPU
    (bench/gateway_ab.py ``--pause``). This is what ``asyncio.timeout`` does, less
    its own bookkeeping (about half as costly again): the cancellation it sends is
    told from any other by the task's cancel count, as ``asyncio.timeout`` tells
    it, so a cancellation from outside (the client's ``notifications/cancelled``,
    its disconnect, the gateway's shutdown) stays a cancellation, even when the
    timer fired too."""

    __slots__ = ("_cancelling", "_expired", "_task", "_timer")

    def __init__(self, seconds: float) -> None:
        task = asyncio.current_task()
        assert task is not None  # a call runs in a task
        self._task = task
        self._cancelling = task.cancelling()
        self._expired = False
        self._timer = asyncio.get_running_loop().call_later(seconds, self._expire)

    def _expire(self) -> None:
        self._expired = True
        self._task.cancel()

    def expired_alone(self) -> bool:
        """Whether the cancellation being raised is the timer's alone (its own is
        taken back; nobody else's is pending)."""
        return self._expired and self._task.uncancel() <= self._cancelling

    def disarm(self) -> None:
        self._timer.cancel()


class _Refused(Exception):
    """The gateway will not run this call; ``str`` is the reason, ``verdict`` the
    approval's refusal when that is the reason (for the audit line)."""

    def __init__(self, reason: str, verdict: approval.Refused | None = None) -> None:
        super().__init__(reason)
        self.verdict = verdict


class _Failed(Exception):
    """The call could not complete; ``str`` is the reason, ``audit`` the same in the
    gateway's own words (no upstream text)."""

    def __init__(self, reason: str, *, audit: str | None = None) -> None:
        super().__init__(reason)
        self.audit = audit if audit is not None else reason


class _Pending(Exception):
    """The client is to be asked for approval first: ``result`` asks it."""

    def __init__(self, result: types.InputRequiredResult) -> None:
        super().__init__("approval pending")
        self.result = result


class _GatewayServer(Server[Any]):
    """The SDK's lowlevel server, announcing ``tools.listChanged`` on every transport."""

    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            NotificationOptions(tools_changed=True), experimental_capabilities, extensions)


class Gateway:
    """One gateway process: the served set, the upstream pool, the connected clients."""

    def __init__(self, options: Options, *, audit: AuditLog | None = None,
                 observer: Observer = NOTHING) -> None:
        self.options = options
        self.observer = observer  # observe: metrics and traces (observe.py)
        #: Who makes and follows the ToolCallApprovals (``spec.approval.via: Request``).
        self.requests = Requests.from_environment(options.api_dir)
        self.served = ServedSet.empty()
        self.audit = audit or AuditLog()
        self._settings = Settings(options.secrets_dir, EgressGuard(options.allow),
                                  options.connect_timeout, options.configmaps_dir,
                                  options.ca_file, relist_interval=options.relist_interval,
                                  api_dir=options.api_dir, observer=observer)
        self._pool: Pool | None = None
        self._ranker = (SemanticRanker(options.search_cache_dir, _say)
                        if options.semantic_search else None)
        self._signature: object = None
        self._last_error: str | None = None
        self.sessions = Sessions()
        #: Where ``serve_http`` listens, once it does.
        self.url: str | None = None
        self._front: Front | None = None
        self._listing_json: tuple[ServedSet, str, bytes] | None = None
        self._routed: tuple[ServedSet, dict[str, dict[str, Any] | None]] = (self.served, {})
        #: Where each page of a listing sent as an event stream starts, per set.
        self._pages: tuple[ServedSet, tuple[int, ...]] | None = None
        self._tickets = approval.Tickets()
        #: ``list_changed`` for 2026-07-28 clients, who listen with ``subscriptions/listen``.
        self._bus = InMemorySubscriptionBus()
        self.server = _GatewayServer("skillop-gateway", version=__version__,
                                     on_list_tools=self._list_tools,
                                     on_call_tool=self._call_tool,
                                     on_subscriptions_listen=ListenHandler(self._bus),
                                     get_tool_input_schema=self.input_schema)
        #: The server's identity as 2026-07-28 answers carry it: one copy, read-only
        #: (``_shaped`` turns it into JSON at once; the SDK's property copies per call).
        self._server_info = self.server.server_info_stamp
        # No tracing span per message: nothing exports them, and it is the hot path.
        self.server.middleware = [m for m in self.server.middleware
                                  if not isinstance(m, OpenTelemetryMiddleware)]
        # The approval state a 2026-07-28 client echoes is sealed, bound to the tool and
        # its arguments, and expires (approval.InputRequired).
        self.server.middleware.append(RequestStateBoundary(
            RequestStateSecurity.ephemeral(ttl=approval.TICKET_SECONDS),
            default_audience="skillop-gateway"))
        self.server.add_notification_handler(
            "notifications/initialized", types.NotificationParams, self._initialized)

    @property
    def connected_clients(self) -> int:
        """Clients whose session is open (the ones ``list_changed`` goes to)."""
        return len(self.sessions)

    # -- lifecycle -----------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        """Load the set, connect its upstreams, watch the mounts; until exit."""
        async with anyio.create_task_group() as tasks:
            self._pool = Pool(self._settings, tasks.start_soon)
            self.reload()
            tasks.start_soon(self._watch)
            try:
                yield self
            finally:
                self._pool.close()
                await self.requests.close()
                tasks.cancel_scope.cancel()

    async def serve_http(self, host: str, port: int) -> None:
        """Streamable HTTP at ``http://host:port/mcp`` until cancelled."""
        import uvicorn

        from skillop.gateway.deadline import deadline_protocol
        from skillop.gateway.direct import front_protocol

        # Sessions expire by the front's clock: the SDK's cannot see what the front answers.
        app = self.server.streamable_http_app(host=host, session_idle_timeout=None)
        manager = self.server.session_manager
        # 2026-07-28 requests: the SDK's JSON mode, with the same checks (fast path).
        modern = StreamableHTTPSessionManager(
            app=self.server, json_response=True, security_settings=manager.security_settings,
            max_request_body_size=manager.max_request_body_size, session_idle_timeout=None)
        self._front = Front(app, self.sessions, self, security=manager.security_settings,
                            max_body_bytes=manager.max_request_body_size,
                            modern=modern.handle_request if self.options.fast_path else None)
        # The front's answers are written by the protocol itself, before any app runs
        # (off: every request through the apps, the reference for the fast path).
        protocol = (front_protocol(self.options.request_timeout, self._front)
                    if self.options.fast_path else deadline_protocol(self.options.request_timeout))
        sock = _listener(host, port)
        actual = sock.getsockname()[1]
        # No proxy stands before the gateway: X-Forwarded-* from a loopback client (the
        # agent) is not believed; no Server header names what serves it.
        config = uvicorn.Config(self._front, log_level="warning", access_log=False, lifespan="on",
                                log_config=None, timeout_graceful_shutdown=1,
                                http=protocol,
                                proxy_headers=False, server_header=False)
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{actual}/mcp"
        _say(f"serving {count(len(self.served.tools), 'tool')} of"
             f" {self.served.actor or '(no set yet)'} at {self.url}")
        async with modern.run():
            await uvicorn.Server(config).serve(sockets=[sock])

    async def serve_stdio(self) -> None:
        """MCP over this process's stdin and stdout until the client closes them."""
        async with stdio_server() as (read, write):
            _say(f"serving {count(len(self.served.tools), 'tool')} of"
                 f" {self.served.actor or '(no set yet)'} on stdio")
            await self.server.run(read, write, self.server.create_initialization_options())

    # -- hot reload ----------------------------------------------------------------

    def reload(self) -> bool:
        """Re-read the mounts if they changed; True when the served listing changed."""
        signature = self._mount_signature()
        if signature == self._signature:
            return False
        self._signature = signature
        try:
            served = load_served_set(self.options.toolset_dir)
        except ToolSetError as exc:
            if str(exc) != self._last_error:
                self._last_error = str(exc)
                _say(f"{exc}; serving the previous set ({count(len(self.served.tools), 'tool')})")
            return False
        self._last_error = None
        old, self.served = self.served, served
        self.observer.loaded(  # observe: the names metrics may use as labels
            {*served.tools, *((SEARCH_TOOL, CALL_TOOL) if served.search else ())},
            {upstream.name for upstream in served.upstreams.values()})
        if served.search is not None and self._ranker is not None:
            self._ranker.submit(served.search)
        assert self._pool is not None
        self._pool.update(served.upstreams, self._upstream_signatures(served))
        self._pool.connect_all()
        if old.hash != served.hash and old.hash:
            _say(f"reloaded {served.actor}: {count(len(served.tools), 'tool')} ({served.hash})")
        return old.listing != served.listing

    def _mount_signature(self) -> object:
        directory = self.options.toolset_dir
        tools = tuple(_file_identity(directory / key) for key in (TOOLS_KEY, INDEX_KEY,
                                                                  *_chunk_keys(directory)))
        try:
            data: object = os.readlink(directory / "..data")
        except OSError:
            data = None
        return (tools, data, tuple(sorted(self._upstream_signatures(self.served).items())))

    def _upstream_signatures(self, served: ServedSet) -> dict[ServerKey, object]:
        """What an upstream's connection was made with, besides its entry: its
        Secrets, its CA ConfigMap and the ``--ca-file`` (a change reconnects it)."""
        ca_file = file_signature(self.options.ca_file)
        return {key: (
            tuple(sorted(secrets_signature(upstream.secrets(), self.options.secrets_dir).items())),
            tuple(sorted(secrets_signature(upstream.configmaps(),
                                           self.options.configmaps_dir).items())),
            ca_file if upstream.url is not None else None,
        ) for key, upstream in served.upstreams.items()}

    async def _watch(self) -> None:
        while True:
            await anyio.sleep(self.options.poll_interval)
            if self.reload():
                await self.notify_list_changed()
            if self._front is not None:
                for key in self.sessions.idle(self.options.session_idle_timeout,
                                              time.monotonic()):
                    await self._front.end_session(key)

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
        self.observer.count(lambda m: m.session_opened())  # observe
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
        """The listing; over HTTP as an event stream (the handshake era's answers
        through the SDK's server), in pages: the SDK's client refuses an event over
        1 MiB, and a large set's listing is several (a JSON answer, the front's and
        the 2026-07-28 era's, is whole)."""
        served = self.served
        cursor = params.cursor if params is not None else None
        streamed = (ctx.request is not None
                    and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS)
        if not streamed and cursor is None:
            return types.ListToolsResult(tools=list(served.listing))
        starts = self._page_starts(served) if streamed else (0,)
        page = _page_of(cursor, served.hash, starts)
        if page is None:
            raise MCPError(types.INVALID_PARAMS,
                           "Invalid cursor: not one of this tool set's pages (the set may have"
                           " changed: list again from the start)")
        end = starts[page + 1] if page + 1 < len(starts) else len(served.listing)
        return types.ListToolsResult(
            tools=list(served.listing[starts[page]:end]),
            next_cursor=_cursor(served.hash, page + 1) if page + 1 < len(starts) else None)

    def _page_starts(self, served: ServedSet) -> tuple[int, ...]:
        """Where each page of the listing starts: as many tools as fit in
        ``LISTING_PAGE_BYTES`` of JSON (at least one), found once per set."""
        if self._pages is None or self._pages[0] is not served:
            starts, size = [0], 0
            for i, tool in enumerate(served.listing):
                length = len(tool.model_dump_json(by_alias=True, exclude_none=True))
                if size and size + length > LISTING_PAGE_BYTES:
                    starts.append(i)
                    size = 0
                size += length
            self._pages = (served, tuple(starts))
        return self._pages[1]

    async def _call_tool(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams,
                         ) -> types.CallToolResult | types.InputRequiredResult:
        caps = ctx.session.client_capabilities
        can_elicit = caps is not None and caps.elicitation is not None
        approver: approval.Approver = _NOBODY
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            approver = approval.InputRequired(params, self._tickets, can_elicit)
        elif can_elicit:
            async def ask(message: str) -> types.ElicitResult:
                return await ctx.session.elicit_form(message, approval.APPROVAL_SCHEMA,
                                                     related_request_id=ctx.request_id)
            approver = approval.Elicitation(ask)
        with self.observer.request(  # observe: the request's span
                "tools/call", params.name, meta=ctx.meta,
                headers=getattr(ctx.request, "headers", None),
                protocol=ctx.protocol_version):
            return await self.call(params.name, params.arguments or {}, approver=approver)

    async def answer(self, method: str, params: dict[str, Any],
                     client: Client) -> wire.Reply | None:
        """The front's answer (the JSON-RPC ``result`` or ``error`` member), or None
        when the SDK must answer: a call to approve, by a client that can be asked,
        needs the SDK's event stream; a malformed call, its error."""
        if not self.options.fast_path or (method, client.protocol_version) not in SERVER_RESULTS:
            return None  # (ping is no 2026-07-28 method: the SDK says so)
        if method == "ping":
            return wire.Reply(result=_shaped("ping", client.protocol_version, types.EmptyResult(),
                                             self._server_info))
        if method == "tools/list":
            return wire.Reply(result=self._listing(client.protocol_version))
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, dict | None):
            return None
        tool = self.served.target(name, arguments)
        if (tool is not None and tool.requires_approval and client.can_elicit
                and self.served.approval.via == "Elicitation"):
            return None
        try:
            with self.observer.request(  # observe: the request's span
                    method, name, meta=params.get("_meta"), headers=INBOUND_HEADERS.get(),
                    protocol=client.protocol_version):
                result = await self.call(name, arguments or {}, approver=_NOBODY)
        except MCPError as exc:
            return wire.Reply(error=(exc.code, exc.error.message))
        assert isinstance(result, types.CallToolResult)  # nobody was asked
        return wire.Reply(result=_shaped(method, client.protocol_version, result,
                                         self._server_info))

    def _listing(self, version: str) -> bytes:
        served = self.served
        cached = self._listing_json
        if cached is None or cached[0] is not served or cached[1] != version:
            listing = types.ListToolsResult(tools=list(served.listing))
            cached = self._listing_json = (served, version,
                                           _shaped("tools/list", version, listing,
                                                   self._server_info))
        return cached[2]

    async def call(self, name: str, arguments: dict[str, Any], *,
                   approver: approval.Approver,
                   ) -> types.CallToolResult | types.InputRequiredResult:
        """``tools/call``: the result (errors and refusals are results too), or the
        MCP error for an unknown tool; ``approver`` decides a ``requiresApproval``
        call (an ``InputRequiredResult`` when the client is to be asked first: that
        round is not audited, the round that decides is). In Search mode,
        ``search_tools`` and ``call_tool`` are the gateway's own; ``call_tool`` goes
        down exactly the path a direct call of the tool it names takes."""
        served = self.served  # one call sees one set, whatever a reload does meanwhile
        if served.search is not None and name == SEARCH_TOOL:
            return await self._search(served, arguments)
        if served.search is not None and name == CALL_TOOL:
            inner, inner_arguments = arguments.get("name"), arguments.get("arguments")
            if not isinstance(inner, str) or not isinstance(inner_arguments, dict | None):
                self._audit(served, CALL_TOOL, None, None, time.perf_counter(), "refused",
                            "malformed call_tool arguments")
                return _error_result(f"refused: {CALL_TOOL} takes name (a string) and"
                                     " arguments (an object)")
            return await self._call_member(served, inner, inner_arguments or {},
                                           approver=approver)
        return await self._call_member(served, name, arguments, approver=approver)

    async def _search(self, served: ServedSet,
                      arguments: dict[str, Any]) -> types.CallToolResult:
        """``search_tools``: the best matches' definitions, exactly as a full listing
        would show them."""
        started = time.perf_counter()
        query, limit = arguments.get("query"), arguments.get("limit", 5)
        assert served.search is not None
        if (not isinstance(query, str) or not query.strip() or isinstance(limit, bool)
                or not isinstance(limit, int) or not 1 <= limit <= MAX_MATCHES):
            self.observer.count(lambda m: m.searched("refused"))  # observe
            self._audit(served, SEARCH_TOOL, None, None, started, "refused",
                        "malformed search_tools arguments")
            return _error_result(f"refused: {SEARCH_TOOL} takes query (a non-empty string)"
                                 f" and limit (1 to {MAX_MATCHES})")
        index = served.search
        # The model's forward pass costs ~15 ms of CPU; numpy lets go of the GIL, so in
        # a worker thread it does not hold up the loop's other requests. BM25 alone is
        # well under a millisecond: answered in place.
        found = (await anyio.to_thread.run_sync(lambda: index.find(query, limit=limit))
                 if index.hybrid else index.find(query, limit=limit))
        definitions = [served.tools[key].definition.model_dump(mode="json", by_alias=True,
                                                               exclude_none=True)
                       for key, _ in found.matches]
        answer: dict[str, Any] = {"tools": definitions}
        if found.weak:
            answer = {"tools": [], "nothingFits": True, "note": _nothing_fits(served),
                      "closest": definitions[:MAX_WEAK]}
        self.observer.count(  # observe
            lambda m: m.searched("abstained" if found.weak else "matched"))
        self._audit(served, SEARCH_TOOL, None, None, started, "ok", None)
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(
            answer, ensure_ascii=False))], structured_content=answer)

    async def _call_member(self, served: ServedSet, name: str, arguments: dict[str, Any], *,
                           approver: approval.Approver,
                           ) -> types.CallToolResult | types.InputRequiredResult:
        """A call of the set's tool ``name``, vetted, forwarded and audited."""
        started = time.perf_counter()
        tool = served.tools.get(name)
        if tool is None:
            self._audit(served, name, None, None, started, "refused", "unknown tool")
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {one_line(name, 200)}")
        link = self._link(tool)
        label = link.label if link is not None else None

        decided: list[approval.Approved] = []  # a request's approval, for the audit line

        def audit(outcome: Outcome, reason: str | None,
                  verdict: approval.Approved | approval.Refused | None = None) -> None:
            verdict = verdict or (decided[0] if decided else None)
            self._audit(served, tool.binding_name, label, tool.upstream_name, started,
                        outcome, reason, verdict)

        try:
            result = await self._run(approver, served, tool, arguments, decided)
        except _Pending as pending:
            return pending.result
        except _Refused as refusal:
            audit("refused", str(refusal), refusal.verdict)
            return _error_result(f"refused: {refusal}")
        except _Failed as failure:
            audit("error", failure.audit)
            return _error_result(f"error: {failure}")
        except Exception as exc:  # anything unforeseen still gets its audit line
            reason = f"the gateway could not complete the call ({type(exc).__name__})"
            audit("error", reason)
            _say(f"{tool.binding_name}: {reason}")
            return _error_result(f"error: {reason}")
        except BaseException:
            # Cancelled: by the client (notifications/cancelled), its disconnect, or
            # the gateway's shutdown. The call may have run upstream: it is audited.
            audit("error", "cancelled before it completed (client cancel, disconnect or"
                  " gateway shutdown)")
            raise
        outcome: Outcome = "error" if result.is_error else "ok"
        audit(outcome, "the tool reported an error" if result.is_error else None)
        return result

    def _link(self, tool: ServedTool) -> Link | None:
        if tool.upstream is None or self._pool is None:
            return None
        return self._pool.link(tool.upstream)

    # -- the call path -------------------------------------------------------------

    async def _run(self, approver: approval.Approver, served: ServedSet, tool: ServedTool,
                   arguments: dict[str, Any], decided: list[approval.Approved],
                   ) -> types.CallToolResult:
        if tool.source == "agent_skill":
            if tool.requires_approval:
                decided.append(await self._approve(approver, served, tool, arguments))
            if tool.body is None:
                raise _Failed(f"the SKILL.md body (agent-skill.{tool.binding_name}.md)"
                              " is not mounted")
            return types.CallToolResult(content=[types.TextContent(text=tool.body)])
        link, conn = await self._vet(tool)
        if tool.requires_approval:
            decided.append(await self._approve(approver, served, tool, arguments, link.label))
            # The upstream may have changed while a human thought.
            link, conn = await self._vet(tool)
        return await self._forward(tool, link, conn, arguments)

    async def _vet(self, tool: ServedTool) -> tuple[Link, Connection]:
        """The upstream's current link and connection (a reload may have replaced
        them since the call started), unless the tool's definition there is not the
        one the set was resolved from (then refused)."""
        link = self._link(tool)
        if link is None:
            raise _Failed("the tool's upstream is not in the mounted set")
        try:
            conn = await link.connection()
        except UpstreamUnavailable as exc:
            raise _Failed(str(exc), audit=exc.audit) from None
        assert tool.upstream_name is not None
        live = conn.digests.get(tool.upstream_name)
        if live is None:
            raise _Refused(f"upstream {link.label} no longer lists {tool.upstream_name}")
        if tool.upstream_digest is not None and live != tool.upstream_digest:
            raise _Refused("definition changed since it was resolved; the operator must"
                           " resolve the new one first")
        return link, conn

    async def _approve(self, approver: approval.Approver, served: ServedSet, tool: ServedTool,
                       arguments: dict[str, Any], upstream: str | None = None,
                       ) -> approval.Approved:
        """The call's approval (``_Refused`` or ``_Pending`` without one). By default
        (``spec.approval.via: Request``) a person decides a ToolCallApproval, whatever
        the client could be asked; with ``Elicitation``, ``approver`` asks the client."""
        if served.approval.via == "Request":
            # The request itself shows every argument (long values cut and marked,
            # docs/api.md, ToolCallApproval): no prompt text.
            approver = ByRequest(self.requests, PendingCall(served.actor, tool, upstream,
                                                            arguments),
                                 served.approval.timeout_seconds)
            message = ""
        else:
            message = _approval_prompt(served.actor or "The agent", tool.binding_name,
                                       arguments)
        with self.observer.approval(served.approval.via) as decision:  # observe
            verdict = await approver.decide(approval.Question(tool.binding_name, arguments,
                                                              message))
            if not isinstance(verdict, approval.Pending):
                decision.append("refused" if isinstance(verdict, approval.Refused)
                                else "approved")
        if isinstance(verdict, approval.Pending):
            raise _Pending(verdict.result)
        if isinstance(verdict, approval.Refused):
            raise _Refused(verdict.reason, verdict)
        return verdict

    async def _forward(self, tool: ServedTool, link: Link, conn: Connection,
                       arguments: dict[str, Any]) -> types.CallToolResult:
        """The call upstream, bounded by ``timeoutSeconds`` (``_Bound``)."""
        timeout = tool.timeout_seconds or self.options.default_timeout
        bound = _Bound(timeout)
        try:
            with self.observer.upstream(link.label, tool.upstream_name or ""):  # observe
                return await self._attempts(tool, link, conn, arguments)
        except asyncio.CancelledError:
            if bound.expired_alone():
                raise _Failed(f"timed out after {timeout:g} s (timeoutSeconds)") from None
            raise
        finally:
            bound.disarm()

    async def _attempts(self, tool: ServedTool, link: Link, conn: Connection,
                        arguments: dict[str, Any]) -> types.CallToolResult:
        assert tool.upstream_name is not None
        try:
            return await link.call(conn, tool.upstream_name, arguments)
        except SessionLost:
            pass
        except CallFailed as exc:
            raise _Failed(str(exc), audit=exc.audit) from None
        # The upstream forgot the session (restarted, expired it): a new one, once.
        link, conn = await self._vet(tool)
        try:
            return await link.call(conn, tool.upstream_name, arguments)
        except SessionLost:
            raise _Failed(f"upstream {link.label} unavailable: it lost the new session"
                          " too") from None
        except CallFailed as exc:
            raise _Failed(str(exc), audit=exc.audit) from None

    def _audit(self, served: ServedSet, binding: str, upstream: str | None,
               upstream_tool: str | None, started: float, outcome: Outcome,
               reason: str | None,
               verdict: approval.Approved | approval.Refused | None = None) -> None:
        seconds = time.perf_counter() - started
        trace_id = self.observer.called(binding, outcome, reason, seconds,  # observe
                                        upstream=upstream)
        self.audit.write(AuditRecord(
            actor=served.actor, binding_name=binding, upstream=upstream,
            upstream_tool=upstream_tool, duration_ms=seconds * 1000,
            outcome=outcome, reason=reason,
            approval=verdict.request if verdict is not None else None,
            approver=verdict.decided_by if verdict is not None else None,
            trace_id=trace_id))


def _shaped(method: str, version: str, result: types.Result,
            server_info: dict[str, Any]) -> bytes:
    """``result`` as the SDK's server puts it on the wire for ``version``: a
    2026-07-28 result also says it is complete and names the server, as the SDK's
    runner stamps it; then validated by the revision's own surface model and only
    the fields that revision defines written, as the SDK's serializer does
    (``serialize_server_result``), straight to JSON (its model writes it)."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    if version in MODERN_PROTOCOL_VERSIONS:
        dumped.setdefault("resultType", "complete")
        meta = dumped.get("_meta")
        dumped["_meta"] = {**(meta if isinstance(meta, dict) else {}),
                           SERVER_INFO_META_KEY: server_info}
    surface = _surface(method, version)
    return surface.dump_json(surface.validate_python(dumped, by_name=False), by_alias=True,
                             exclude_none=True)


@cache
def _surface(method: str, version: str) -> TypeAdapter[Any]:
    """The SDK's model of ``method``'s result in ``version`` (its serializer's)."""
    surface: Any = SERVER_RESULTS[(method, version)]  # a model or a union of models
    return TypeAdapter(surface)


def _approval_prompt(actor: str, binding: str, arguments: dict[str, Any]) -> str:
    """What a person is asked to approve: every argument, each whole, one a line
    (keys sorted; characters that could hide text escaped). Arguments that cannot
    all be shown whole are refused: nobody should approve what they cannot see."""
    lines = []
    for key in sorted(arguments):
        value = visible(json.dumps(arguments[key], ensure_ascii=False, sort_keys=True))
        name = visible(json.dumps(key, ensure_ascii=False))
        if len(value) + len(name) > _MAX_SHOWN_VALUE:
            raise _Refused(f"argument {one_line(name, 80)} is too long to be shown for"
                           f" approval ({count(len(value), 'character')};"
                           f" at most {_MAX_SHOWN_VALUE})")
        lines.append(f"  {name}: {value}")
    shown = "\n".join(lines) if lines else "  (no arguments)"
    if len(shown) > _MAX_PROMPT:
        raise _Refused(f"the arguments are too long to be shown for approval ({len(shown)}"
                       f" characters; at most {_MAX_PROMPT})")
    return f"{actor} asks to call {binding} with:\n{shown}\nApprove?"


def _error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def _listener(host: str, port: int) -> socket.socket:
    """A listening TCP socket whose connections send small writes at once.

    asyncio sets TCP_NODELAY only on sockets created with ``IPPROTO_TCP`` (not
    ``socket.create_server``'s protocol 0); without it, a kept-alive connection
    waits for the peer's delayed ACK (~40 ms) between a response's writes.
    Accepted sockets inherit the option from the listener on Linux."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    return sock


#: How many of the closest tools a search that found nothing fitting still shows.
MAX_WEAK: Final = 3


def _nothing_fits(served: ServedSet) -> str:
    return (f"None of this agent's {count(len(served.tools), 'tool')} fits the query. The"
            " closest are"
            " under 'closest', as weak matches: read their descriptions before calling one,"
            " or tell the user that this agent has no tool for it.")


def _say(message: str) -> None:
    print(f"skillop gateway: {message}", file=sys.stderr, flush=True)


def parse_listen(text: str, *, flag: str = "--listen") -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) into its parts; ValueError if not."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{flag} {text!r}: expected HOST:PORT")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def run_gateway(options: Options, *, listen: str | None, stdio: bool) -> int:
    """Run until interrupted; the exit code of ``skillop gateway``."""
    if stdio:
        target: Sequence[Any] = ()
    else:
        target = parse_listen(listen or "127.0.0.1:8765")
    try:  # observe: metrics (--metrics-listen) and traces (OTEL_*)
        observer, metrics_at = observing(
            parse_listen(options.metrics_listen, flag="--metrics-listen")
            if options.metrics_listen else None)
    except (ValueError, OSError) as exc:
        print(f"skillop gateway: {exc}", file=sys.stderr)
        return 2
    gateway = Gateway(options, audit=AuditLog(lambda: sys.stderr) if stdio else None,
                      observer=observer)
    if observer.metrics is not None:
        observer.metrics.watch_sessions(lambda: gateway.connected_clients)
        _say(f"metrics served on {metrics_at}")

    async def main() -> None:
        async with gateway.running():
            if stdio:
                await gateway.serve_stdio()
            else:
                await gateway.serve_http(*target)

    with suppress(KeyboardInterrupt):
        anyio.run(main, backend_options={"use_uvloop": _has_uvloop()})
    observer.close()  # observe: the spans still buffered are sent
    return 0


def _has_uvloop() -> bool:
    """uvloop when installed (the image has it): the gateway sits on every call's path,
    and its event loop is a good part of what it costs (bench/gateway.py)."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True
