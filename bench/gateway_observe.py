"""Benchmark: what metrics and traces cost the gateway per call.

Three ``skillop gateway`` processes of this checkout serve the same ToolSet of
the same upstream (bench/gateway.py's trivial SDK server): ``plain`` (as today:
no metrics, no traces), ``metrics`` (``--metrics-listen``), and ``traces``
(metrics, and every call traced: ``OTEL_TRACES_SAMPLER=always_on``, the SDK's
OTLP/HTTP exporter sending to a receiver in this process, which drops what it
gets). bench/gateway_ab.py's raw client calls ``ping`` in blocks that take turns
(plain, metrics, traces; then the other way round), so that a busy machine slows
each alike. Printed: each gateway's CPU per call (user + system, from /proc),
its call p50, and its CPU against ``plain`` (targets: metrics within 5 %, traces
within 15 %). First, what the call path's observer hooks alone cost a call in
this process (``--hooks`` calls: off, metrics, metrics and traces by the gateway's
own span path and by the SDK's), and what a span costs each path (made and ended,
encoded), figures a busy machine moves far less than three gateways' CPU.
``--sdk-path`` traces the gateway by the SDK's span path (a span limit set).
``--callgrind N``: instead of CPU time, the instructions a call of each gateway
under callgrind (N counted calls, the exports of their spans waited for).

    .venv/bin/python bench/gateway_observe.py [--era modern|handshake] [--blocks 20]
        [--calls 500] [--pause 0] [--sdk-path]
    .venv/bin/python bench/gateway_observe.py --era both --callgrind 512
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import gateway_ab as ab  # noqa: E402

bench = ab.bench
TARGETS = {"metrics": 0.05, "traces": 0.15}


class _Sink(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that takes every export and keeps nothing but their count."""

    posts = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        _Sink.posts += 1
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


class _Reconnecting:
    """A raw client that connects again when the gateway closed its idle connection
    (its keep-alive timeout passes while the other gateways take their turns)."""

    def __init__(self, url: str, era: str) -> None:
        self._url, self._era = url, era
        self._raw = ab.RawClient(url, era)

    def call(self, ident: int) -> None:
        try:
            self._raw.call(ident)
        except (RuntimeError, OSError):
            self._raw = ab.RawClient(self._url, self._era)
            self._raw.call(ident)


def _hooks(calls: int, environ: dict[str, str]) -> None:
    """CPU per call of the hooks a forwarded call passes (a request, the forward,
    its end: the record at the pipeline's seam), as the gateway makes them."""
    from prometheus_client import CollectorRegistry

    from skillop.gateway.metrics import GatewayMetrics
    from skillop.gateway.observe import NOTHING, Observer
    from skillop.gateway.pipeline import CallRecord, Pipeline
    from skillop.gateway.tracing import Tracing, start

    saved = dict(os.environ)
    os.environ.update(environ)  # the SDK's exporter reads its endpoint there
    try:
        own, sdk = start(), Tracing()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    observers = {"off": NOTHING, "metrics": Observer(metrics=GatewayMetrics(CollectorRegistry())),
                 f"traces ({type(own).__name__})": Observer(
                     metrics=GatewayMetrics(CollectorRegistry()), tracing=own),
                 "traces (the SDK's path)": Observer(
                     metrics=GatewayMetrics(CollectorRegistry()), tracing=sdk)}
    figures = []
    record = CallRecord(actor="bench", binding_name="ping", upstream="upstream",
                        upstream_tool="ping", outcome="ok", reason=None, approval=None,
                        seconds=0.001, upstream_seconds=0.0008)
    for name, observer in observers.items():
        observer.loaded({"ping"}, {"upstream"})
        seam = Pipeline((), [observer.record], say=print,
                        trace_id=observer.trace_id if observer.tracing else None)
        start = time.process_time()
        for _ in range(calls):
            with observer.request("tools/call", "ping", protocol="2026-07-28"):
                with observer.upstream("upstream", "ping"):
                    observer.context()
                seam.record(record)
        if observer.tracing is not None:
            observer.tracing.shutdown()  # what is queued is exported, and counted
        figures.append(f"{name} {(time.process_time() - start) / calls * 1e6:.1f} us")
    print(f"observer hooks alone, {calls} calls, CPU per call: " + ", ".join(figures)
          + " (traces: the spans, and their export as far as the SDK's thread ran"
          " meanwhile: this process's CPU, all threads)")


