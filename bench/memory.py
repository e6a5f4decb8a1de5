"""Benchmark: the operator's memory with a large catalog loaded.

The operator's peak memory with ``--skills`` Skills (default 10,000) and
``--actors`` Actors (default 1,000) loaded (target < 500 MiB; the goal now is
300 MiB). Creating 11,000 objects through an API and watching them into the
operator would mostly measure the API server, so this figure comes from a fresh
child process that does what the operator does at start-up: ``Store.upsert`` of
every object body (the same dicts the API serves), then one full reconcile pass
(resolve every Skill and Actor, build every status and ConfigMap and record them
in the store). Its peak RSS (VmHWM) is reported, with the baseline of the same
process before loading, so the interpreter and imports are visible.

``--applied`` gives every body what ``kubectl apply`` leaves on it (the
``last-applied-configuration`` annotation: the whole object again, as JSON; and
``managedFields``), as a cluster managed with kubectl or GitOps serves them.

``--trace N`` runs the same load under ``tracemalloc`` (slower; RSS figures then
include the tracer's own bookkeeping) and prints to stderr, after each stage, the
``N`` largest allocation sites still alive (grouped by line, with the innermost
skillop frame) and what each stage added: where the memory is, by code line.

``bench/cascade.py`` prints the same figure after the cascade (``--memory-*``).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import json
import linecache
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class Tracer:
    """Snapshots of live allocations after each stage (``tracemalloc``), printed
    to stderr; does nothing with ``top`` 0."""

    def __init__(self, top: int) -> None:
        self.top = top
        self.last: tracemalloc.Snapshot | None = None
        if top:
            tracemalloc.start(1)

    def snap(self, stage: str) -> None:
        if not self.top:
            return
        import gc

        gc.collect()
        snap = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)])
        current = sum(s.size for s in snap.statistics("filename"))
        print(f"\n== {stage}: {current / 2**20:.1f} MiB traced; largest sites alive",
              file=sys.stderr)
        _print_stats(snap.statistics("lineno")[: self.top])
        if self.last is not None:
            print(f"-- added by '{stage}'", file=sys.stderr)
            _print_stats(snap.compare_to(self.last, "lineno")[: self.top])
        self.last = snap


def _print_stats(stats: list[Any]) -> None:
    for s in stats:
        frame = s.traceback[0]
        where = f"{os.path.relpath(frame.filename, ROOT)}:{frame.lineno}"
        code = linecache.getline(frame.filename, frame.lineno).strip()[:70]
        size = getattr(s, "size_diff", s.size)
        n = getattr(s, "count_diff", s.count)
        print(f"{size / 2**20:8.2f} MiB {n:9,d} blocks  {where}  {code}", file=sys.stderr)


def kubectl_applied(body: dict[str, Any]) -> None:
    """What ``kubectl apply`` (client side) leaves on an object: the applied object
    as JSON in an annotation, and the field managers' records."""
    meta = body["metadata"]
    applied = {k: v for k, v in body.items() if k != "status"}
    meta.setdefault("annotations", {})[
        "kubectl.kubernetes.io/last-applied-configuration"] = json.dumps(applied) + "\n"
    meta["managedFields"] = [{
        "apiVersion": body["apiVersion"], "fieldsType": "FieldsV1", "manager": "kubectl",
        "operation": "Update", "time": "2025-01-01T00:00:00Z",
        "fieldsV1": {"f:metadata": {"f:annotations": {
            ".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}},
            "f:spec": {f"f:{k}": {} for k in body.get("spec", {})}}}]


def peak_rss_mib() -> float:
    """Peak RSS: VmHWM on Linux (ru_maxrss survives exec, so a child would inherit
    the parent's peak), else ru_maxrss."""
    with contextlib.suppress(OSError, StopIteration):
        status = Path("/proc/self/status").read_text()
        line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
        return int(line.split()[1]) / 1024
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def rss_mib() -> float:
    """The current resident set size (Linux), for the memory breakdown."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except OSError:
        return float("nan")
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def malloc_trim() -> bool:
    """glibc's ``malloc_trim(0)``: whether it could be called. The RSS after it is
    what is held, not what the allocator keeps of freed blocks over 512 bytes."""
    try:
        ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)
    except (OSError, AttributeError, TypeError):
        return False
    return True


def memory_objects(n_skills: int, n_actors: int, *, applied: bool = False,
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Skills in 10 namespaces, in include chains of 20 with jumps back; 3 roots per actor.
    ``applied``: as ``kubectl apply`` leaves them (last-applied-configuration, managedFields)."""
    from cascade_graph import actor, skill
    namespaces = [f"team-{i}" for i in range(10)]
    per_ns = max(1, n_skills // len(namespaces))
    skills, actors = [], []
    for i in range(n_skills):
        ns, j = namespaces[i % len(namespaces)], i // len(namespaces)
        parents = (j - 1 if j % 20 else -1, j // 20)  # chains of 20, plus a jump back
        includes = [f"s-{k:05d}" for k in parents if 0 <= k < j]
        body = skill(ns, f"s-{j:05d}", includes=sorted(set(includes)), tool=f"t_{j}",
                     description=f"anonymous tool {j} of {ns}",
                     builtins=["file_operations"] if j % 7 == 0 else [])
        body["spec"]["anonymousTools"].append({
            "name": f"u_{j}", "description": "x" * 200,
            "inputSchema": {"type": "object", "properties": {
                f"p{p}": {"type": "string", "description": f"parameter {p}"} for p in range(4)}},
        })
        skills.append(body)
    for i in range(n_actors):
        ns = namespaces[i % len(namespaces)]
        roots = [f"s-{(i * 37 + k * 101) % per_ns:05d}" for k in range(3)]
        actors.append(actor(ns, f"a-{i:05d}", sorted(set(roots))))
    for body in [*skills, *actors]:  # what the API serves: uid and generation set
        meta = body["metadata"]
        meta["uid"] = f"uid-{meta['namespace']}-{body['kind']}-{meta['name']}"
        meta["generation"] = 1
        if applied:
            kubectl_applied(body)
    return skills, actors


def memory_child(n_skills: int, n_actors: int, *, applied: bool = False,
                 trace: int = 0) -> dict[str, Any]:
    """Runs in a fresh process: load the store, reconcile everything once."""
    # What `skillop operator` imports before it lists anything: the baseline is the
    # operator's, not a bare interpreter's.
    import kopf  # noqa: F401
    import kubernetes  # noqa: F401

    import skillop.operator.discovery
    import skillop.operator.handlers
    import skillop.sources.mcp_watch  # noqa: F401
    from skillop.model.names import ObjectRef
    from skillop.operator.actorplan import actor_plan
    from skillop.operator.deps import key
    from skillop.operator.outputs import skill_plan
    from skillop.operator.runtime import _declared_states
    from skillop.operator.store import Store
    from skillop.resolve.resolver import Resolver
    from skillop.resolve.toolset import configmap_name

    baseline = peak_rss_mib()
    tracer = Tracer(trace)
    skills, actors = memory_objects(n_skills, n_actors, applied=applied)
    store = Store()
    start = time.monotonic()
    for body in [*skills, *actors]:
        store.upsert(body)
    del skills, actors
    loaded = time.monotonic() - start
    stages = {"loaded": rss_mib()}
    tracer.snap("loaded")
    problems = 0
    resolver = Resolver(store.catalog)
    now = "2025-01-01T00:00:00Z"
    for ref, sk in list(store.catalog.skills.items()):
        resolution = resolver.resolve_skill(ref)
        assert resolution is not None
        problems += len(resolution.problems)
        plan = skill_plan(sk, resolution, old_status={}, servers=_declared_states(sk), now=now)
        if plan.status is not None:
            store.record_status("Skill", ref, plan.status)
    stages["skills reconciled"] = rss_mib()
    tracer.snap("skills reconciled")
    tools = 0
    for ref, act in list(store.catalog.actors.items()):
        resolution = resolver.resolve_actor(ref)
        assert resolution is not None
        problems += len(resolution.problems)
        tools += len(resolution.tools)
        plan = actor_plan(act, resolution, old_status=store.statuses.get(key("Actor", ref), {}),
                          observed=store.observed_configmap(
                              ObjectRef(ref.namespace, configmap_name(act))), now=now)
        if plan.configmap is not None:
            store.record_configmap(plan.configmap)
        if plan.status is not None:
            store.record_status("Actor", ref, plan.status)
    stages["actors reconciled"] = rss_mib()
    tracer.snap("actors reconciled")
    elapsed = time.monotonic() - start - loaded
    del resolver, resolution, plan
    stages["resolver dropped"] = rss_mib()
    tracer.snap("resolver dropped")
    if malloc_trim():  # the C allocator's free pages back to the system (glibc)
        stages["malloc_trim"] = rss_mib()
    return {"stages": stages, "baseline_mib": baseline, "peak_mib": peak_rss_mib(),
            "load_seconds": loaded,
            "reconcile_seconds": elapsed, "problems": problems,
            "mean_tools": tools / max(1, n_actors)}


def measure_memory(n_skills: int, n_actors: int, *, applied: bool = False) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", "--skills", str(n_skills),
         "--actors", str(n_actors), *(["--applied"] if applied else [])],
        check=True, capture_output=True, text=True, cwd=ROOT)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def memory_table(sizes: str) -> None:
    """Peak memory at several catalog sizes ("SKILLS:ACTORS,..."), one fresh process each."""
    print("| Skills | Actors | tools per Actor | baseline (imports) | store loaded | peak |")
    print("|---|---|---|---|---|---|")
    for size in sizes.split(","):
        n_skills, n_actors = (int(x) for x in size.split(":"))
        mem = measure_memory(n_skills, n_actors)
        print(f"| {n_skills:,} | {n_actors:,} | {mem['mean_tools']:.0f} | "
              f"{mem['baseline_mib']:.0f} MiB | {mem['stages']['loaded']:.0f} MiB | "
              f"{mem['peak_mib']:.0f} MiB |", flush=True)


def summary(n_skills: int, n_actors: int, mem: dict[str, Any]) -> str:
    return "\n".join([
        f"memory load: {n_skills} skills + {n_actors} actors "
        f"upserted in {mem['load_seconds']:.1f}s, reconciled in "
        f"{mem['reconcile_seconds']:.1f}s ({mem['mean_tools']:.0f} tools per actor, "
        f"{mem['problems']} problems)",
        f"peak memory (in-process Store + full reconcile pass, fresh process, "
        f"VmHWM; baseline {mem['baseline_mib']:.0f} MiB): {mem['peak_mib']:.0f} MiB",
        "memory by stage (RSS): " + ", ".join(
            f"{stage} {mib:.0f} MiB" for stage, mib in mem["stages"].items())])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--skills", type=int, default=10_000, help="Skills loaded (10 namespaces)")
    p.add_argument("--actors", type=int, default=1_000, help="Actors loaded (3 root skills each)")
    p.add_argument("--applied", action="store_true",
                   help="bodies as kubectl apply leaves them (last-applied, managedFields)")
    p.add_argument("--trace", type=int, default=0, metavar="N", help="tracemalloc: top N sites")
    p.add_argument("--table", metavar="SKILLS:ACTORS,...",
                   help="only print peak memory at these catalog sizes")
    args = p.parse_args(argv)
    if args.table:
        memory_table(args.table)
    elif args.child or args.trace:
        print(json.dumps(memory_child(args.skills, args.actors, applied=args.applied,
                                      trace=args.trace)))
    else:
        mem = measure_memory(args.skills, args.actors, applied=args.applied)
        print(summary(args.skills, args.actors, mem))
    return 0


if __name__ == "__main__":
    sys.exit(main())
