"""Benchmark: the instructions the own span path costs one traced call, in process.

What a forwarded ``tools/call`` of the handshake era asks of the gateway's tracing
(``own_tracing.OwnTracing``, every call sampled): the request's span (no
``traceparent`` brought, a session's id in the headers), the forward's span within
it, the context for the upstream request and its header line, the trace id for
the audit line; both spans ended, framed and queued, and every 256 calls a batch
joined for the sender (which sends nothing here). Then the pieces alone: the
request's span made and dropped, a span framed, a span ended (framed and queued).

Counted by callgrind: the script runs itself under valgrind, each piece ``--calls``
times inside ``itertools.starmap`` (``--toggle-collect=starmap_next``: only the
pieces' instructions), zeroed and dumped around it by ``callgrind_control``.
Exact: the same build gives the same counts on a busy machine or a quiet one.

    .venv/bin/python bench/span_path_count.py [--calls 4000] [--build /path/to/base]
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from itertools import repeat, starmap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pieces() -> dict[str, Callable[[], object]]:
    os.environ.update({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                       "OTEL_TRACES_SAMPLER": "always_on",
                       "OTEL_BSP_SCHEDULE_DELAY": "600000",
                       "OTEL_BSP_MAX_QUEUE_SIZE": "100000000"})
    from skillop.gateway.own_tracing import OwnTracing
    from skillop.gateway.tracing import start
    from skillop.gateway.transport.template import trace_lines

    own = start()
    assert isinstance(own, OwnTracing)
    own.batches._send = lambda body: True  # type: ignore[assignment]
    queue = own.batches._queue
    headers = {"host": "gateway", "mcp-session-id": "0123456789abcdef",
               "mcp-protocol-version": "2025-11-25"}

    def call() -> None:
        with own.observed("tools/call", "ping", None, headers, "2025-11-25", None):
            with own.upstream("upstream", "ping"):
                trace_lines(own.context())
            own.trace_id()
        if len(queue) >= 512:
            own.batches.flush()

    def request_span() -> None:
        own.observed("tools/call", "ping", None, headers, "2025-11-25", None)

    span = own.observed("tools/call", "ping", None, headers, "2025-11-25", None)
    span.end_time = span.start

    def ended() -> None:
        own.batches.ended(span)
        if len(queue) >= 512:
            queue.clear()

    return {"a traced call's hooks": call, "a request's span, made and dropped": request_span,
            "a span framed": lambda: own.batches._encoder.framed(span),
            "a span ended (framed, queued)": ended}


def _inner(calls: int, out: str) -> None:
    def control(flag: str) -> None:
        subprocess.run(["callgrind_control", flag, str(os.getpid())], check=True,
                       capture_output=True)

    for name, piece in _pieces().items():
        for _ in range(300):
            piece()
        before = set(glob.glob(out + "*"))
        control("-z")
        for _ in starmap(piece, repeat((), calls)):
            pass
        control("-d")
        while not (new := set(glob.glob(out + "*")) - before):
            time.sleep(0.05)
        (dump,) = new
        while "totals:" not in Path(dump).read_text(errors="replace"):
            time.sleep(0.05)
        for line in Path(dump).read_text(errors="replace").splitlines():
            if line.startswith("totals:"):
                print(f"  {name}: {int(line.split()[1]) / calls:,.0f} instructions", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=4000, help="calls of each piece")
    parser.add_argument("--build", type=Path, default=ROOT,
                        help="a checkout whose operator/ is counted (default: this one)")
    parser.add_argument("--inner", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner is not None:
        _inner(args.calls, args.inner)
        return 0
    print(f"instructions (callgrind) of the own span path, {args.calls} calls a piece,"
          f" {args.build}; load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/callgrind.out"
        return subprocess.run(
            ["valgrind", "--tool=callgrind", "--collect-atstart=no",
             "--toggle-collect=starmap_next", f"--callgrind-out-file={out}", "-q",
             sys.executable, __file__, "--calls", str(args.calls), "--inner", out],
            env={**os.environ, "PYTHONPATH": str(args.build.resolve() / "operator")}).returncode


if __name__ == "__main__":
    raise SystemExit(main())