def _sdk_floor(spans: int) -> None:
    """What the OpenTelemetry SDK itself costs a span, whoever calls it: made and
    ended (a SERVER span with the gateway's four attributes, the batch processor
    taking it), and encoded for OTLP (what the exporter's thread does with it, the
    HTTP POST of the batch aside). A traced call makes two spans."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.trace import SpanKind

    kept: list[ReadableSpan] = []

    class Keep(SpanExporter):
        def export(self, batch: Any) -> SpanExportResult:
            kept.extend(batch)
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Keep(), max_queue_size=spans))
    tracer = provider.get_tracer("bench")
    attributes = {"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
                  "gen_ai.tool.name": "ping", "mcp.protocol.version": "2026-07-28"}
    start = time.thread_time()
    for _ in range(spans):
        tracer.start_span("tools/call ping", kind=SpanKind.SERVER, attributes=attributes).end()
    made = (time.thread_time() - start) / spans
    provider.force_flush()
    start = time.thread_time()
    for first in range(0, len(kept), 512):
        encode_spans(kept[first:first + 512]).SerializePartialToString()
    encoded = (time.thread_time() - start) / max(1, len(kept))
    provider.shutdown()
    print(f"the SDK alone, {spans} spans: {made * 1e6:.1f} us to make and end one,"
          f" {encoded * 1e6:.1f} us to encode one for OTLP (two spans a traced call)")


def _own_floor(spans: int) -> None:
    """The same for the gateway's own span path (spans.py, otlp.py): a span made and
    ended into the queue, and encoded, by the gateway's encoder."""
    from skillop.gateway import otlp
    from skillop.gateway import spans as s

    kept: list[s.Span] = []
    tracer = s.Tracer(lambda parent, trace_id: True, kept.append)
    attributes = {"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
                  "gen_ai.tool.name": "ping", "mcp.protocol.version": "2026-07-28"}
    start = time.thread_time()
    for _ in range(spans):
        tracer.start("tools/call ping", s.SERVER, dict(attributes), None).end()
    made = (time.thread_time() - start) / spans
    encoder = otlp.Encoder(b"", b"\x0a\x0fskillop.gateway")
    start = time.thread_time()
    for first in range(0, len(kept), 512):
        encoder.request(kept[first:first + 512])
    encoded = (time.thread_time() - start) / max(1, len(kept))
    print(f"the gateway's own spans, {spans} spans: {made * 1e6:.1f} us to make and end one,"
          f" {encoded * 1e6:.1f} us to encode one for OTLP")


