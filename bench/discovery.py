"""Benchmark: live MCP discovery (API Semantics 9) at scale, on loopback.

What is measured, and why
-------------------------
Many Skills name the same few MCP servers; the operator must list each
distinct server once (one task per server URL, shared by every Skill naming
it), keep a session open on servers that announce ``tools.listChanged``, and
carry a change announced by one server to exactly the Actors depending on it,
fast: the reference setups poll every 60 s.

The script starts ``--servers`` real MCP servers (``tests/mcp/mcp_servers.py``,
the official SDK served by uvicorn on 127.0.0.1, ``listChanged`` announced),
each serving ``--tools`` tools with names unique to the server. It then builds,
in namespace ``--namespace`` of the emulated API (``tests/kube_emulator.py``):

* ``--skills`` Skills, Skill *k* naming server ``k mod servers`` and, one time
  in two, a second random server, so several Skills share each server;
* ``--actors`` Actors, each naming 1-3 random Skills.

Everything is drawn from ``random.Random(--seed)``. Without ``--kubeconfig``
the operator runs in-process (kopf's ``KopfRunner``). Either way it runs with
``SKILLOP_MCP_ALLOW=127.0.0.1`` and a 600 s default poll, so nothing here comes
from polling. Printed:

* ``discovery round``: from the first Skill create until every Actor is Ready
  with a ConfigMap whose ``tools.json`` holds exactly the tools of its servers:
  checked with one LIST of Actors and one of ConfigMaps once the API has been
  quiet for ``--quiet`` seconds (polling those LISTs, tens of MB, would starve
  the in-process operator), timed to the last Actor/ConfigMap write; and the
  discovery-only part: until every server has answered at least one
  ``tools/list`` (counted server-side);
* ``connections``: MCP sessions the servers saw opened (``initialize``
  requests) during the round, against the number of distinct servers (the
  target is one each). The operator opens one session per server: it lists,
  and stays open as the watch when the server announces ``listChanged``;
* ``list_changed -> configmaps``: ``--changes`` times (default 12, different servers), one
  server's tools change (``set_tools`` adds a tool and sends
  ``notifications/tools/list_changed``), timed until every Actor depending on
  that server has a ConfigMap carrying the change. The time is taken from the
  emulator's write log (the moment the API answered the last dependent
  ConfigMap write that changed it), then confirmed with one LIST of ConfigMaps
  (every dependent ConfigMap holds the new tool, no other one does). A LIST
  poll would cost more than it measures here: 500 ConfigMaps of a few hundred
  tools each are tens of MB of JSON per LIST. The API writes during each
  change are counted by resource (ConfigMaps, Actor status, Skill status,
  Events; exact, from the emulator's request log).

With ``--kubeconfig F`` the API server runs in its own process (``python
tests/kube_emulator.py --crds crds --kubeconfig F``, or the real-API tier's
kube-apiserver: ``tests/realapi/controlplane.py --kubeconfig F --crds crds --
python bench/discovery.py --kubeconfig F``) and so does the operator
(``skillop operator``, as in a cluster): the 50 MCP servers and the watches
timing the run, here, no longer share its GIL. Times and write counts then come
from watches on the namespace (only writes that changed an object show).
Also printed: the MCP sessions opened during the changes (none: each change is
a notification on the session the round opened).

Printed at the end: p50 and p95 (nearest rank) of the change latencies, and as
the last line ``list_changed to configmap: X.XXXs`` (the p50).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import math
import os
import random
import statistics
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from benchkit import operator_process, wait_until

from skillop.model.toolset import CONFIGMAP_SUFFIX, TOOLS_KEY, default_configmap_name

ROOT = Path(__file__).resolve().parents[1]
GROUP, VERSION = "skillop.dev", "v1alpha1"
MANAGED = "app.kubernetes.io/managed-by=skillop"


# -- the object graph ------------------------------------------------------------------


def tool_names(server: int, count: int) -> list[str]:
    return [f"s{server:03d}_t{j:04d}" for j in range(count)]


def plan_graph(args: argparse.Namespace) -> tuple[dict[str, list[int]], dict[str, list[str]]]:
    """Skill -> server indexes, Actor -> skill names; deterministic for a seed."""
    rng = random.Random(args.seed)
    skills: dict[str, list[int]] = {}
    for k in range(args.skills):
        servers = [k % args.servers]
        if args.servers > 1 and rng.random() < 0.5:
            servers.append(rng.choice([s for s in range(args.servers) if s != servers[0]]))
        skills[f"skill-{k:04d}"] = servers
    names = list(skills)
    actors = {f"actor-{i:05d}": sorted(rng.sample(names, rng.randint(1, min(3, len(names)))))
              for i in range(args.actors)}
    return skills, actors


def skill_body(ns: str, name: str, urls: list[tuple[int, str]]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Skill",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"description": f"skill {name}",
                     "mcpServers": [{"name": f"srv{i:03d}", "url": url} for i, url in urls]}}


def actor_body(ns: str, name: str, skills: list[str]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Actor",
            "metadata": {"name": name, "namespace": ns}, "spec": {"skills": skills}}


# -- the cluster -------------------------------------------------------------------------


class Cluster:
    def __init__(self, core: Any, custom: Any, ns: str, log: WriteLog) -> None:
        self.ns = ns
        self.core = core
        self.custom = custom
        self.log = log

    def create(self, plural: str, body: dict[str, Any]) -> None:
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, plural, body)

    @staticmethod
    def _list(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        """A LIST as plain JSON: the client's model classes would cost more than the API."""
        response = fn(*args, _preload_content=False, **kwargs)
        return list(json.loads(response.data)["items"])

    def ready_actors(self) -> set[str]:
        items = self._list(self.custom.list_namespaced_custom_object, GROUP, VERSION, self.ns,
                           "actors")
        return {item["metadata"]["name"] for item in items
                if any(c.get("type") == "Ready" and c.get("status") == "True"
                       for c in (item.get("status") or {}).get("conditions") or [])}

    def configmap_tools(self) -> dict[str, set[str]]:
        """Actor name -> tool names in its ConfigMap's tools.json."""
        items = self._list(self.core.list_namespaced_config_map, self.ns, label_selector=MANAGED)
        out = {}
        for cm in items:
            name = cm["metadata"]["name"].removesuffix(CONFIGMAP_SUFFIX)
            doc = json.loads((cm.get("data") or {}).get(TOOLS_KEY) or "{}")
            out[name] = {t["name"] for t in doc.get("tools", [])}
        return out


