"""How the gateway is served: Streamable HTTP through uvicorn (the front before
the SDK's apps), or stdio; and ``run_gateway``, the process's main."""

from __future__ import annotations

import gc
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from skillop.model.wording import count

if TYPE_CHECKING:
    from skillop.gateway.options import Options
    from skillop.gateway.server import Gateway

# The MCP SDK, uvicorn and the gateway's own modules are imported where they are
# used: ``skillop gateway`` imports this module for ``collector_paused`` before
# anything it pauses the collector for.


async def serve_http(gateway: Gateway, host: str, port: int) -> None:
    """Streamable HTTP at ``http://host:port/mcp`` until cancelled."""
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from skillop.gateway.deadline import deadline_protocol
    from skillop.gateway.direct import front_protocol
    from skillop.gateway.front import Front
    from skillop.gateway.identity.http import Authenticated

    options, server = gateway.options, gateway.server
    # Sessions expire by the front's clock: the SDK's cannot see what the front answers.
    app = server.streamable_http_app(host=host, session_idle_timeout=None)
    manager = server.session_manager
    # 2026-07-28 requests: the SDK's JSON mode, with the same checks (fast path).
    modern = StreamableHTTPSessionManager(
        app=server, json_response=True, security_settings=manager.security_settings,
        max_request_body_size=manager.max_request_body_size, session_idle_timeout=None)
    front = gateway.front = Front(app, gateway.sessions, gateway,
                                  security=manager.security_settings,
                                  max_body_bytes=manager.max_request_body_size,
                                  modern=modern.handle_request if options.fast_path else None)
    # Every request to the MCP endpoint passes the door first (its caller's token).
    door = Authenticated(front, gateway.door)
    # The front's answers are written by the protocol itself, before any app runs
    # (off: every request through the apps, the reference for the fast path).
    protocol = (front_protocol(options.request_timeout, door)
                if options.fast_path else deadline_protocol(options.request_timeout))
    sock = listener(host, port)
    actual = sock.getsockname()[1]
    # No proxy stands before the gateway: X-Forwarded-* from a loopback client (the
    # agent) is not believed; no Server header names what serves it.
    config = uvicorn.Config(door, log_level="warning", access_log=False, lifespan="on",
                            log_config=None, timeout_graceful_shutdown=1, http=protocol,
                            proxy_headers=False, server_header=False)
    shown = f"[{host}]" if ":" in host else host
    gateway.url = f"http://{shown}:{actual}/mcp"
    say(f"serving {count(len(gateway.served.tools), 'tool')} of"
        f" {gateway.served.actor or '(no set yet)'} at {gateway.url}")
    async with modern.run():
        await uvicorn.Server(config).serve(sockets=[sock])


async def serve_stdio(gateway: Gateway) -> None:
    """MCP over this process's stdin and stdout until the client closes them."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        say(f"serving {count(len(gateway.served.tools), 'tool')} of"
            f" {gateway.served.actor or '(no set yet)'} on stdio")
        await gateway.server.run(read, write, gateway.server.create_initialization_options())


def listener(host: str, port: int) -> socket.socket:
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


def say(message: str) -> None:
    """The gateway's word on stderr (what it serves, reloads, cannot do): one write
    of the whole line (``print`` writes the line and its end apart, and a line said
    by the vectors' thread meanwhile ran into the main thread's "serving ... at URL"
    line, which is how a client learns the URL)."""
    sys.stderr.write(f"skillop gateway: {message}\n")
    sys.stderr.flush()


def parse_listen(text: str, *, flag: str = "--listen") -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) into its parts; ValueError (naming
    ``flag``) if not."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{flag} {text!r}: expected HOST:PORT")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


@contextmanager
def collector_paused() -> Iterator[Callable[[], None]]:
    """The cyclic collector paused while the block makes what lives as long as the
    process (modules, classes, the gateway): each collection would walk what was
    made so far again. What it yields is the point of release, for the block to
    call where that is made (else the block's end is): what was made is frozen
    out of the collector's reach (``gc.freeze``: nor do the full collections walk
    it while calls run), and the collector runs again if it ran before."""
    collecting = gc.isenabled()
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            gc.freeze()
            if collecting:
                gc.enable()

    gc.disable()
    try:
        yield release
    finally:
        release()


def run_gateway(options: Options, *, listen: str | None, stdio: bool) -> int:
    """Run until interrupted; the exit code of ``skillop gateway``.

    What the start-up makes (the gateway, the SDK's server, the first set read)
    lives as long as the process: it is made with the cyclic collector paused
    (each collection would walk what was made so far again, about a third of
    reading a set of 5,000 tools) and released once the first set is read."""
    with collector_paused() as release:
        return _run(options, listen=listen, stdio=stdio, release=release)


def _run(options: Options, *, listen: str | None, stdio: bool,
         release: Callable[[], None]) -> int:
    import anyio

    from skillop.gateway.audit import AuditLog
    from skillop.gateway.observe import observing
    from skillop.gateway.server import Gateway

    if stdio:
        target: Sequence[Any] = ()
    else:
        target = parse_listen(listen or "127.0.0.1:8765")
    try:  # metrics (--metrics-listen) and traces (OTEL_*)
        observer, metrics_at = observing(
            parse_listen(options.metrics_listen, flag="--metrics-listen")
            if options.metrics_listen else None)
    except (ValueError, OSError) as exc:
        say(str(exc))
        return 2
    gateway = Gateway(options, audit=AuditLog(lambda: sys.stderr) if stdio else None,
                      observer=observer)
    if observer.metrics is not None:
        observer.metrics.watch_sessions(lambda: gateway.connected_clients)
        say(f"metrics served on {metrics_at}")

    async def main() -> None:
        async with gateway.running():  # the first set is read
            release()
            if stdio:
                await serve_stdio(gateway)
            else:
                await serve_http(gateway, *target)

    with suppress(KeyboardInterrupt):
        anyio.run(main, backend_options={"use_uvloop": _has_uvloop()})
    observer.close()  # the spans still buffered are sent
    return 0


def _has_uvloop() -> bool:
    """uvloop when installed (the image has it): the gateway sits on every call's path,
    and its event loop is a good part of what it costs (bench/gateway.py)."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True
