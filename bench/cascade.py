"""Benchmark: one change deep in a shared Skill, cascading to every Actor.

What is measured, and why
-------------------------
A Skill included (directly or through other skills) by many Actors is the
operator's worst everyday case: one edit there must reach every dependent
Actor's ConfigMap and status, quickly, without a storm of API writes, and a
restarted operator must not rewrite anything that is already correct.

The script builds, in namespace ``--namespace``:

* a base Skill ``base`` with an anonymous tool ``probe`` (the one that changes)
  and a built-in group;
* a chain of ``--depth`` Skills (default 10), ``chain-1`` including ``base``,
  ``chain-k`` including ``chain-(k-1)``, each adding an anonymous tool of its own;
* ``--tops`` top Skills (default 4), each including the last chain skill;
* ``--actors`` Actors (default 500), spread over the top skills, so every Actor
  reaches ``base`` through ``depth + 1`` include edges.

It starts the operator (in-process with kopf's ``KopfRunner`` against the
emulated API; as ``skillop operator`` in its own process with ``--kubeconfig``),
waits until every Actor is Ready with a ConfigMap, then changes ``probe``'s
description in ``base`` and prints:

* ``cascade time``: from the PATCH until every Actor's ``status.toolsHash`` and
  ConfigMap annotation ``skillop.dev/tools-hash`` carry a new hash (followed with
  two watches, on the namespace's Actors and managed ConfigMaps: polling every
  Actor's status would load the API server more the more Actors there are);
* the API writes since the PATCH, by resource: Actor ConfigMaps, Actor status
  (and any other Actor writes), Skill status, Events; target: at most 2 writes
  per changed Actor (one ConfigMap, one status);
* ``restart writes``: the writes of an operator restarted over the unchanged
  cluster, observed for ``--settle`` seconds after its watches are up (target 0);
* the operator's peak memory with ``--memory-skills`` Skills (default 10,000)
  and ``--memory-actors`` Actors (default 1,000) loaded, measured by
  ``bench/memory.py`` in a fresh process (its docstring says how; ``--no-memory``
  skips it, ``--memory-table`` prints it at several sizes and nothing else).

Without ``--kubeconfig`` everything runs against the emulated API of
``tests/kube_emulator.py`` and writes are counted exactly from its request log
(no-op writes included). With ``--kubeconfig PATH`` the same steps run against
that API (a real cluster, ``tests/realapi/controlplane.py``, or the emulator in
its own process: ``python tests/kube_emulator.py --crds crds --kubeconfig PATH``;
no operator may be running there already); writes are then counted from watch
events, i.e. only writes that changed an object, until ``--settle`` seconds after
the cascade (Events, posted after the batch's writes, may still be going out).
``BENCH_OPERATOR_PREFIX`` runs the operator process under a profiler.

* ``raw writes``: in the same run, against the same API, once the operator has
  stopped: a plain client doing the cascade's writes (per Actor, its ConfigMap
  replaced with the same data and a status patch with the same status) one after
  another, or on ``--raw-threads`` threads (16: the floor the target is stated
  against; the operator keeps ``SKILLOP_WRITE_CONCURRENCY``, 32, in flight), on
  Actors and ConfigMaps of a namespace of their own. The CPU each process used
  over the cascade and over the floor is printed (``/proc``): the operator,
  kube-apiserver and etcd (under ``tests/realapi/controlplane.py``), the benchmark.

With ``--kubeconfig`` it also prints the operator's peak RSS (VmHWM of its
process), the API server's request count per phase (``apiserver_request_total``
from its ``/metrics``, where it has one) and the restarted operator's time from
its start to the end of the batch that resolved every Actor; with
``--apiserver-restart`` (under ``tests/realapi/controlplane.py``), after the
cascade, kube-apiserver is restarted under the running operator, and its writes
then and the CPU time its re-listing took are printed. ``--create-threads``
creates the Actors on that many threads (10,000 POSTs one after another take
minutes).

The last line is ``cascade/raw-write ratio: X.XX``: how many times as long as the
plain client the operator's cascade took (target: at most 1.5).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections import Counter
from typing import Any

from benchkit import wait_until
from cascade_cluster import (
    Cluster,
    CpuMeter,
    OperatorProbe,
    api_requests,
    control_plane_pids,
    create_all,
    environment,
    operator,
    raw_writes,
)
from cascade_graph import cascade_objects
from cascade_watch import EmulatorLog, Progress, WatchLog, WriteLog
from memory import measure_memory, memory_table, summary

from skillop.model.toolset import default_configmap_name

RESTART_PID = "CONTROLPLANE_PID"  # tests/realapi/controlplane.py: SIGUSR1 restarts the API server

# -- the run ---------------------------------------------------------------------------


def run_cascade(args: argparse.Namespace) -> dict[str, Any]:
    os.environ.setdefault("SKILLOP_DEBOUNCE_SECONDS", str(args.debounce))
    os.environ.setdefault("SKILLOP_LOG_LEVEL", "WARNING")
    figures: dict[str, Any] = {"requests": {}}
    with environment(args.kubeconfig) as emulator_log:
        cluster = Cluster(args.namespace)
        cluster.ensure_namespace()
        log: WriteLog = emulator_log if emulator_log is not None else WatchLog(args.namespace)
        progress = Progress(args.namespace)
        try:
            with operator(args.kubeconfig) as probe:
                before = initial_load(args, cluster, progress, figures)
                meter = CpuMeter({**({"operator": probe.pid} if probe else {}),
                                  **control_plane_pids(), "benchmark": os.getpid()})
                after = cascade(args, cluster, progress, log, figures, meter)
                if probe is not None:
                    figures["operator_peak_mib"] = probe.peak_rss_mib()
                if args.apiserver_restart and probe is not None:
                    apiserver_restart(args, log, probe, figures)
            if not args.no_restart:
                restart(args, log, figures)
            figures["exact"] = log.exact
            raw_meter = CpuMeter({**control_plane_pids(), "benchmark": os.getpid()})
            figures["raw_seconds"] = raw_writes(
                f"{args.namespace}-raw", args.actors, before, after, threads=args.raw_threads,
                meter=raw_meter)
            figures["cpu"] = {"cascade": meter.used, "raw writes": raw_meter.used}
        finally:
            progress.close()
            log.close()
            if args.kubeconfig is not None and not args.keep:
                cluster.delete_namespace()
                Cluster(f"{args.namespace}-raw").delete_namespace()
    return figures


def initial_load(args: argparse.Namespace, cluster: Cluster, progress: Progress,
                 figures: dict[str, Any]) -> Any:
    """Create every object; wait for every Actor Ready with its ConfigMap. The
    sample an Actor's status and ConfigMap then are (the raw client's first data)."""
    skills, actors = cascade_objects(args.namespace, args.actors, args.depth, args.tops)
    requests = api_requests()
    start = time.monotonic()
    for body in skills:
        cluster.create("skills", body)
    create_all(args.namespace, "actors", actors, args.create_threads)
    figures["create_seconds"] = time.monotonic() - start

    def all_ready() -> bool:
        hashes, cms = progress.actor_hashes(), progress.configmap_hashes()
        return len(hashes) == args.actors and all(
            ready and h and cms.get(default_configmap_name(name)) == h
            for name, (h, ready) in hashes.items())

    wait_until(all_ready, args.timeout, "every Actor Ready with its ConfigMap", interval=0.05)
    figures["initial_seconds"] = time.monotonic() - start
    _requests(figures, "initial load", requests)
    figures["old_hashes"] = {h for h, _ in progress.actor_hashes().values()}
    sample = cluster.sample()
    time.sleep(args.settle)  # let the initial reconcile go quiet
    return sample


def cascade(args: argparse.Namespace, cluster: Cluster, progress: Progress, log: WriteLog,
            figures: dict[str, Any], meter: CpuMeter) -> Any:
    """Change the base Skill's tool; wait for every Actor's new hash. ``meter``
    takes each process's CPU from the PATCH to the last new hash."""
    old = figures.pop("old_hashes")
    mark = log.mark()
    requests = api_requests()
    meter.start()
    start = time.monotonic()
    cluster.set_probe_description("probe v2: now with a changed description")

    def all_new() -> bool:
        hashes, cms = progress.actor_hashes(), progress.configmap_hashes()
        return len(hashes) == args.actors and all(
            h and h not in old and cms.get(default_configmap_name(name)) == h
            for name, (h, _) in hashes.items())

    wait_until(all_new, args.timeout, "every Actor carrying the new hash", interval=0.05)
    figures["cascade_seconds"] = time.monotonic() - start  # from the PATCH
    meter.stop()
    _requests(figures, "cascade", requests)
    time.sleep(args.settle)  # late or repeated writes count too
    figures["cascade_writes"] = log.counts(mark)
    return cluster.sample()