@contextlib.contextmanager
def servers(count: int, tools: int) -> Iterator[list[Any]]:
    sys.path.insert(0, str(ROOT / "tests" / "mcp"))
    from mcp_servers import ServerHandle, make_tool

    handles: list[Any] = []
    try:
        for i in range(count):
            handles.append(ServerHandle(tools=[make_tool(n) for n in tool_names(i, tools)],
                                        list_changed=True).start())
        yield handles
    finally:
        for handle in handles:
            handle.stop()


class WriteLog(Protocol):
    """When dependent ConfigMaps were written, and how many writes of each kind."""

    exact: bool

    def mark(self) -> int: ...
    def quiet_for(self) -> float: ...
    def last_write(self, since: int) -> float: ...
    def configmaps_with(self, token: str, names: set[str], since: int) -> dict[str, float]: ...
    def counts(self, since: int) -> Counter[str]: ...


class EmulatorLog:
    """The in-process emulator's request log: exact, no-op writes included."""

    exact = True

    def __init__(self, emulator: Any) -> None:
        self.emulator = emulator
        self._seen: dict[str, float] = {}

    def mark(self) -> int:
        self._seen = {}
        return int(self.emulator.write_mark())

    def quiet_for(self) -> float:
        return float(self.emulator.seconds_since_last_write())

    def last_write(self, since: int) -> float:
        return max(w.at for w in self.emulator.filter_writes(since=since)
                   if w.resource in ("actors", "configmaps"))

    def configmaps_with(self, token: str, names: set[str], since: int) -> dict[str, float]:
        for w in self.emulator.filter_writes("configmaps", since=since, changed=True):
            self._seen.setdefault(w.name, w.at)
        return {n: t for n, t in self._seen.items() if n in names}

    def counts(self, since: int) -> Counter[str]:
        return Counter(_category(w.resource, w.subresource)
                       for w in self.emulator.filter_writes(since=since, include_events=True))


