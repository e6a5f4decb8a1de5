"""Benchmark: the gateway's CPU per call, two builds side by side (A/B), with a cheap client.

`bench/gateway.py` measures what a call through the gateway costs against a direct
call, with SDK clients: its ratios are the targets, but on a shared machine they
move with whatever else runs (the SDK clients cost several times the gateway, and
all of it competes for the same cores). This script isolates the gateway: two
`skillop gateway` processes (``--a`` and ``--b``: checkouts with their own
``.venv``, e.g. ``main`` at some commit and a branch), serving the same ToolSet
of the same upstream (bench/gateway.py's trivial SDK server), called by a raw
HTTP/1.1 client (pre-built requests on kept-alive sockets: next to no CPU of its
own) in blocks that alternate between the two (A B, B A, ...), so that a busy
machine slows both alike. Printed per build: the gateway process's CPU per call
(the scheduler's count of its threads, from /proc) and the median call latency
(sequential) or block time (``--connections`` > 1, threads on their own
connections).

Calls back to back keep the gateway's caches warm, which ``bench/gateway.py``'s
one-client phase does not: there each call through the gateway follows a whole
direct call (the client and the upstream running meanwhile), so it finds the
gateway idle, and costs it about twice the CPU. ``--pause`` (ms) waits that
long between one connection's calls, for the same case: what a call costs a
gateway that was idle (the latency target's case).

``--callers``: one build (this checkout) twice, B's set with ``spec.callers``
(an issuer this script serves: an RSA key, its JWKS on a loopback port) and its
clients sending the same token with every call (cached keys, the token verified
once): what verifying callers costs a call (target: within 10%).

    .venv/bin/python bench/gateway_ab.py --a /path/to/base --b . [--era modern]
        [--blocks 20] [--calls 500] [--connections 1] [--pause 2]
    .venv/bin/python bench/gateway_ab.py --callers [--era handshake] ...
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "bench", ROOT / "tests", ROOT / "tests" / "unit", ROOT / "tests" / "gateway"):
    sys.path.insert(0, str(_path))

import gateway as bench  # noqa: E402

_MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {}}


class RawClient:
    """One kept-alive connection to a gateway, calling ``ping`` as an MCP client of
    ``era`` would (a session opened first for the handshake era)."""

    def __init__(self, url: str, era: str, *, headers: dict[str, str] | None = None) -> None:
        authority = url.split("//", 1)[1].split("/", 1)[0]
        self._authority = authority
        self._sock = self._connect()
        self._era = era
        self._always = headers or {}
        self._extra: dict[str, str] = {"mcp-protocol-version": "2026-07-28"}
        if era == "handshake":
            headers, _ = self._post({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                     "params": {"protocolVersion": "2025-11-25",
                                                "capabilities": {},
                                                "clientInfo": {"name": "raw", "version": "0"}}},
                                    {"mcp-protocol-version": "2025-11-25"}, stream=True)
            self._extra = {"mcp-session-id": headers["mcp-session-id"],
                           "mcp-protocol-version": "2025-11-25"}
            self._post({"jsonrpc": "2.0", "method": "notifications/initialized"}, self._extra)

    def call(self, ident: int) -> None:
        params: dict[str, Any] = {"name": "ping", "arguments": {}}
        routing: dict[str, str] = {}
        if self._era == "modern":
            params["_meta"] = _MODERN_META
            routing = {"mcp-method": "tools/call", "mcp-name": "ping"}
        _, body = self._post({"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                              "params": params}, {**self._extra, **routing})
        if b'"pong"' not in body:
            raise RuntimeError(f"ping failed: {body[:200]!r}")

    def _connect(self) -> socket.socket:
        host, port = self._authority.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _post(self, message: dict[str, Any], headers: dict[str, str], *,
              stream: bool = False) -> tuple[dict[str, str], bytes]:
        body = json.dumps(message).encode()
        lines = {"host": self._authority, "content-type": "application/json",
                 "accept": "application/json, text/event-stream", **self._always, **headers,
                 "content-length": str(len(body))}
        request = ("POST /mcp HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in lines.items())
                   + "\r\n").encode() + body
        data = self._send(request)
        while b"\r\n\r\n" not in data:
            data += self._recv()
        head, _, rest = data.partition(b"\r\n\r\n")
        answer = {name.strip().lower(): value.strip() for name, _, value in
                  (line.decode("latin-1").partition(":") for line in head.split(b"\r\n")[1:])}
        if "content-length" in answer:
            while len(rest) < int(answer["content-length"]):
                rest += self._recv()
        elif stream:  # the SDK's event stream (chunked), ended by its last chunk
            while not rest.endswith(b"0\r\n\r\n"):
                rest += self._recv()
        return answer, rest

    def _send(self, request: bytes) -> bytes:
        """Send ``request``; the answer's first bytes. A connection the gateway closed
        while idle (uvicorn's keep-alive: 5 s, which the other build's block can
        outlast on a busy machine) is opened again and the request sent once more."""
        try:
            self._sock.sendall(request)
            first = self._sock.recv(65536)
        except ConnectionError:
            first = b""
        if not first:
            self._sock.close()
            self._sock = self._connect()
            self._sock.sendall(request)
            first = self._recv()
        return first

    def _recv(self) -> bytes:
        chunk = self._sock.recv(65536)
        if not chunk:
            raise ConnectionError("the gateway closed the connection")
        return chunk


def _cpu(pid: int) -> float:
    """CPU seconds the process's threads have run, to the nanosecond (the
    scheduler's count, ``/proc/PID/task/*/schedstat``; ``/proc/PID/stat`` counts
    10 ms ticks, a few percent of a block's). A thread gone meanwhile is left out
    (the gateway's live as long as it does)."""
    if not Path(f"/proc/{pid}/schedstat").exists():
        return bench._cpu(pid)
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
        except (OSError, IndexError):
            continue
    return total / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, help="checkout A (with its .venv)")
    parser.add_argument("--b", type=Path, help="checkout B (with its .venv)")
    parser.add_argument("--callers", action="store_true",
                        help="this checkout without (A) and with (B) spec.callers")
    parser.add_argument("--era", choices=("modern", "handshake"), default="modern")
    parser.add_argument("--blocks", type=int, default=20, help="blocks per build, alternating")
    parser.add_argument("--calls", type=int, default=500, help="calls per block")
    parser.add_argument("--connections", type=int, default=1,
                        help="connections calling at once (threads)")
    parser.add_argument("--warmup", type=int, default=300, help="unmeasured calls per build")
    parser.add_argument("--pause", type=float, default=0.0,
                        help="ms between one connection's calls (0: back to back)")
    args = parser.parse_args()
    if not args.callers and (args.a is None or args.b is None):
        parser.error("--a and --b are required (or --callers)")
    upstream = subprocess.Popen([sys.executable, str(ROOT / "bench" / "gateway.py"), "--upstream"],
                                stdout=subprocess.PIPE, text=True)
    gateways: list[subprocess.Popen[bytes]] = []
    issuer = _Issuer() if args.callers else None
    builds = ((("A", Path("callers off")), ("B", Path("callers on"))) if args.callers
              else (("A", args.a), ("B", args.b)))
    try:
        url = bench._read_line(upstream)
        with tempfile.TemporaryDirectory() as tmp:
            clients: dict[str, tuple[int, list[RawClient]]] = {}
            started: list[tuple[str, int, str, dict[str, str] | None]] = []
            for name, checkout in builds:
                if issuer is None:
                    bench.SKILLOP = str(checkout.resolve() / ".venv" / "bin" / "skillop")
                work = Path(tmp) / name
                work.mkdir()
                with_callers = issuer is not None and name == "B"
                proc, gateway_url = bench.start_gateway(
                    url, work, callers=issuer.callers if issuer and with_callers else None)
                gateways.append(proc)
                started.append((name, proc.pid, gateway_url,
                                issuer.headers if issuer and with_callers else None))
            # Connected once every gateway serves: a connection idle from its opening
            # for the request deadline (a slow start of the next) is answered 408.
            for name, pid, gateway_url, headers in started:
                clients[name] = (pid, [RawClient(gateway_url, args.era, headers=headers)
                                       for _ in range(args.connections)])
            if issuer is not None:
                print(f"callers: one RS256 token of {len(issuer.token)} bytes"
                      f" ({issuer.groups} groups), verified once, then looked up")
            for _, (_, raws) in clients.items():
                for n in range(args.warmup):
                    raws[0].call(n)
            print(f"{args.era} era, {args.blocks} blocks of {args.calls} calls per build,"
                  f" {args.connections} connection(s), {args.pause:g} ms between calls;"
                  f" load average {os.getloadavg()[0]:.2f}")
            results = _measure(clients, blocks=args.blocks, calls=args.calls,
                               pause=args.pause / 1000)
            for name, checkout in builds:
                cpu, calls, times = results[name]
                times.sort()
                label = "call p50" if args.connections == 1 else "block p50"
                print(f"  {name} {checkout}: gateway CPU {cpu / calls * 1000:.3f} ms a call,"
                      f" {label} {times[len(times) // 2] * 1000:.3f} ms")
            (cpu_a, calls_a, _), (cpu_b, calls_b, _) = (results[name] for name, _ in builds)
            print(f"  B/A gateway CPU a call: {(cpu_b / calls_b) / (cpu_a / calls_a):.3f}")
            print(f"load average at the end {os.getloadavg()[0]:.2f}")
    finally:
        bench.stop((*gateways, upstream))
        if issuer is not None:
            issuer.server.__exit__(None, None, None)
    return 0