def restart(args: argparse.Namespace, log: WriteLog, figures: dict[str, Any]) -> None:
    """An operator restarted over the unchanged cluster: its writes (none wanted),
    and, in its own process, the time until it has resolved every Actor once."""
    mark = log.mark()
    requests = api_requests()
    start = time.monotonic()
    with operator(args.kubeconfig) as probe:
        if isinstance(log, EmulatorLog):
            wait_until(lambda: log.emulator.active_watches("actors") > 0, 30,
                       "the restarted operator watching Actors")
        if isinstance(probe, OperatorProbe):
            wait_until(lambda: probe.objects_resolved("Actor") >= args.actors, args.timeout,
                       "the restarted operator resolving every Actor", interval=0.2)
            figures["restart_ready_seconds"] = time.monotonic() - start
        time.sleep(args.settle)
        if probe is not None:
            figures["restart_peak_mib"] = probe.peak_rss_mib()
    _requests(figures, "restart", requests)
    figures["restart_writes"] = log.counts(mark)


def apiserver_restart(args: argparse.Namespace, log: WriteLog, probe: OperatorProbe,
                      figures: dict[str, Any]) -> None:
    """kube-apiserver restarted under the running operator: every watch breaks and
    lists again. Its writes (none wanted) and what the re-listing cost it: CPU
    time from the restart until ``--apiserver-window`` seconds after the API
    server's return, and when it was last busy (a second with over 0.1 s of CPU)."""
    pid = os.environ.get(RESTART_PID)
    if pid is None:
        raise SystemExit("--apiserver-restart: run under tests/realapi/controlplane.py")
    mark = log.mark()
    cpu = last = probe.cpu_seconds()
    start = time.monotonic()
    os.kill(int(pid), signal.SIGUSR1)  # the control plane restarts kube-apiserver
    wait_until(lambda: api_requests() is None, 60, "kube-apiserver stopped", interval=0.1)
    wait_until(lambda: api_requests() is not None, args.timeout, "kube-apiserver back",
               interval=0.2)
    figures["apiserver_back_seconds"] = time.monotonic() - start
    busy_until = 0.0
    back = time.monotonic()
    while time.monotonic() - back < args.apiserver_window:
        time.sleep(1.0)
        now = probe.cpu_seconds()
        if now - last > 0.1:
            busy_until = time.monotonic() - start
        last = now
    figures["apiserver_cpu_seconds"] = last - cpu
    figures["apiserver_busy_seconds"] = busy_until
    figures["apiserver_peak_mib"] = probe.peak_rss_mib()
    _requests(figures, "after the API server restart", 0)
    figures["apiserver_writes"] = log.counts(mark)


