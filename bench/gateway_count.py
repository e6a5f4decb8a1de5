"""Benchmark: what the gateway's own code does per tool call, counted (not timed).

Wall-clock and CPU figures move with whatever else runs on a shared machine;
these counts do not. For each build (``--build``: a checkout with its own
``.venv``, any number of them) a ``skillop gateway`` serves bench/gateway.py's
ToolSet of its trivial upstream (``ping``), and a raw HTTP/1.1 client
(bench/gateway_ab.py's: next to no work of its own, and none in the gateway's
process) calls ``ping`` back to back, for each protocol era (``--eras``):
``--warmup`` calls, then ``--calls`` counted ones. Printed per build and era:

- default: Python calls per request in the gateway's event-loop thread, from a
  profile hook (``sys.setprofile``, installed by a ``sitecustomize`` put on the
  gateway's PYTHONPATH): ``call`` events (a function entered, or a coroutine or
  generator resumed) and ``c_call`` events (a builtin called). The hook is told
  to zero and to read its counts over a loopback socket by a thread of its own
  (not counted), between calls: the counts are exact, less the gateway's idle
  work meanwhile (its mount poll), counted as for callgrind. ``--names DIR``: the
  calls by function too, one file per build and era in DIR.
- ``--callgrind``: instructions per request of the whole gateway process (every
  thread), under valgrind's callgrind (zeroed after the warm-up, dumped after
  the counted calls, by ``callgrind_control``).
- ``--bytecodes``: bytecodes executed per request in the gateway's threads (a
  trace hook's ``opcode`` events, from the first zero on; ``--names``: by
  function). Instructions count the C code as much as the interpreter's; a
  bytecode is a dispatch (an indirect jump) and the objects it reads, dearer in
  CPU than its instructions say.

``--observe``: what each gateway observes, as bench/gateway_observe.py's three
(``plain``; ``metrics``: ``--metrics-listen``; ``traces``: metrics, and every call
traced, its spans sent to an OTLP receiver in this process in whole batches,
waited for before the counts are read). The counts are of every thread Python
starts after the hook (the span exporter's too); ``--names`` writes another
thread's calls under its name (``[skillop-otlp-spans] ...``).

The upstream is listed again at most hourly (``SKILLOP_GATEWAY_RELIST_INTERVAL``),
mounts are looked for at most hourly (``SKILLOP_GATEWAY_POLL``). Either way the
gateway's idle work in that time is counted too, without calls for as long (at
most ``IDLE_WINDOW``, scaled), and printed beside: ``net`` is the calls' count
less it.

    .venv/bin/python bench/gateway_count.py --build /path/to/base --build . \\
        [--eras modern,handshake] [--calls 300] [--warmup 100] [--callgrind]
    .venv/bin/python bench/gateway_count.py --build . --observe metrics,traces \\
        --calls 512 --names /tmp/names
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "bench", ROOT / "tests", ROOT / "tests" / "unit", ROOT / "tests" / "gateway"):
    sys.path.insert(0, str(_path))

from gateway_ab import RawClient  # noqa: E402

import gateway as bench  # noqa: E402

#: The profile hook, as the gateway's ``sitecustomize``: counts in the threads
#: Python starts after it (the event loop's is the main one), served to
#: ``Counter`` over a loopback socket by its own thread, which is not counted.
HOOK = '''
import os, socket, sys, threading

_counts = [0, 0]
_names = {} if os.environ.get("SKILLOP_COUNT_NAMES") else None
_bytecodes = [bool(os.environ.get("SKILLOP_COUNT_BYTECODES")), False]  # asked, started


def _key(frame):
    code = frame.f_code
    key = f"{code.co_filename.rsplit('/', 2)[-1]}:{code.co_qualname}"
    if code.co_filename == "<string>" and code.co_argcount:
        # made by exec (a dataclass's __init__, a NamedTuple's __new__): by class
        first = frame.f_locals.get(code.co_varnames[0])
        owner = first if isinstance(first, type) else type(first)
        key = f"{key} of {owner.__qualname__}"
    return key


def _trace(frame, event, arg):
    """Bytecodes executed (``opcode`` events), once the first zero started them: a
    frame entered or resumed from then on is traced."""
    if not _bytecodes[1]:
        return None
    frame.f_trace_lines = False
    frame.f_trace_opcodes = True
    key = _key(frame) if _names is not None else None

    def _step(frame, event, arg):
        if event == "opcode":
            _counts[0] += 1
            if key is not None:
                _names[key] = _names.get(key, 0) + 1
        return _step
    return _step


_main = threading.main_thread().ident


def _thread():
    """"" in the event loop's thread, else "[its name] " (the span exporter's)."""
    ident = threading.get_ident()
    return "" if ident == _main else f"[{threading.current_thread().name}] "


def _hook(frame, event, arg):
    if event == "call":
        _counts[0] += 1
        if _names is not None:
            key = _thread() + _key(frame)
            _names[key] = _names.get(key, 0) + 1
    elif event == "c_call":
        _counts[1] += 1
        if _names is not None:
            key = f"{_thread()}builtin {getattr(arg, '__qualname__', arg)}"
            _names[key] = _names.get(key, 0) + 1


def _serve(sock):
    while True:
        conn, _ = sock.accept()
        with conn:
            command = conn.recv(16)
            if command == b"zero":
                _bytecodes[1] = _bytecodes[0]
                _counts[0] = _counts[1] = 0
                if _names is not None:
                    _names.clear()
            elif command == b"names":
                import json
                with open(os.environ["SKILLOP_COUNT_NAMES"], "w") as out:
                    json.dump(dict(_names), out)
            conn.sendall(f"{_counts[0]} {_counts[1]}".encode())


_sock = socket.create_server(("127.0.0.1", 0))
with open(os.environ["SKILLOP_COUNT_PORT"], "w") as _out:
    _out.write(str(_sock.getsockname()[1]))
threading.Thread(target=_serve, args=(_sock,), daemon=True).start()
if _bytecodes[0]:
    sys.settrace(_trace)
    threading.settrace(_trace)
else:
    sys.setprofile(_hook)
    threading.setprofile(_hook)
'''


#: No periodic re-listing of the upstream in the counts (under valgrind, one costs as
#: much as hundreds of calls, at times the load decides), and no look for new mounts
#: (once a second, the idle work counted beside: what the correction for it moved
#: the counts of a traced call by).
QUIET = {"SKILLOP_GATEWAY_RELIST_INTERVAL": "3600", "SKILLOP_GATEWAY_POLL": "3600"}
#: The longest the idle gateway is watched (then scaled to the calls' time): less
#: than uvicorn's keep-alive (5 s), whose closing the connection is no idle work.
IDLE_WINDOW = 3.0


class Counter:
    """The profile hook's counts in one gateway."""

    def __init__(self, port_file: Path) -> None:
        bench_wait(lambda: port_file.exists() and port_file.read_text() != "", 60)
        self._port = int(port_file.read_text())

    def _ask(self, command: bytes) -> tuple[int, int]:
        with socket.create_connection(("127.0.0.1", self._port)) as sock:
            sock.sendall(command)
            calls, c_calls = sock.recv(64).decode().split()
        return int(calls), int(c_calls)

    def zero(self) -> None:
        self._ask(b"zero")

    def read(self) -> tuple[int, int]:
        return self._ask(b"read")

    def names(self) -> None:
        """Write the calls by function to the file ``SKILLOP_COUNT_NAMES`` names."""
        self._ask(b"names")


