"""Benchmark: an Actor's set of every size a cluster may hold, stored, mounted, served.

What is measured, and why
-------------------------
The set is the tools/list of the published MCP servers recorded in
bench/mcp_tools/servers (one Skill per server, its tools declared as ``skillop
discover -o yaml`` prints them), and for larger sizes renamed copies of it (copy
``c`` of a server is Skill ``<server>-c<c>``, its tools ``<name>_c<c>``: the same
schemas under other names, deterministic). For each size (``--sizes``, default
the recorded set, 2,000 and 5,000 tools), printed with the input size:

* ToolSet bytes: ``tools.json``, and how it is stored (one ConfigMap, or packed:
  gzip bytes and ConfigMaps, docs/toolset.md, Large sets);
* resolve time: the Actor resolved from its manifests, best of ``--repeat``;
* gateway start-up to ready: ``skillop gateway`` started on a directory laid out
  as the kubelet lays out the projected volume, until its port answers an MCP
  ``tools/list`` with the whole set (what the startup probe and then the agent
  need); and its resident memory (VmHWM, the peak, and VmRSS) then, after a
  listing by a real SDK client;
* with ``--kubeconfig`` (a real API server, e.g. the real-API tier's control
  plane, with the CRDs installed): apply to Ready, ``skillop operator`` running
  against it: the Skills and the Actor created, until the Actor's Ready is True
  with the set's hash, and the operator's resident memory then.

Run: ``python bench/largesets.py [--sizes 551,2000,5000] [--kubeconfig PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "mcp_tools" / "servers"
NS = "bench"
ACTOR = "big"


def _skill_name(stem: str) -> str:
    name = stem.lower().replace("__", "-").replace("_", "-").replace(".", "-")
    return name[:50].strip("-")


def _declared(tool: dict[str, Any], suffix: str, distinct: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f"{tool['name']}{suffix}"}
    for key in ("title", "description", "inputSchema", "outputSchema", "annotations"):
        if tool.get(key) is not None:
            out[key] = tool[key]
    if distinct:
        out["description"] = f"{out.get('description', '')} ({_tag(out['name'])})"[:4096]
    return out


def _tag(name: str) -> str:
    """160 characters gzip cannot shrink, the same for the same name."""
    import base64
    import hashlib

    block = hashlib.sha512(name.encode()).digest()
    return base64.b64encode(block + hashlib.sha512(block).digest()).decode()[:160]


def recorded() -> list[tuple[str, list[dict[str, Any]]]]:
    """(skill name, tools) of every recorded server, in file order."""
    return [(_skill_name(path.stem), json.loads(path.read_text())["tools"])
            for path in sorted(DATA.glob("*.json"))]


def manifests(count: int, *, namespace: str = NS, actor: str = ACTOR,
              distinct: bool = False) -> list[dict[str, Any]]:
    """Skills and one Actor whose set holds ``count`` tools. ``distinct``: each tool's
    description ends with 160 characters of its own (tools written apart share less
    than renamed copies do; the packed set then needs parts at 5,000 tools)."""
    group = "skillop.dev/v1alpha1"
    skills: list[dict[str, Any]] = []
    made, copy = 0, 0
    servers = recorded()
    while made < count:
        for name, tools in servers:
            if made >= count:
                break
            suffix = f"_c{copy}" if copy else ""
            taken = [_declared(t, suffix, distinct) for t in tools[: count - made]]
            made += len(taken)
            skill = f"{name}-c{copy}" if copy else name
            skills.append({
                "apiVersion": group, "kind": "Skill",
                "metadata": {"name": skill, "namespace": namespace},
                "spec": {"mcpServers": [{
                    "name": "server", "tools": taken,
                    "url": f"http://127.0.0.1:9/{skill}/mcp"}]}})
        copy += 1
    skills.append({"apiVersion": group, "kind": "Actor",
                   "metadata": {"name": actor, "namespace": namespace},
                   "spec": {"skills": [s["metadata"]["name"] for s in skills]}})
    return skills


def resolve(docs: list[dict[str, Any]], *, namespace: str = NS, actor: str = ACTOR) -> Any:
    """The Actor's Resolution, as the CLI and the operator resolve it."""
    from skillop.model.manifest import parse_object
    from skillop.model.names import ObjectRef
    from skillop.resolve.catalog import Catalog
    from skillop.resolve.resolver import Resolver

    catalog = Catalog()
    for doc in docs:
        result = parse_object(doc)
        if result.problems:
            raise SystemExit(result.problems[0].line())
        catalog.add(result.obj)
    return Resolver(catalog).resolve_actor(ObjectRef(namespace, actor))


