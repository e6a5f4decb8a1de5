"""Benchmark: what `skillop gateway` costs a tool call, on loopback.

What is measured, and why
-------------------------
The gateway is the agent's only MCP endpoint (docs/gateway.md), so every MCP
tool call pays for it: one more loopback hop, the gateway's MCP work on both of
its sides (its HTTP front toward the agent, its forward to the upstream) and its
own checks (set lookup, rug-pull digest, audit line). The targets: p50 latency
through the gateway at most 1.3 times direct, and throughput with 50 concurrent
clients at least 0.9 times direct, for clients of either protocol era
(``--eras``): the handshake revisions (initialize, a session) and 2026-07-28
(``server/discover``, an envelope per request; direct, the upstream answers
those itself; through the gateway, its forward stays in the upstream session).

Three processes, as in a pod: an upstream MCP server (the official SDK's
lowlevel ``Server`` over streamable HTTP, uvicorn on 127.0.0.1, one trivial tool
``ping`` answering ``pong``), ``skillop gateway`` serving a ToolSet holding that
tool (resolved by the real resolver, written kubelet-style), and this script as
the agents: ``--clients`` SDK ``ClientSession``s (each its own MCP session and
HTTP connection) calling ``ping`` as fast as answers come back.

Both paths are measured in one run, taking turns so that a busy machine (other
jobs on the same cores) slows both alike: with one client per path, direct and
gateway calls alternate call by call (``--calls`` each, after ``--warmup``);
then ``--clients`` clients per path call at once, the paths alternating over
``--rounds`` rounds (``--calls / rounds / 5`` calls per client per round).
Printed per path and concurrency: the number of calls, p50 and p99 latency of one
call (ms) and calls per second (all clients), then the two ratios against their
targets, and the CPU time each process used per call (agents and upstream over
every call, the gateway over the calls through it; and the gateway's in each
measured phase alone, without the clients' set-up and warm-up). Audit lines go to a file, as
a sidecar's stdout would.

Reference hops (``--hops``, bench/hops.py) take the same turns: the same calls
through a forwarder that checks nothing (``python``: asyncio, uvloop and
httptools, as the gateway; ``nginx`` when installed). Their ratios are what one
more hop costs on this machine whatever runs in it; the gateway's ratio over
theirs is what its own work adds.

    .venv/bin/python bench/gateway.py [--calls 400] [--clients 50] [--warmup 20]
        [--eras handshake,modern] [--hops python,nginx]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "bench", ROOT / "tests", ROOT / "tests" / "unit", ROOT / "tests" / "gateway"):
    sys.path.insert(0, str(_path))

import hops  # noqa: E402
import httpx2  # noqa: E402
from gatewaykit import SKILLOP, Volume, toolset_files  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from skillkit import actor, skill  # noqa: E402

PING_SCHEMA = {"type": "object", "properties": {}}


# --------------------------------------------------------------------------- the upstream


def serve_upstream() -> None:
    """``--upstream``: the trivial SDK server; prints its URL, serves until killed."""
    import socket

    import mcp_types as types
    import uvicorn
    from mcp.server import Server, ServerRequestContext

    tool = types.Tool(name="ping", description="Answers pong", input_schema=PING_SCHEMA)

    async def list_tools(ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: ServerRequestContext[Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text="pong")])

    server: Server[Any] = Server("bench-upstream", on_list_tools=list_tools,
                                 on_call_tool=call_tool)
    # As uvicorn binds host and port itself: IPPROTO_TCP, so asyncio sets TCP_NODELAY
    # on each connection (socket.create_server's protocol 0 would not).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning",
                            access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


def _read_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line:
        raise RuntimeError("the upstream did not start")
    return line


def start_gateway(upstream_url: str, work: Path, *, extra: Iterable[str] = (),
                  env: dict[str, str] | None = None,
                  callers: dict[str, Any] | None = None,
                  timeout: float = 30) -> tuple[subprocess.Popen[bytes], str]:
    """`skillop gateway` on a ToolSet holding the upstream's `ping`, with ``extra``
    flags and ``env`` added to the environment, the Actor's ``callers`` if given; its
    URL once it listens (within ``timeout`` seconds)."""
    docs = [skill("bench", mcpServers=[{"name": "upstream", "url": upstream_url, "tools": [
                {"name": "ping", "description": "Answers pong", "inputSchema": PING_SCHEMA}]}]),
            actor("agent", skills=["bench"], **({"callers": callers} if callers else {}))]
    Volume(work / "tools").write(toolset_files(docs, "team-a/agent"))
    (work / "secrets").mkdir()
    stderr_path = work / "gateway.stderr"
    with (work / "audit.jsonl").open("wb") as audit, stderr_path.open("wb") as err:
        proc = subprocess.Popen(
            [SKILLOP, "gateway", "--toolset-dir", str(work / "tools"),
             "--secrets-dir", str(work / "secrets"), "--listen", "127.0.0.1:0",
             "--allow", "127.0.0.1:*", *extra], stdout=audit, stderr=err,
            env={**os.environ, **(env or {})})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in stderr_path.read_text().splitlines():
            if " at http://" in line:
                return proc, line.rsplit(" at ", 1)[1].strip()
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"the gateway did not start: {stderr_path.read_text()}")


# --------------------------------------------------------------------------- the agents


ERAS = ("handshake", "modern")


@asynccontextmanager
async def client(url: str, era: str) -> AsyncIterator[ClientSession]:
    """An SDK client session: ``handshake`` (initialize, a session, the 2025 revisions)
    or ``modern`` (server/discover, the 2026-07-28 revision: an envelope per request)."""
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(httpx2.AsyncClient(timeout=60))
        read, write = await stack.enter_async_context(
            streamable_http_client(url, http_client=http))
        session = await stack.enter_async_context(ClientSession(read, write))
        if era == "modern":
            await session.discover()
        else:
            await session.initialize()
        await session.list_tools()
        yield session


Paths = dict[str, list[ClientSession]]


async def one_client(paths: Paths, *, calls: int) -> dict[str, list[float]]:
    """Latency of each call (s), one client per path, the paths taking turns call by
    call, so that a busy machine slows both alike."""
    latencies: dict[str, list[float]] = {path: [] for path in paths}
    for _ in range(calls):
        for path, (session, *_) in paths.items():
            start = time.perf_counter()
            await _ping(session)
            latencies[path].append(time.perf_counter() - start)
    return latencies


async def many_clients(paths: Paths, *, calls: int, rounds: int,
                       ) -> dict[str, tuple[list[float], float]]:
    """Latencies (s) and total wall time (s) per path, every client of a path calling
    at once; the paths take turns over ``rounds`` rounds of ``calls`` calls each."""
    out: dict[str, tuple[list[float], float]] = {path: ([], 0.0) for path in paths}

    async def agent(session: ClientSession, sink: list[float]) -> None:
        for _ in range(calls):
            start = time.perf_counter()
            await _ping(session)
            sink.append(time.perf_counter() - start)

    for _ in range(rounds):
        for path, sessions in paths.items():
            latencies, wall = out[path]
            start = time.perf_counter()
            await asyncio.gather(*(agent(s, latencies) for s in sessions))
            out[path] = (latencies, wall + time.perf_counter() - start)
    return out


Figures = dict[tuple[str, int], tuple[list[float], float]]


async def measure(urls: dict[str, str], *, era: str, clients: int, calls: int, warmup: int,
                  rounds: int, gateway_cpu: Callable[[], float] | None = None,
                  ) -> tuple[Figures, dict[str, int]]:
    """Latencies and wall time by (path, clients), and the calls made per path
    (warm-up included), by clients of ``era``. With ``gateway_cpu`` (the gateway's
    CPU seconds so far), also the gateway's CPU per call in each measured phase."""
    CALLS.clear()
    async with AsyncExitStack() as stack:
        paths: Paths = {path: [await stack.enter_async_context(client(url, era))
                               for _ in range(clients)] for path, url in urls.items()}
        await many_clients(paths, calls=warmup, rounds=1)
        figures: Figures = {}
        start = time.perf_counter()
        phases = _Phases(paths["gateway"], gateway_cpu)
        for path, latencies in (await one_client(paths, calls=calls)).items():
            figures[(path, 1)] = (latencies, sum(latencies))
        phases.mark("1 client")
        for path, result in (await many_clients(paths, calls=max(1, calls // rounds // 5),
                                                rounds=rounds)).items():
            figures[(path, clients)] = result
        phases.mark(f"{clients} clients")
        print(f"(measured in {time.perf_counter() - start:.1f} s)")
        phases.print()
        made = {path: sum(CALLS.get(id(s), 0) for s in sessions)
                for path, sessions in paths.items()}
        return figures, made


class _Phases:
    """The gateway's CPU per call in each measured phase (no session set-up or
    warm-up in it: what a call costs once clients are connected)."""

    def __init__(self, sessions: list[ClientSession], cpu: Callable[[], float] | None) -> None:
        self._sessions = sessions
        self._cpu = cpu
        self._figures: list[str] = []
        self._last = (cpu() if cpu else 0.0, self._calls())

    def _calls(self) -> int:
        return sum(CALLS.get(id(s), 0) for s in self._sessions)

    def mark(self, phase: str) -> None:
        if self._cpu is None:
            return
        now = (self._cpu(), self._calls())
        used, calls = now[0] - self._last[0], now[1] - self._last[1]
        self._figures.append(f"{phase} {used / max(calls, 1) * 1000:.2f} ms")
        self._last = now

    def print(self) -> None:
        if self._figures:
            print("gateway CPU per call, measured phases only: " + ", ".join(self._figures))


CALLS: dict[int, int] = {}  # by session id: calls made, for CPU per call


async def _ping(session: ClientSession) -> None:
    CALLS[id(session)] = CALLS.get(id(session), 0) + 1
    result = await session.call_tool("ping", {})
    if result.is_error:
        raise RuntimeError(f"ping failed: {result.content}")


def _root(exc: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) a child process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(era: str, urls: dict[str, str], args: argparse.Namespace,
           gateway: subprocess.Popen[bytes], upstream: subprocess.Popen[str],
           work: Path) -> bool:
    """Measure and print one era's figures; False when the run failed."""
    print(f"-- {era} era clients")
    cpu_before = {"agents": time.process_time(), "gateway": _cpu(gateway.pid),
                  "upstream": _cpu(upstream.pid)}
    try:
        measured, made = asyncio.run(measure(
            urls, era=era, clients=args.clients, calls=args.calls, warmup=args.warmup,
            rounds=args.rounds, gateway_cpu=lambda: _cpu(gateway.pid)))
    except Exception as exc:
        print(f"the run failed: {_root(exc)!r}; gateway stderr:\n"
              + (work / "gateway.stderr").read_text()[-2000:])
        return False
    cpu = {"agents": time.process_time() - cpu_before["agents"],
           "gateway": _cpu(gateway.pid) - cpu_before["gateway"],
           "upstream": _cpu(upstream.pid) - cpu_before["upstream"]}
    figures: dict[tuple[str, int], tuple[float, float, float]] = {}
    for (path, clients), (latencies, wall) in sorted(
            measured.items(), key=lambda item: (item[0][1], item[0][0])):
        p50, p99 = _quantile(latencies, 0.5), _quantile(latencies, 0.99)
        rate = len(latencies) / wall
        figures[(path, clients)] = (p50, p99, rate)
        print(f"{path:8} {clients:3} client(s), {len(latencies):5} calls:"
              f" p50 {p50 * 1000:7.2f} ms  p99 {p99 * 1000:7.2f} ms"
              f"  {rate:7.0f} calls/s")
    one = figures[("gateway", 1)][0] / figures[("direct", 1)][0]
    many = figures[("gateway", args.clients)][2] / figures[("direct", args.clients)][2]
    print(f"{era}: p50 through the gateway / direct (1 client): {one:.2f}x (target <= 1.3x)")
    print(f"{era}: throughput through the gateway / direct ({args.clients} clients):"
          f" {many:.2f}x (target >= 0.9x)")
    for hop in [path for path in urls if path not in ("direct", "gateway")]:
        hop_one = figures[(hop, 1)][0] / figures[("direct", 1)][0]
        hop_many = figures[(hop, args.clients)][2] / figures[("direct", args.clients)][2]
        print(f"{era}: the {hop} hop alone (forwards, checks nothing): p50 {hop_one:.2f}x,"
              f" throughput {hop_many:.2f}x; the gateway's own share: p50"
              f" {one / hop_one:.2f}x, throughput {many / hop_many:.2f}x")
    total = sum(made.values())
    print(f"CPU per call ({total} calls, warm-up included): agents"
          f" {cpu['agents'] / total * 1000:.2f} ms, upstream"
          f" {cpu['upstream'] / total * 1000:.2f} ms, gateway"
          f" {cpu['gateway'] / made['gateway'] * 1000:.2f} ms per gateway call")
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="measured calls per client")
    parser.add_argument("--clients", type=int, default=50, help="the concurrent run's clients")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured calls per client")
    parser.add_argument("--rounds", type=int, default=4,
                        help="turns each path takes in the concurrent run")
    parser.add_argument("--eras", default=",".join(ERAS),
                        help="the clients' protocol eras, measured one after the other"
                        " (default: %(default)s)")
    parser.add_argument("--hops", default=",".join(hops.HOPS),
                        help="reference hops measured in the same turns (bench/hops.py;"
                        " one not installed is skipped, saying why; '' for none;"
                        " default: %(default)s)")
    parser.add_argument("--upstream", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream:
        serve_upstream()
        return 0
    upstream = subprocess.Popen([sys.executable, __file__, "--upstream"],
                                stdout=subprocess.PIPE, text=True)
    gateway: subprocess.Popen[bytes] | None = None
    try:
        upstream_url = _read_line(upstream)
        with tempfile.TemporaryDirectory() as tmp, ExitStack() as references:
            gateway, gateway_url = start_gateway(upstream_url, Path(tmp))
            print(f"trivial tool `ping`, {os.cpu_count()} CPUs; {args.calls} measured calls"
                  f" per client after {args.warmup} warm-up calls; upstream, gateway and"
                  " clients in 3 processes on loopback")
            urls = {"direct": upstream_url, "gateway": gateway_url}
            for hop in filter(None, args.hops.split(",")):
                missing = hops.available(hop)
                if missing is not None:
                    print(f"the {hop} hop is skipped: {missing}")
                    continue
                urls[hop] = references.enter_context(hops.running(hop, upstream_url))[1]
            for era in args.eras.split(","):
                if not report(era, urls, args, gateway, upstream, Path(tmp)):
                    return 1
    finally:
        stop(proc for proc in (gateway, upstream) if proc is not None)
    return 0


def stop(procs: Iterable[subprocess.Popen[Any]]) -> None:
    """Terminate each process, killing one that has not exited after 10 s."""
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    raise SystemExit(main())