class Callgrind:
    """Instruction counts of a gateway under callgrind, by ``callgrind_control``."""

    def __init__(self, pid: int, out: Path) -> None:
        self._pid = pid
        self._out = out

    def zero(self) -> None:
        subprocess.run(["callgrind_control", "-z", str(self._pid)], check=True,
                       capture_output=True)

    def read(self, *, keep: Path | None = None) -> int:
        """Instructions since the last zero (a dump, read back; copied to ``keep``)."""
        before = set(glob.glob(f"{self._out}*"))
        subprocess.run(["callgrind_control", "-d", str(self._pid)], check=True,
                       capture_output=True)
        bench_wait(lambda: bool(set(glob.glob(f"{self._out}*")) - before), 60)
        (dump,) = set(glob.glob(f"{self._out}*")) - before
        bench_wait(lambda: "totals:" in Path(dump).read_text(errors="replace"), 60)
        if keep is not None:
            shutil.copyfile(dump, keep)
        for line in Path(dump).read_text(errors="replace").splitlines():
            if line.startswith("totals:"):
                return int(line.split()[1])
        raise RuntimeError(f"no totals in {dump}")


def bench_wait(predicate: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError("not in time")
        time.sleep(0.05)


def first_call(client: RawClient, *, tries: int = 10) -> None:
    """A first call, made again while it finds the upstream not yet connected: the
    gateway connects on its first call (or listing) within 10 s, which a gateway
    under valgrind on a busy machine can miss."""
    for _ in range(tries - 1):
        try:
            client.call(0)
            return
        except RuntimeError as exc:
            if "unavailable" not in str(exc):
                raise
    client.call(0)


def launcher(build: Path, work: Path, *, callgrind: bool) -> Path:
    """A ``skillop`` for ``build``: its operator/ (and the hook) on the path, the
    interpreter this script runs on, under callgrind if asked."""
    hook = work / "hook"
    hook.mkdir()
    if not callgrind:
        (hook / "sitecustomize.py").write_text(HOOK)
    valgrind = (f"valgrind --tool=callgrind --callgrind-out-file={work}/callgrind.out"
                " --dump-instr=no " if callgrind else "")
    script = work / "skillop"
    script.write_text("#!/bin/sh\n"
                      f"export PYTHONPATH={build.resolve()}/operator:{hook}\n"
                      f"exec {valgrind}{sys.executable} -m skillop \"$@\"\n")
    script.chmod(0o755)
    return script


def _observed(observe: str, sink: str | None) -> tuple[tuple[str, ...], dict[str, str]]:
    """The flags and environment of a gateway that observes as ``observe`` says
    (bench/gateway_observe.py's three: plain, metrics, traces), its spans sent to
    ``sink``; and with traces, full batches only (sent when 512 spans wait)."""
    import gateway_observe as go

    if observe == "plain":
        return (), {}
    flags = ("--metrics-listen", f"127.0.0.1:{go._free_port()}")
    if observe == "metrics":
        return flags, {}
    assert sink is not None
    return flags, {"OTEL_EXPORTER_OTLP_ENDPOINT": sink, **go._sampler(1.0),
                   "OTEL_BSP_SCHEDULE_DELAY": "600000"}


def _exported(observe: str, posts: int, calls: int) -> None:
    """With traces, wait for the exports of the counted calls' spans (two a call, in
    batches of 512: ``calls`` a multiple of 256 sends whole ones)."""
    if observe == "traces":
        import gateway_observe as go

        bench_wait(lambda: go._Sink.posts >= posts + calls * 2 // 512, 300)


def _posts() -> int:
    import gateway_observe as go

    return go._Sink.posts


def count_build(build: Path, upstream: str, tmp: Path, args: argparse.Namespace, *,
                observe: str = "plain", sink: str | None = None) -> None:
    work = tmp / f"build-{len(list(tmp.iterdir()))}"
    work.mkdir()
    bench.SKILLOP = str(launcher(build, work, callgrind=args.callgrind))
    port_file = work / "count-port"
    env = {"SKILLOP_COUNT_PORT": str(port_file), **QUIET}
    if args.names is not None:
        env["SKILLOP_COUNT_NAMES"] = str(work / "names.json")
    if args.bytecodes:
        env["SKILLOP_COUNT_BYTECODES"] = "1"
    flags, observing = _observed(observe, sink)
    proc, url = bench.start_gateway(upstream, work, extra=flags, env={**env, **observing},
                                    timeout=600 if args.callgrind else 60)
    label = f"{build} {observe}" if args.observe != "plain" else str(build)
    try:
        for era in args.eras.split(","):
            client = RawClient(url, era)
            first_call(client)
            for n in range(args.warmup):
                client.call(n)
            if observe == "traces":
                time.sleep(2)  # the warm-up's exports, if a batch was full
            if args.callgrind:
                grind = Callgrind(proc.pid, work / "callgrind.out")
                grind.zero()
                posts, start = _posts(), time.monotonic()
                for n in range(args.calls):
                    client.call(n)
                _exported(observe, posts, args.calls)
                took = time.monotonic() - start
                busy = grind.read()
                grind.zero()
                time.sleep(window := min(took, IDLE_WINDOW))
                idle = grind.read() * took / window
                print(f"  {label} {era}: {busy / args.calls:,.0f} instructions a call"
                      f" (idle for as long, {took:.1f} s: {idle / args.calls:,.0f} a call;"
                      f" net {(busy - idle) / args.calls:,.0f})", flush=True)
            else:
                counter = Counter(port_file)
                counter.zero()
                posts, start = _posts(), time.monotonic()
                for n in range(args.calls):
                    client.call(n)
                _exported(observe, posts, args.calls)
                took = time.monotonic() - start
                calls, c_calls = counter.read()
                if args.names is not None:
                    counter.names()
                counter.zero()
                time.sleep(window := min(took, IDLE_WINDOW))
                idle = counter.read()[0] * took / window
                counted = ("bytecodes a call" if args.bytecodes else
                           f"Python calls a call, {c_calls / args.calls:.1f} builtin calls")
                print(f"  {label} {era}: {calls / args.calls:.1f} {counted} (idle in the same"
                      f" {took:.1f} s: {idle / args.calls:.1f} a call; net"
                      f" {(calls - idle) / args.calls:.1f})", flush=True)
                if args.names is not None:
                    by_name = json.loads((work / "names.json").read_text())
                    out = args.names / f"{build.resolve().name}-{observe}-{era}.txt"
                    out.write_text("".join(
                        f"{count / args.calls:8.2f} {name}\n" for name, count in
                        sorted(by_name.items(), key=lambda item: -item[1])))
                    print(f"    by function: {out}")
    finally:
        bench.stop((proc,))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, action="append", required=True,
                        help="a checkout with its .venv (repeat for each build)")
    parser.add_argument("--eras", default="modern,handshake")
    parser.add_argument("--calls", type=int, default=300, help="counted calls per era")
    parser.add_argument("--warmup", type=int, default=100, help="uncounted calls first")
    parser.add_argument("--names", type=Path, default=None,
                        help="a folder: write Python calls per call by function there")
    parser.add_argument("--callgrind", action="store_true",
                        help="instructions under callgrind (else Python calls)")
    parser.add_argument("--bytecodes", action="store_true",
                        help="bytecodes executed (a trace hook), not Python calls; with"
                             " --names, by function")
    parser.add_argument("--keep", type=Path, default=None,
                        help="an empty folder: work there and keep what is made (the"
                             " callgrind dumps, for callgrind_annotate)")
    parser.add_argument("--observe", default="plain",
                        help="what each gateway observes, comma-separated: plain, metrics"
                             " (--metrics-listen), traces (metrics, and every call traced"
                             " to an OTLP receiver in this process: counts with the"
                             " export thread's, --calls a multiple of 256)")
    args = parser.parse_args()
    observes = args.observe.split(",")
    if set(observes) - {"plain", "metrics", "traces"}:
        parser.error(f"--observe {args.observe}: plain, metrics or traces")
    if "traces" in observes and args.calls % 256:
        parser.error("--observe traces: --calls a multiple of 256 (whole batches of spans)")
    what = ("instructions (callgrind)" if args.callgrind else "bytecodes (trace hook)"
            if args.bytecodes else "Python calls (profile hook)")
    print(f"{what} per tools/call of ping, {args.calls} counted after {args.warmup},"
          f" one raw client; load average {os.getloadavg()[0]:.2f}", flush=True)
    upstream = subprocess.Popen([sys.executable, str(ROOT / "bench" / "gateway.py"), "--upstream"],
                                stdout=subprocess.PIPE, text=True)
    sink = None
    if "traces" in observes:
        import gateway_observe as go

        sink = ThreadingHTTPServer(("127.0.0.1", 0), go._Sink)
        threading.Thread(target=sink.serve_forever, daemon=True).start()
    try:
        url = bench._read_line(upstream)
        with tempfile.TemporaryDirectory() as tmp:
            for build in args.build:
                for observe in observes:
                    count_build(build, url, args.keep or Path(tmp), args, observe=observe,
                                sink=sink and f"http://127.0.0.1:{sink.server_address[1]}")
    finally:
        bench.stop((upstream,))
        if sink is not None:
            sink.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