def _sampler(share: float) -> dict[str, str]:
    if share >= 1:
        return {"OTEL_TRACES_SAMPLER": "always_on"}
    return {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": f"{share:g}"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--era", choices=("modern", "handshake", "both"), default="modern",
                        help="both: with --callgrind only")
    parser.add_argument("--blocks", type=int, default=20, help="blocks per gateway")
    parser.add_argument("--calls", type=int, default=500, help="calls per block")
    parser.add_argument("--warmup", type=int, default=300, help="unmeasured calls per gateway")
    parser.add_argument("--pause", type=float, default=0.0,
                        help="ms between calls (0: back to back)")
    parser.add_argument("--hooks", type=int, default=20000, help="calls of the hooks alone")
    parser.add_argument("--sdk-path", action="store_true",
                        help="trace by the SDK's span path (a setting the gateway's own"
                             " path does not cover: a span limit)")
    parser.add_argument("--callgrind", type=int, default=0, metavar="CALLS",
                        help="instead of CPU time: instructions a call under callgrind,"
                             " CALLS counted (a multiple of 256) per gateway and era")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="with --callgrind: keep each counted window's dump in DIR"
                             " (for callgrind_annotate)")
    parser.add_argument("--sample", type=float, default=1.0,
                        help="share of the agents' traces sampled (below 1: parent-based"
                             " trace-id ratio, the SDK's usual production sampler)")
    args = parser.parse_args()
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    traced = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.server_address[1]}",
              **_sampler(args.sample),
              **({"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "128"} if args.sdk_path else {})}
    if not args.callgrind:
        _sdk_floor(args.hooks)
        _own_floor(args.hooks)
        _hooks(args.hooks, {k: v for k, v in traced.items() if "LIMIT" not in k})
    upstream = subprocess.Popen([sys.executable, str(ROOT / "bench" / "gateway.py"),
                                 "--upstream"], stdout=subprocess.PIPE, text=True)
    gateways: list[subprocess.Popen[bytes]] = []
    try:
        url = bench._read_line(upstream)
        with tempfile.TemporaryDirectory() as tmp:
            if args.callgrind:
                print(f"instructions (callgrind) a call of `ping`, {args.callgrind} counted"
                      f" after as many; load average {os.getloadavg()[0]:.2f}", flush=True)
                eras = ["modern", "handshake"] if args.era == "both" else [args.era]
                _counted(url, traced, Path(tmp), eras=eras, calls=args.callgrind,
                         keep=args.keep)
                return 0
            urls: dict[str, tuple[int, str]] = {}
            for name in ("plain", "metrics", "traces"):
                extra = () if name == "plain" else (
                    "--metrics-listen", f"127.0.0.1:{_free_port()}")
                work = Path(tmp) / name
                work.mkdir()
                proc, gateway_url = bench.start_gateway(
                    url, work, extra=extra, env=traced if name == "traces" else None)
                gateways.append(proc)
                urls[name] = (proc.pid, gateway_url)
            clients: dict[str, tuple[int, list[Any]]] = {
                name: (pid, [_Reconnecting(gateway_url, args.era)])
                for name, (pid, gateway_url) in urls.items()}
            for _, (_, raws) in clients.items():
                for n in range(args.warmup):
                    raws[0].call(n)
            print(f"{args.era} era, trivial tool `ping`, {args.blocks} blocks of {args.calls}"
                  f" calls per gateway, one connection, {args.pause:g} ms between calls,"
                  f" traces sampled {args.sample:.0%}"
                  f" ({'the SDK' if args.sdk_path else 'the gateway'}'s span path);"
                  f" {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
            results = ab._measure(clients, blocks=args.blocks, calls=args.calls,
                                  pause=args.pause / 1000)
            _print(results)
            print(f"load average at the end {os.getloadavg()[0]:.2f}")
    finally:
        bench.stop((*gateways, upstream))
        sink.shutdown()
    return 0


def _counted(upstream: str, traced: dict[str, str], tmp: Path, *, eras: list[str],
             calls: int, keep: Path | None = None) -> None:
    """Instructions a call of each gateway, whole process (every thread, the span
    exporter's too), under callgrind: ``calls`` counted after as many, the exports of
    the counted calls' spans waited for (the batch processor sends a full batch at
    once: ``calls`` a multiple of 256 makes whole batches), less the idle gateway's."""
    import gateway_count as gc

    saved = bench.SKILLOP
    # No periodic re-listing of the upstream in the counts: under valgrind one costs
    # as much as hundreds of calls, and the slower traced gateway would meet more.
    # No mount poll either (``gc.QUIET``).
    quiet = gc.QUIET
    traced = {**traced, **quiet, "OTEL_BSP_SCHEDULE_DELAY": "600000"}  # full batches only
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    try:
        for name in ("plain", "metrics", "traces"):
            work = tmp / f"counted-{name}"
            work.mkdir()
            bench.SKILLOP = str(gc.launcher(ROOT, work, callgrind=True))
            extra = () if name == "plain" else ("--metrics-listen", f"127.0.0.1:{_free_port()}")
            proc, url = bench.start_gateway(upstream, work, extra=extra, timeout=600,
                                            env=traced if name == "traces" else quiet)
            try:
                for era in eras:
                    client = _Reconnecting(url, era)
                    for n in range(calls):
                        client.call(n)
                    time.sleep(2)  # the warm-up's exports
                    grind = gc.Callgrind(proc.pid, work / "callgrind.out")
                    grind.zero()
                    posts, start = _Sink.posts, time.monotonic()
                    for n in range(calls):
                        client.call(n)
                    if name == "traces":
                        gc.bench_wait(lambda n=posts: _Sink.posts >= n + calls * 2 // 512, 300)
                    took = time.monotonic() - start
                    busy = grind.read(keep=keep / f"{name}-{era}.out" if keep else None)
                    grind.zero()
                    time.sleep(window := min(took, gc.IDLE_WINDOW))
                    idle = grind.read() * took / window
                    print(f"  {name:8} {era:9} {(busy - idle) / calls:,.0f} instructions a"
                          f" call (idle less: {idle / calls:,.0f} a call;"
                          f" {_Sink.posts - posts} exports)", flush=True)
            finally:
                bench.stop((proc,))
    finally:
        bench.SKILLOP = saved


def _print(results: dict[str, tuple[float, int, list[float]]]) -> None:
    base = results["plain"][0] / results["plain"][1]
    for name, (cpu, calls, times) in results.items():
        times.sort()
        per_call = cpu / calls
        line = (f"  {name:8} gateway CPU {per_call * 1000:.3f} ms a call,"
                f" call p50 {times[len(times) // 2] * 1000:.3f} ms")
        if name in TARGETS:
            line += (f", {(per_call / base - 1) * 100:+.1f} % CPU against plain"
                     f" (target within {TARGETS[name] * 100:.0f} %)")
        print(line)


if __name__ == "__main__":
    raise SystemExit(main())
