"""The gateway's MCP server: list the set, vet each call, forward it, audit it.

``tools/list`` answers the mounted set's ``mcp`` and ``agent_skill`` tools, no
more. ``tools/call`` of anything else is the MCP error for an unknown tool. A
known tool goes through, in order:

1. the rug-pull check: the upstream's live definition (listed on connect and on
   every ``list_changed``) must still have the ToolSet's ``upstreamDigest``;
2. approval, for ``requiresApproval``: an MCP elicitation to the client, which
   must accept; a client without elicitation is refused, and told why;
3. the forward, under the tool's name upstream, bounded by ``timeoutSeconds``;
   the result goes back as the upstream gave it, minus any secret value it echoes.

Refusals and failures are tool results with ``isError`` and a reason the model
can read (the gateway's own words, no upstream or secret text). Every call, of
any outcome, writes one audit line.

Hot reload: every ``poll_interval`` seconds the gateway stats the mounted files
(kubelet updates a ConfigMap or Secret volume by swapping its ``..data`` link,
which changes the files' identity); on a change it re-reads the set, points the
pool at the new upstreams and sends ``notifications/tools/list_changed`` to every
connected client. A set that cannot be read leaves the current one served.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from skillop.gateway.audit import AuditLog, AuditRecord, Outcome
from skillop.gateway.secrets import secrets_signature
from skillop.gateway.served import (
    ServedSet,
    ServedTool,
    ServerKey,
    ToolSetError,
    load_served_set,
)
from skillop.gateway.upstream import Link, Pool, Settings, UpstreamUnavailable
from skillop.resolve.toolset import TOOLS_KEY
from skillop.sources.egress import EgressGuard

_VERSION: Final = "0.1.0"
_APPROVAL_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve this call",
                               "default": True}},
    "required": ["approve"],
}
_MAX_SHOWN_ARGUMENTS = 1000


@dataclass(frozen=True, slots=True)
class Options:
    """Where the mounts are and how the gateway behaves (``skillop gateway`` flags)."""

    toolset_dir: Path
    secrets_dir: Path
    allow: tuple[str, ...]
    poll_interval: float = 1.0
    default_timeout: float = 60.0
    connect_timeout: float = 10.0


class _Refused(Exception):
    """The gateway will not run this call; ``str`` is the reason."""


class _Failed(Exception):
    """The call could not complete; ``str`` is the reason."""


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

    def __init__(self, options: Options, *, audit: AuditLog | None = None) -> None:
        self.options = options
        self.served = ServedSet.empty()
        self.audit = audit or AuditLog()
        self._settings = Settings(options.secrets_dir, EgressGuard(options.allow),
                                  options.connect_timeout)
        self._pool: Pool | None = None
        self._signature: object = None
        self._last_error: str | None = None
        self._clients: dict[int, ServerSession] = {}
        self.server = _GatewayServer("skillop-gateway", version=_VERSION,
                                     on_list_tools=self._list_tools,
                                     on_call_tool=self._call_tool)
        # No tracing span per message: nothing exports them, and it is the hot path.
        self.server.middleware = []
        self.server.add_notification_handler(
            "notifications/initialized", types.NotificationParams, self._initialized)

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
                tasks.cancel_scope.cancel()

    async def serve_http(self, host: str, port: int) -> None:
        """Streamable HTTP at ``http://host:port/mcp`` until cancelled."""
        import uvicorn

        app = self.server.streamable_http_app(host=host)
        sock = _listener(host, port)
        actual = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                log_config=None, timeout_graceful_shutdown=1)
        shown = f"[{host}]" if ":" in host else host
        _say(f"serving {len(self.served.tools)} tools of {self.served.actor or '(no set yet)'}"
             f" at http://{shown}:{actual}/mcp")
        await uvicorn.Server(config).serve(sockets=[sock])

    async def serve_stdio(self) -> None:
        """MCP over this process's stdin and stdout until the client closes them."""
        async with stdio_server() as (read, write):
            _say(f"serving {len(self.served.tools)} tools of"
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
                _say(f"{exc}; serving the previous set ({len(self.served.tools)} tools)")
            return False
        self._last_error = None
        old, self.served = self.served, served
        assert self._pool is not None
        self._pool.update(served.upstreams, self._upstream_signatures(served))
        self._pool.connect_all()
        if old.hash != served.hash and old.hash:
            _say(f"reloaded {served.actor}: {len(served.tools)} tools ({served.hash})")
        return old.listing != served.listing

    def _mount_signature(self) -> object:
        directory = self.options.toolset_dir
        try:
            stat = os.stat(directory / TOOLS_KEY)
            tools: object = (stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size)
        except OSError:
            tools = None
        try:
            data: object = os.readlink(directory / "..data")
        except OSError:
            data = None
        return (tools, data, tuple(sorted(self._upstream_signatures(self.served).items())))

    def _upstream_signatures(self, served: ServedSet) -> dict[ServerKey, object]:
        return {key: tuple(sorted(secrets_signature(upstream.secrets(),
                                                    self.options.secrets_dir).items()))
                for key, upstream in served.upstreams.items()}

    async def _watch(self) -> None:
        while True:
            await anyio.sleep(self.options.poll_interval)
            if self.reload():
                await self.notify_list_changed()

    async def notify_list_changed(self) -> None:
        for key, session in list(self._clients.items()):
            try:
                await session.send_tool_list_changed()
            except Exception:  # that client is gone
                self._clients.pop(key, None)

    # -- MCP handlers --------------------------------------------------------------

    async def _initialized(self, ctx: ServerRequestContext[Any],
                           params: types.NotificationParams) -> None:
        self._clients[id(ctx.session)] = ctx.session
        caps = ctx.session.client_capabilities
        if caps is None or caps.elicitation is None:
            self._answer_in_json(ctx)

    def _answer_in_json(self, ctx: ServerRequestContext[Any]) -> None:
        """Answer this HTTP session's calls with plain JSON bodies, not event streams.

        An event stream per call is what lets an approval prompt (elicitation) ride
        the call it belongs to; a client without elicitation can never be asked,
        so it gets JSON: no stream machinery, and the SDK's client reads the body
        to its end, so its connection is kept alive instead of re-opened for
        every call (bench/gateway.py). The SDK has no public handle on a
        session's transport: if the lookup fails, event streams stay, which is
        merely slower."""
        request = ctx.request
        headers = getattr(request, "headers", None)
        session_id = headers.get("mcp-session-id") if headers is not None else None
        if session_id is None or self.server._session_manager is None:
            return
        transports = getattr(self.server._session_manager, "_server_instances", {})
        transport = transports.get(session_id)
        if transport is not None and hasattr(transport, "is_json_response_enabled"):
            transport.is_json_response_enabled = True

    async def _list_tools(self, ctx: ServerRequestContext[Any],
                          params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(self.served.listing))

    async def _call_tool(self, ctx: ServerRequestContext[Any],
                         params: types.CallToolRequestParams) -> types.CallToolResult:
        served = self.served  # one call sees one set, whatever a reload does meanwhile
        started = time.perf_counter()
        tool = served.tools.get(params.name)
        if tool is None:
            self._audit(served, params.name, None, None, started, "refused", "unknown tool")
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        link = self._link(tool)
        label = link.label if link is not None else None
        try:
            result = await self._run(ctx, served, tool, link, params.arguments or {})
        except _Refused as refusal:
            self._audit(served, tool.binding_name, label, tool.upstream_name, started,
                        "refused", str(refusal))
            return _error_result(f"refused: {refusal}")
        except _Failed as failure:
            self._audit(served, tool.binding_name, label, tool.upstream_name, started,
                        "error", str(failure))
            return _error_result(f"error: {failure}")
        except Exception as exc:  # anything unforeseen still gets its audit line
            reason = f"the gateway could not complete the call ({type(exc).__name__})"
            self._audit(served, tool.binding_name, label, tool.upstream_name, started,
                        "error", reason)
            _say(f"{tool.binding_name}: {reason}")
            return _error_result(f"error: {reason}")
        outcome: Outcome = "error" if result.is_error else "ok"
        self._audit(served, tool.binding_name, label, tool.upstream_name, started, outcome,
                    "the tool reported an error" if result.is_error else None)
        return result

    def _link(self, tool: ServedTool) -> Link | None:
        if tool.upstream is None or self._pool is None:
            return None
        return self._pool.link(tool.upstream)

    # -- the call path -------------------------------------------------------------

    async def _run(self, ctx: ServerRequestContext[Any], served: ServedSet, tool: ServedTool,
                   link: Link | None, arguments: dict[str, Any]) -> types.CallToolResult:
        if tool.source == "agent_skill":
            if tool.requires_approval:
                await self._approve(ctx, served, tool, arguments)
            if tool.body is None:
                raise _Failed(f"the SKILL.md body (agent-skill.{tool.binding_name}.md)"
                              " is not mounted")
            return types.CallToolResult(content=[types.TextContent(text=tool.body)])
        if link is None:
            raise _Failed("the tool's upstream is not in the mounted set")
        session = await self._vet(tool, link)
        if tool.requires_approval:
            await self._approve(ctx, served, tool, arguments)
            # The upstream may have changed while a human thought.
            session = await self._vet(tool, link)
        return await self._forward(tool, link, session, arguments)

    async def _vet(self, tool: ServedTool, link: Link) -> ClientSession:
        """The upstream's session, unless the tool's definition there is not the one
        the set was resolved from (then refused)."""
        session, digests = await self._connection(link)
        assert tool.upstream_name is not None
        live = digests.get(tool.upstream_name)
        if live is None:
            raise _Refused(f"upstream {link.label} no longer lists {tool.upstream_name}")
        if tool.upstream_digest is not None and live != tool.upstream_digest:
            raise _Refused("definition changed since it was resolved; the operator must"
                           " resolve the new one first")
        return session

    async def _connection(self, link: Link) -> tuple[ClientSession, Mapping[str, str]]:
        try:
            return await link.connection()
        except UpstreamUnavailable as exc:
            raise _Failed(str(exc)) from None

    async def _approve(self, ctx: ServerRequestContext[Any], served: ServedSet,
                       tool: ServedTool, arguments: dict[str, Any]) -> None:
        caps = ctx.session.client_capabilities
        if caps is None or caps.elicitation is None:
            raise _Refused("the tool requires approval (requiresApproval) and this client"
                           " does not support MCP elicitation, so nobody can be asked")
        shown = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
        if len(shown) > _MAX_SHOWN_ARGUMENTS:
            shown = shown[:_MAX_SHOWN_ARGUMENTS] + "..."
        message = (f"{served.actor or 'The agent'} asks to call {tool.binding_name}"
                   f" with {shown}. Approve?")
        try:
            answer = await ctx.session.elicit_form(message, _APPROVAL_SCHEMA,
                                                   related_request_id=ctx.request_id)
        except Exception:
            raise _Refused("the tool requires approval and the client could not be asked"
                           " on this connection") from None
        if answer.action != "accept":
            raise _Refused(f"approval {answer.action}{'d' if answer.action == 'decline' else 'led'}"
                           " by the user")
        if (answer.content or {}).get("approve") is False:
            raise _Refused("approval declined by the user")

    async def _forward(self, tool: ServedTool, link: Link, session: ClientSession,
                       arguments: dict[str, Any]) -> types.CallToolResult:
        assert tool.upstream_name is not None
        timeout = tool.timeout_seconds or self.options.default_timeout
        try:
            with anyio.move_on_after(timeout) as deadline:
                result: types.CallToolResult = await session.call_tool(
                    tool.upstream_name, arguments)
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                link.drop(session)
                raise _Failed(f"upstream {link.label} unavailable: connection lost") from None
            raise _Failed(f"upstream {link.label} answered MCP error {exc.code}:"
                          f" {link.redact(exc.error.message)[:200]}") from None
        except (httpx2.TransportError, anyio.ClosedResourceError, anyio.BrokenResourceError,
                anyio.EndOfStream, OSError):
            link.drop(session)
            raise _Failed(f"upstream {link.label} unavailable: connection lost") from None
        if deadline.cancelled_caught:
            raise _Failed(f"timed out after {timeout:g} s (timeoutSeconds)")
        return _redacted(result, link)

    def _audit(self, served: ServedSet, binding: str, upstream: str | None,
               upstream_tool: str | None, started: float, outcome: Outcome,
               reason: str | None) -> None:
        self.audit.write(AuditRecord(
            actor=served.actor, binding_name=binding, upstream=upstream,
            upstream_tool=upstream_tool, duration_ms=(time.perf_counter() - started) * 1000,
            outcome=outcome, reason=reason))


def _redacted(result: types.CallToolResult, link: Link) -> types.CallToolResult:
    """The result without any secret value the upstream echoed back."""
    if not link.has_secrets:
        return result
    text = result.model_dump_json(by_alias=True, exclude_none=True)
    clean = link.redact(text)
    return result if clean == text else types.CallToolResult.model_validate_json(clean)


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


def _say(message: str) -> None:
    print(f"skillop gateway: {message}", file=sys.stderr, flush=True)


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) into its parts; ValueError if not."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"--listen {text!r}: expected HOST:PORT")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def run_gateway(options: Options, *, listen: str | None, stdio: bool) -> int:
    """Run until interrupted; the exit code of ``skillop gateway``."""
    if stdio:
        target: Sequence[Any] = ()
    else:
        target = parse_listen(listen or "127.0.0.1:8765")
    gateway = Gateway(options, audit=AuditLog(lambda: sys.stderr) if stdio else None)

    async def main() -> None:
        async with gateway.running():
            if stdio:
                await gateway.serve_stdio()
            else:
                await gateway.serve_http(*target)

    with suppress(KeyboardInterrupt):
        anyio.run(main, backend_options={"use_uvloop": _has_uvloop()})
    return 0


def _has_uvloop() -> bool:
    """uvloop when installed (the image has it): the gateway sits on every call's path,
    and its event loop is a good part of what it costs (bench/gateway.py)."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True