class _Issuer:
    """An issuer for ``--callers``: its JWKS on a loopback port, and one token of it."""

    groups = 8

    def __init__(self) -> None:
        from identitykit import AUDIENCE, JwksServer, Key

        self.server = JwksServer(Key("bench")).__enter__()
        self.callers = {"issuer": self.server.issuer, "audiences": [AUDIENCE]}
        self.token = self.server.keys[0].sign(self.server.claims(
            "bench-user@example.com", exp=int(time.time()) + 3600,
            groups=[f"group-{i}" for i in range(self.groups)]))
        self.headers = {"authorization": f"Bearer {self.token}"}


def _measure(clients: dict[str, tuple[int, list[RawClient]]], *, blocks: int, calls: int,
             pause: float = 0.0) -> dict[str, tuple[float, int, list[float]]]:
    """CPU seconds, calls and times (per call, or per block with several
    connections) of each build, the builds alternating block by block."""
    out: dict[str, tuple[float, int, list[float]]] = {name: (0.0, 0, []) for name in clients}
    order = list(clients)
    for block in range(blocks):
        for name in order if block % 2 == 0 else order[::-1]:
            pid, raws = clients[name]
            cpu, made, times = out[name]
            before = _cpu(pid)
            if len(raws) == 1:
                for n in range(calls):
                    start = time.perf_counter()
                    raws[0].call(n)
                    times.append(time.perf_counter() - start)
                    if pause:
                        time.sleep(pause)
                made += calls
            else:
                each = max(1, calls // len(raws))
                threads = [threading.Thread(target=_calls, args=(raw, each, pause))
                           for raw in raws]
                start = time.perf_counter()
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                times.append(time.perf_counter() - start)
                made += each * len(raws)
            out[name] = (cpu + _cpu(pid) - before, made, times)
    return out


def _calls(raw: RawClient, count: int, pause: float) -> None:
    for n in range(count):
        raw.call(n)
        if pause:
            time.sleep(pause)


if __name__ == "__main__":
    raise SystemExit(main())