class WatchLog:
    """An API server in another process: what watches on the namespace see.

    Only writes that changed an object are seen; a ConfigMap counts as carrying
    a change from the first watch event whose ``tools.json`` holds the token.
    """

    exact = False

    def __init__(self, core: Any, custom: Any, ns: str) -> None:
        self._lock = threading.Lock()
        self._events: list[tuple[float, str, str]] = []  # (when, category, configmap name)
        self._token = ""
        self._carrying: dict[str, float] = {}
        self._last = time.monotonic()
        sources: list[tuple[str, Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = [
            ("configmaps", core.list_namespaced_config_map, (ns,),
             {"label_selector": MANAGED}),
            ("events", core.list_namespaced_event, (ns,), {}),
            ("actors", custom.list_namespaced_custom_object, (GROUP, VERSION, ns, "actors"), {}),
            ("skills", custom.list_namespaced_custom_object, (GROUP, VERSION, ns, "skills"), {}),
        ]
        for source in sources:
            threading.Thread(target=self._watch, args=source, daemon=True).start()

    def _watch(self, category: str, fn: Callable[..., Any], args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> None:
        import kubernetes

        while True:
            watch = kubernetes.watch.Watch()
            try:
                for event in watch.stream(fn, *args, **kwargs, _preload_content=False,
                                          timeout_seconds=3600):
                    self._record(category, event)
            except Exception:  # the API went away at the end of the run
                time.sleep(0.5)

    def _record(self, category: str, event: dict[str, Any]) -> None:
        now = time.monotonic()
        if event.get("type") not in ("ADDED", "MODIFIED"):
            return
        obj = event["raw_object"]
        name = obj["metadata"]["name"]
        kind = category
        if category in ("actors", "skills"):
            kind = f"{category[:-1]} status"  # the operator writes only statuses
        with self._lock:
            self._events.append((now, kind, name))
            self._last = now
            if category == "configmaps" and self._token and name not in self._carrying \
                    and self._token in ((obj.get("data") or {}).get(TOOLS_KEY) or ""):
                self._carrying[name] = now

    def mark(self) -> int:
        with self._lock:
            self._carrying = {}
            return len(self._events)

    def quiet_for(self) -> float:
        return time.monotonic() - self._last

    def last_write(self, since: int) -> float:
        with self._lock:
            return max(t for t, kind, _ in self._events[since:]
                       if kind in ("configmaps", "actor status"))

    def configmaps_with(self, token: str, names: set[str], since: int) -> dict[str, float]:
        with self._lock:
            self._token = token
            return {n: t for n, t in self._carrying.items() if n in names}

    def counts(self, since: int) -> Counter[str]:
        with self._lock:
            return Counter(kind for _, kind, _ in self._events[since:])


@contextlib.contextmanager
def api(args: argparse.Namespace) -> Iterator[Cluster]:
    """The in-process emulator, or (``--kubeconfig``) an API server in its own process."""
    sys.path.insert(0, str(ROOT / "tests"))
    if args.kubeconfig is not None:
        import kubernetes

        path = os.path.abspath(args.kubeconfig)
        os.environ["KUBECONFIG"] = path
        # The client reads $KUBECONFIG when first imported; kopf's login uses that.
        kubernetes.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION = path
        kubernetes.config.load_kube_config(config_file=path)
        core, custom = kubernetes.client.CoreV1Api(), kubernetes.client.CustomObjectsApi()
        core.create_namespace({"metadata": {"name": args.namespace}})
        yield Cluster(core, custom, args.namespace, WatchLog(core, custom, args.namespace))
        return
    from kube_emulator import run_emulator  # it keeps kmock's request history short

    with run_emulator(sorted((ROOT / "crds").glob("*.yaml"))) as handle:
        handle.core.create_namespace({"metadata": {"name": args.namespace}})
        yield Cluster(handle.core, handle.custom, args.namespace, EmulatorLog(handle.emulator))


@contextlib.contextmanager
def operator(kubeconfig: str | None) -> Iterator[None]:
    """In this process (emulated API), or ``skillop operator`` in its own process
    against ``kubeconfig``: the MCP servers and the watches that time the run, here,
    then no longer share the operator's GIL."""
    if kubeconfig is not None:
        with operator_process(kubeconfig):
            yield
        return
    import skillop.operator  # noqa: F401  (registers the handlers; reads the environment)
    from kube_emulator import run_operator

    with run_operator(module="skillop.operator", timeout=60):
        yield


def discovery_instance() -> Any:
    """The in-process operator's Discovery (kept in kopf's memo; found through the GC)."""
    from skillop.operator.discovery import Discovery

    return next((o for o in gc.get_objects() if isinstance(o, Discovery)), None)


def _category(resource_: str, subresource: str | None) -> str:
    if resource_ in ("actors", "skills"):
        return f"{resource_[:-1]} status" if subresource == "status" else f"{resource_[:-1]} other"
    return resource_


# -- the run ------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    # Read once by skillop.operator.handlers at import (OperatorConfig.from_env).
    os.environ["SKILLOP_MCP_ALLOW"] = "127.0.0.1"
    os.environ.setdefault("SKILLOP_MCP_REFRESH_SECONDS", "600")
    os.environ.setdefault("SKILLOP_DEBOUNCE_SECONDS", str(args.debounce))
    os.environ.setdefault("SKILLOP_LOG_LEVEL", "WARNING")
    skills, actors = plan_graph(args)
    f: dict[str, Any] = {"skills": skills, "actors": actors}
    with servers(args.servers, args.tools) as handles, api(args) as cluster:
        urls = [h.url for h in handles]
        expected = {a: {t for s in sk for i in skills[s] for t in tool_names(i, args.tools)}
                    for a, sk in actors.items()}
        with operator(args.kubeconfig):
            mark = cluster.log.mark()
            start = time.monotonic()
            for name, idx in skills.items():
                cluster.create("skills", skill_body(args.namespace, name,
                                                    [(i, urls[i]) for i in idx]))
            for name, sk in actors.items():
                cluster.create("actors", actor_body(args.namespace, name, sk))
            f["create_seconds"] = time.monotonic() - start
            used = sorted({i for idx in skills.values() for i in idx})
            f["distinct_servers"] = len(used)
            f["listed_seconds"] = f["create_seconds"] + wait_until(
                lambda: all(handles[i].count("tools/list") for i in used), args.timeout,
                "every server listed", interval=0.01)

            def all_done() -> bool:
                # The full check (two big LISTs) only once the API has gone quiet: a
                # LIST poll would compete for the CPU with the operator it measures.
                if cluster.log.quiet_for() < args.quiet:
                    return False
                ready, cms = cluster.ready_actors(), cluster.configmap_tools()
                return len(ready) == len(actors) and all(cms.get(a) == t
                                                        for a, t in expected.items())

            wait_until(all_done, args.timeout, "every Actor Ready with its servers' tools")
            # Done when the API answered the last write of an Actor or its ConfigMap.
            f["round_seconds"] = cluster.log.last_write(mark) - start
            time.sleep(args.settle)
            f["initialize"] = sum(h.count("initialize") for h in handles)
            f["tools_list"] = sum(h.count("tools/list") for h in handles)
            disc = discovery_instance()
            f["one_shot"] = disc.connections if disc is not None else None

            rng = random.Random(args.seed + 1)
            f["changes"] = []
            for round_, server in enumerate(rng.sample(used, min(args.changes, len(used)))):
                f["changes"].append(change(args, cluster, handles[server], server, round_,
                                           skills, actors))
            # A session lives through list_changed: the changes open none.
            f["initialize_during_changes"] = (sum(h.count("initialize") for h in handles)
                                              - f["initialize"])
    return f


def change(args: argparse.Namespace, cluster: Cluster, srv: Any, server: int, round_: int,
           skills: dict[str, list[int]], actors: dict[str, list[str]]) -> dict[str, Any]:
    from mcp_servers import make_tool

    users = {s for s, idx in skills.items() if server in idx}
    dependents = {a for a, sk in actors.items() if users & set(sk)}
    wanted = {default_configmap_name(a) for a in dependents}
    new = f"s{server:03d}_added_{round_}"
    log = cluster.log
    wait_until(lambda: srv._sessions, 10, "a watch session on the server", interval=0.01)
    mark = log.mark()
    token = f'"name":"{new}"'
    log.configmaps_with(token, wanted, mark)
    start = time.monotonic()
    srv.set_tools([*srv.tools, make_tool(new)])
    written: dict[str, float] = {}

    def all_written() -> bool:
        written.update(log.configmaps_with(token, wanted, mark))
        return wanted <= set(written)

    wait_until(all_written, args.timeout, f"the ConfigMaps of server {server}'s actors",
               interval=0.005)
    latency = max(written[n] for n in wanted) - start
    time.sleep(args.settle)  # late or repeated writes count too
    cms = cluster.configmap_tools()
    wrong = sorted(a for a in actors if (new in cms.get(a, set())) != (a in dependents))
    if wrong:
        raise AssertionError(f"ConfigMaps not reflecting the change: {wrong[:5]}")
    writes = log.counts(mark)
    stray = sorted(a for a in actors if a not in dependents and new in cms.get(a, set()))
    return {"server": server, "skills": len(users), "dependents": len(dependents),
            "seconds": latency, "writes": writes, "stray": stray}


# -- report ----------------------------------------------------------------------------------


def report(args: argparse.Namespace, f: dict[str, Any]) -> None:
    print_ = functools.partial(print, file=sys.__stdout__, flush=True)
    per_skill = Counter(len(v) for v in f["skills"].values())
    per_actor = Counter(len(v) for v in f["actors"].values())
    share = Counter(i for v in f["skills"].values() for i in v)
    where = (f"the API server of {args.kubeconfig}, out of process; the operator in its own "
             f"process (`skillop operator`); changes seen by watches"
             if args.kubeconfig else "emulated, in process with the operator (exact request log)")
    print_(f"api: {where}; MCP servers: real (official SDK, streamable HTTP, loopback), "
          f"listChanged announced; default poll 600 s; seed {args.seed}")
    print_(f"servers: {args.servers} x {args.tools} tools; skills: {args.skills} "
          f"({per_skill[1]} naming 1 server, {per_skill[2]} naming 2; "
          f"{max(share.values())} skills at most on one server); actors: {args.actors} "
          f"(skills each: {dict(sorted(per_actor.items()))})")
    tools = [len({i for s in sk for i in f["skills"][s]}) * args.tools
             for sk in f["actors"].values()]
    print_(f"tools per actor: mean {statistics.mean(tools):.0f}, max {max(tools)}")
    print_(f"objects created in {f['create_seconds']:.2f}s; every server listed "
          f"(server-side tools/list) after {f['listed_seconds']:.2f}s")
    print_(f"discovery round: {f['round_seconds']:.2f}s (first Skill create -> every Actor "
          f"Ready, ConfigMap tools.json = its servers' tools)")
    print_(f"connections: {f['initialize']} for {f['distinct_servers']} distinct servers "
          f"(MCP sessions opened = initialize requests seen by the servers, whole round; "
          + (f"the operator counted {f['one_shot']}; " if f["one_shot"] is not None else "")
          + "each lists, then stays open as the watch; "
          f"tools/list calls: {f['tools_list']})")
    for c in f["changes"]:
        w = c["writes"]
        print_(f"  change on server {c['server']} ({c['skills']} skills, {c['dependents']} "
              f"dependent actors): {c['seconds']:.3f}s; writes: {w['configmaps']} configmaps, "
              f"{w['actor status']} actor status, {w['actor other']} other actor, "
              f"{w['skill status']} skill status, {w['events']} events"
              + (f"; stray configmaps {c['stray']}" if c["stray"] else ""))
    print_(f"MCP sessions opened during the changes: {f['initialize_during_changes']} "
           f"(each change is a notification on a session open since the round)")
    latencies = sorted(c["seconds"] for c in f["changes"])
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    deps = statistics.median(c["dependents"] for c in f["changes"])
    print_(f"list_changed -> configmaps over {len(latencies)} changes ({deps:.0f} dependent "
          f"actors median): p50 {p50:.3f}s (target < 0.5 s), p95 {p95:.3f}s (target < 1 s), "
          f"max {latencies[-1]:.3f}s")
    print_(f"list_changed to configmap: {p50:.3f}s")


def percentile(sorted_values: list[float], pct: float) -> float:
    """The nearest-rank percentile: the smallest value with ``pct``% at or below it."""
    rank = max(1, math.ceil(pct / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--servers", type=int, default=50)
    p.add_argument("--tools", type=int, default=100, help="tools per server")
    p.add_argument("--skills", type=int, default=100)
    p.add_argument("--actors", type=int, default=500)
    p.add_argument("--changes", type=int, default=12,
                   help="list_changed rounds, each on a different server")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--namespace", default="skillop-bench-discovery")
    p.add_argument("--debounce", type=float, default=0.05, help="SKILLOP_DEBOUNCE_SECONDS")
    p.add_argument("--settle", type=float, default=2.0, help="seconds to let writes go quiet")
    p.add_argument("--quiet", type=float, default=1.0,
                   help="seconds without API writes before the round is checked")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--kubeconfig",
                   help="an API server in its own process (e.g. python tests/kube_emulator.py"
                        " --crds crds --kubeconfig F) instead of the in-process emulator")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    try:
        figures = run(args)
    except BaseException:
        # kopf's runner swaps sys.stdout/sys.stderr while the operator runs: say
        # what failed where it is seen.
        traceback.print_exc(file=sys.__stderr__)
        sys.__stderr__.flush()
        os._exit(1)
    report(args, figures)
    if args.kubeconfig is not None:
        # Against an API server in another process, kopf's runner thread can stay
        # blocked in a watch after the operator stopped, and the interpreter would
        # wait for it forever: the figures are printed, end here.
        sys.stdout.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