def lay_out(layout: Any, directory: Path) -> None:
    """The set's ConfigMaps' keys in one directory, as the kubelet lays out the
    projected volume (files in a timestamped directory, ``..data`` swapped, one
    link per key)."""
    stamp = directory / "..2026_01_01_00_00_00.1"
    stamp.mkdir(parents=True)
    for stored in layout.configmaps:
        for key, value in stored.data.items():
            (stamp / key).write_text(value)
        for key, data in stored.binary.items():
            (stamp / key).write_bytes(data)
    os.symlink(stamp.name, directory / "..data")
    for entry in stamp.iterdir():
        os.symlink(f"..data/{entry.name}", directory / entry.name)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _cpu_seconds(pid: int, *, thread: int | None = None) -> float:
    """User and system CPU time ``pid`` has used, or its thread ``thread`` alone: what
    start-up costs whatever else the machine runs (wall time on a shared machine is
    mostly waiting)."""
    stat = Path(f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat")
    fields = stat.read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _memory(pid: int) -> dict[str, int]:
    """VmHWM and VmRSS of ``pid``, in KiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            out[key] = int(value.split()[0])
    return out


def _list_all(url: str) -> int:
    """How many tools a real SDK client (the handshake era) lists from ``url``."""
    import anyio
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> int:
        async with (httpx2.AsyncClient(timeout=60) as http,
                    streamable_http_client(url, http_client=http) as (read, write),
                    ClientSession(read, write) as session):
            await session.initialize()
            return len((await session.list_tools()).tools)

    return anyio.run(main)


Timing = tuple[float, float]
"""Wall-clock seconds since start, and the process's CPU seconds then."""


@dataclass(frozen=True)
class GatewayRun:
    """One gateway process's start: when its port answered, when a real SDK client
    had listed the whole set, its main thread's CPU seconds then (the event loop's:
    what holds up serving; the rest is background threads), its memory after a
    second listing (KiB), how many tools that listing had, and its memory once it
    said it had settled (``settled``'s text on stderr), if asked."""

    listening: Timing
    ready: Timing
    ready_main_cpu: float
    memory: dict[str, int]
    listed: int
    settled_memory: dict[str, int] | None = None


def gateway(directory: Path, expected: int, *, settled: str | None = None) -> GatewayRun:
    """A gateway started on ``directory``, until it has listed the set (session, then
    tools/list over HTTP) twice and, with ``settled``, said a line holding that text
    (within two minutes); stopped after."""
    port = _free_port()
    secrets = directory.parent / "secrets"
    secrets.mkdir(exist_ok=True)
    command = [str(Path(sys.executable).parent / "skillop"), "gateway", "--listen",
               f"127.0.0.1:{port}", "--toolset-dir", str(directory), "--secrets-dir",
               str(secrets), "--allow", "127.0.0.1:9"]
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        while True:  # the port answers (the startup probe's tcpSocket check)
            if proc.poll() is not None:
                raise SystemExit(f"the gateway exited: {proc.stderr.read().decode()[-500:]}")
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.01)
        listening = time.perf_counter() - started
        listening_cpu = _cpu_seconds(proc.pid)
        listed = _list_all(url)
        ready = time.perf_counter() - started
        ready_cpu, main_cpu = _cpu_seconds(proc.pid), _cpu_seconds(proc.pid, thread=proc.pid)
        if listed != expected:
            raise SystemExit(f"the gateway listed {listed} tools of {expected}")
        again = _list_all(url)
        memory = _memory(proc.pid)
        return GatewayRun((listening, listening_cpu), (ready, ready_cpu), main_cpu, memory,
                          again, _settled(proc, settled) if settled is not None else None)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _settled(proc: subprocess.Popen[bytes], text: str) -> dict[str, int]:
    """``proc``'s memory once it has said ``text`` on stderr."""
    assert proc.stderr is not None
    deadline = time.monotonic() + 120
    for line in proc.stderr:
        if text.encode() in line:
            return _memory(proc.pid)
        if time.monotonic() > deadline:
            break
    raise SystemExit(f"the gateway did not say {text!r}")


def _kib(n: int) -> str:
    return f"{n / 1024:,.0f} KiB"


def measure(count: int, repeat: int) -> None:
    import mcp_types as types

    from skillop.gateway.served import load_served_set
    from skillop.resolve.toolset import configmap_layout

    docs = manifests(count)
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        resolution = resolve(docs)
        best = min(best, time.perf_counter() - started)
    assert resolution is not None and not resolution.problems, resolution.problems[:1]
    tools = len(resolution.tools)
    started = time.perf_counter()
    layout = configmap_layout(f"{ACTOR}-tools", resolution.text, resolution.hash,
                              resolution.tools)
    packing = time.perf_counter() - started
    stored = ("one ConfigMap (tools.json)" if layout.compressed_bytes is None else
              f"packed: {_kib(layout.compressed_bytes)} gzip in {len(layout.configmaps)}"
              f" ConfigMaps ({', '.join(_kib(c.size()) for c in layout.configmaps)})")
    print(f"{tools:,} tools ({len(docs) - 1} skills): tools.json {_kib(layout.document_bytes)};"
          f" stored as {stored}; layout {packing * 1000:.0f} ms")
    print(f"  resolve (best of {repeat}): {best:.2f} s")
    served = [t for t in resolution.tools if t.entry.tool.source in ("mcp", "agent_skill")]
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "tools"
        lay_out(layout, directory)
        started = time.perf_counter()
        loaded = load_served_set(directory)
        listing = types.ListToolsResult(tools=list(loaded.listing)).model_dump_json(
            by_alias=True, exclude_none=True)
        in_process = time.perf_counter() - started
        run = gateway(directory, len(served))
    listening, ready, memory, listed = run.listening, run.ready, run.memory, run.listed
    print(f"  gateway, in process: set read and listing built ({len(listing) // 1024:,} KiB)"
          f" in {in_process:.2f} s")
    print(f"  gateway process (load average {os.getloadavg()[0]:.1f}): port open after"
          f" {listening[0]:.2f} s ({listening[1]:.2f} s CPU), the whole set listed by an SDK"
          f" client after {ready[0]:.2f} s ({ready[1]:.2f} s CPU); SDK client listed"
          f" {listed:,}; memory VmHWM {memory['VmHWM'] / 1024:.0f} MiB,"
          f" VmRSS {memory['VmRSS'] / 1024:.0f} MiB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="", help="tool counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    total = sum(len(tools) for _, tools in recorded())
    sizes = [int(s) for s in args.sizes.split(",") if s] or [total, 2000, 5000]
    for size in sizes:
        measure(size, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
