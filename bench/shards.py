"""Benchmark: a cascade with one installation vs two shards, on a real API server.

Builds ``--actors`` Actors in each of two namespaces, every one including the
shared Skill ``base`` of a third namespace (a cross-namespace include), starts
either one ``skillop operator`` (unsharded) or two (selectors
``skillop.dev/shard=a`` and ``=b``, one namespace each, their own Leases), waits
until every Actor is Ready, then adds a tool to ``base`` and prints the time
until every Actor's ``status.toolsHash`` changed, each process's writes, and
what bounds it: the CPU time each process of the machine's share (kube-apiserver,
etcd, each operator) used over the cascade, as a fraction of its wall time (1.0
is one core busy throughout), beside the load average.

Runs etcd and kube-apiserver from ``KUBEBUILDER_ASSETS`` (the real-API tier's
control plane). Both operators share the machine's cores with the API server:
on a 2-core machine the figure says little about a cluster where each shard has
its own node.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "realapi"), str(ROOT / "tests"), str(ROOT / "tests" / "unit")]

from controlplane import install_crds, start_control_plane  # noqa: E402
from realkit import RealCluster, audit_now, operator_process, writes_by  # noqa: E402
from skillkit import actor, anon, namespace, skill  # noqa: E402

from clusterkit import wait_for  # noqa: E402

LABEL = "skillop.dev/shard"


def _hashes(real: RealCluster, ns: str) -> dict[str, str | None]:
    return {a["metadata"]["name"]: (a.get("status") or {}).get("toolsHash")
            for a in real.list("Actor", ns)}


def _build(real: RealCluster, tag: str, actors: int) -> tuple[str, list[str]]:
    base_ns, spread = f"bench-{tag}-base", [f"bench-{tag}-a", f"bench-{tag}-b"]
    real.apply(namespace(base_ns, **{LABEL: "a"}))
    for ns, shard in zip(spread, ("a", "b"), strict=True):
        real.apply(namespace(ns, **{LABEL: shard}))
    real.apply(skill("base", base_ns, sharing={"from": "All"}, anonymousTools=[anon("probe")]))
    for ns in spread:
        for i in range(actors):
            real.apply(actor(f"actor-{i:05d}", ns, skills=[f"{base_ns}/base"]))
    return base_ns, spread


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(real: RealCluster, *, shards: int, actors: int, concurrency: int | None = None) -> None:
    tag = f"s{shards}"
    base_ns, spread = _build(real, tag, actors)
    envs = ([{"SKILLOP_LEASE_NAME": "bench-one", "SKILLOP_LEASE_IDENTITY": "bench-one"}]
            if shards == 1 else
            [{"SKILLOP_SHARD_SELECTOR": f"{LABEL}={s}", "SKILLOP_LEASE_NAME": f"bench-{s}",
              "SKILLOP_LEASE_IDENTITY": f"bench-{s}",
              "SKILLOP_SHARD_CLUSTER_OWNER": str(s == "a").lower()} for s in ("a", "b")])
    if concurrency is not None:  # writes in flight per installation (16 by default)
        envs = [{**env, "SKILLOP_WRITE_CONCURRENCY": str(concurrency)} for env in envs]
    with contextlib.ExitStack() as stack:
        pids = {p.name: p.popen.pid for p in real.plane.processes
                if p.name in ("kube-apiserver", "etcd")}
        for env in envs:
            pids[env["SKILLOP_LEASE_IDENTITY"]] = stack.enter_context(operator_process(
                real.plane, env=env, name=env["SKILLOP_LEASE_IDENTITY"], timeout=120)).popen.pid
        wait_for(lambda: all(h for ns in spread for h in _hashes(real, ns).values())
                 and sum(len(_hashes(real, ns)) for ns in spread) == 2 * actors,
                 timeout=600, interval=1.0, message="every Actor Ready")
        before = {ns: _hashes(real, ns) for ns in spread}
        since = audit_now()
        load = os.getloadavg()[0]
        cpu = {name: cpu_seconds(pid) for name, pid in pids.items()}
        sent = time.monotonic()
        real.patch_spec("Skill", base_ns, "base", {"sharing": {"from": "All"},
                                                   "anonymousTools": [anon("probe"),
                                                                      anon("probe2")]})
        wait_for(lambda: all(h != before[ns][name] for ns in spread
                             for name, h in _hashes(real, ns).items()),
                 timeout=600, interval=0.05, message="every Actor's new hash")
        took = time.monotonic() - sent
        used = {name: cpu_seconds(pid) - cpu[name] for name, pid in pids.items()}
        time.sleep(2.0)
        print(f"{shards} shard(s), {2 * actors} Actors over 2 namespaces, write concurrency"
              f" {concurrency or 16} each: cascade {took:.2f}s"
              f" (load average {load:.1f} at the PATCH, {os.getloadavg()[0]:.1f} after)")
        print("  CPU over the cascade, cores busy (s of CPU / s of cascade): " + ", ".join(
            f"{name} {seconds / took:.2f}" for name, seconds in used.items())
            + f"; all {sum(used.values()) / took:.2f} of {os.cpu_count()}")
        for env in envs:
            who = env["SKILLOP_LEASE_IDENTITY"]
            counts = Counter(w["objectRef"].get("resource", "") + (
                "/" + w["objectRef"]["subresource"] if w["objectRef"].get("subresource")
                else "") for w in writes_by(real.plane, who, since, leases=False))
            print(f"  {who}: {dict(sorted(counts.items()))}")
    real.delete_namespaces(base_ns, *spread)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actors", type=int, default=250, help="Actors per namespace")
    parser.add_argument("--shards", default="1,2", help="the installations to compare")
    parser.add_argument("--write-concurrency", type=int,
                        help="SKILLOP_WRITE_CONCURRENCY of each installation (16)")
    args = parser.parse_args()
    with start_control_plane() as plane:
        install_crds(plane, ROOT / "crds")
        real = RealCluster(plane)
        for shards in (int(n) for n in args.shards.split(",")):
            run(real, shards=shards, actors=args.actors, concurrency=args.write_concurrency)
    return 0


if __name__ == "__main__":
    sys.exit(main())