def _requests(figures: dict[str, Any], phase: str, before: int | None) -> None:
    after = api_requests()
    if before is not None and after is not None:
        figures["requests"][phase] = after - before


# -- report ---------------------------------------------------------------------------------


def report(args: argparse.Namespace, f: dict[str, Any], mem: dict[str, Any] | None) -> None:
    api = f"real cluster ({args.kubeconfig})" if args.kubeconfig else "emulated API"
    how = "requests" if f["exact"] else "changes seen by watches"
    print(f"api: {api}; writes counted as {how}")
    print(f"actors: {args.actors}; skills: {1 + args.depth + args.tops} "
          f"(base + chain of {args.depth} + {args.tops} tops); "
          f"include depth actor->base: {args.depth + 1}")
    print(f"initial load: created in {f['create_seconds']:.2f}s, all Ready with ConfigMaps "
          f"after {f['initial_seconds']:.2f}s")
    w: Counter[str] = f["cascade_writes"]
    print(f"cascade time: {f['cascade_seconds']:.2f}s")
    print(f"actor configmap writes: {w['configmaps']}")
    print(f"actor status writes: {w['actor status']}")
    print(f"other actor writes: {w['actor other']}")
    print(f"skill status writes: {w['skill status']}")
    print(f"other skill writes: {w['skill other']}")
    print(f"events: {w['events']}")
    if "restart_writes" in f:
        print(f"restart writes: {sum(f['restart_writes'].values())} "
              f"({dict(f['restart_writes']) or 'none'})")
    if "apiserver_back_seconds" in f:
        print(f"kube-apiserver restart: back after {f['apiserver_back_seconds']:.2f}s; "
              f"operator writes then: {sum(f['apiserver_writes'].values())} "
              f"({dict(f['apiserver_writes']) or 'none'}); operator CPU from the restart to "
              f"{args.apiserver_window:.0f}s after: {f['apiserver_cpu_seconds']:.2f}s, last busy "
              f"second {f['apiserver_busy_seconds']:.0f}s after the restart; peak RSS "
              f"{f['apiserver_peak_mib']:.0f} MiB")
    if "restart_ready_seconds" in f:
        print(f"restart: every Actor resolved after {f['restart_ready_seconds']:.2f}s "
              f"(process start to its batch's end)")
    if "operator_peak_mib" in f:
        restarted = (f", {f['restart_peak_mib']:.0f} MiB restarted"
                     if "restart_peak_mib" in f else "")
        print(f"operator peak RSS (VmHWM): {f['operator_peak_mib']:.0f} MiB after the "
              f"cascade{restarted}")
    for phase, n in f["requests"].items():
        print(f"API server requests ({phase}; apiserver_request_total, the benchmark's "
              f"own watches and lists included): {n}")
    if mem is not None:
        print(summary(args.memory_skills, args.memory_actors, mem))
    per_actor = (w["configmaps"] + w["actor status"] + w["actor other"]) / max(1, args.actors)
    print(f"writes per changed actor: {per_actor:.2f}")
    how = "one after another" if args.raw_threads == 1 else f"on {args.raw_threads} threads"
    print(f"raw writes: a plain client, {2 * args.actors} writes ({args.actors} ConfigMap "
          f"replaces + {args.actors} status patches) {how}: {f['raw_seconds']:.2f}s")
    for phase, took in (("cascade", f["cascade_seconds"]), ("raw writes", f["raw_seconds"])):
        print(cpu_line(phase, took, f["cpu"][phase], args.actors))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (at the end)")
    print(f"cascade/raw-write ratio: {f['cascade_seconds'] / f['raw_seconds']:.2f}")


def cpu_line(phase: str, took: float, used: dict[str, float], actors: int) -> str:
    """Each process's CPU over a phase: seconds, cores busy, ms a changed Actor."""
    parts = [f"{name} {cpu:.1f}s ({cpu / took:.2f} cores, {1000 * cpu / actors:.1f} ms/actor)"
             for name, cpu in used.items()]
    total = sum(used.values())
    return (f"CPU over the {phase} ({took:.1f}s): {'; '.join(parts) or 'not measured'}; "
            f"together {total:.1f}s ({total / took:.2f} of {os.cpu_count()} cores)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--actors", type=int, default=500)
    p.add_argument("--depth", type=int, default=10, help="include chain length below the tops")
    p.add_argument("--tops", type=int, default=4, help="top skills the actors are spread over")
    p.add_argument("--kubeconfig", help="run against a real cluster instead of the emulator")
    p.add_argument("--namespace", default="skillop-bench")
    p.add_argument("--keep", action="store_true", help="real cluster: keep the namespace")
    p.add_argument("--create-threads", type=int, default=1,
                   help="threads creating the Actors (one POST each)")
    p.add_argument("--raw-threads", type=int, default=1,
                   help="threads of the plain client's writes (16: the target's floor)")
    p.add_argument("--debounce", type=float, default=0.05, help="SKILLOP_DEBOUNCE_SECONDS")
    p.add_argument("--settle", type=float, default=2.5,
                   help="seconds to watch for late writes (and after a restart)")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--no-restart", action="store_true",
                   help="skip the operator restart over the unchanged cluster")
    p.add_argument("--apiserver-restart", action="store_true",
                   help="after the cascade, restart kube-apiserver under the operator "
                        "(under tests/realapi/controlplane.py only)")
    p.add_argument("--apiserver-window", type=float, default=60.0,
                   help="seconds to follow the operator after the API server is back")
    p.add_argument("--memory-skills", type=int, default=10_000)
    p.add_argument("--memory-actors", type=int, default=1_000)
    p.add_argument("--no-memory", action="store_true", help="skip the memory figure")
    p.add_argument("--memory-table", metavar="SKILLS:ACTORS,...",
                   help="only print peak memory at these catalog sizes (no cascade)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.memory_table:
        memory_table(args.memory_table)
        return 0
    figures = run_cascade(args)
    mem = None if args.no_memory else measure_memory(args.memory_skills, args.memory_actors)
    report(args, figures, mem)
    return 0


if __name__ == "__main__":
    sys.exit(main())
