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
  another, on Actors and ConfigMaps of a namespace of their own.

The last line is ``cascade/raw-write ratio: X.XX``: how many times as long as the
plain client the operator's cascade took (target: at most 1.5).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from benchkit import operator_process, wait_until
from memory import measure_memory, memory_table, summary

from skillop.model.toolset import default_configmap_name

ROOT = Path(__file__).resolve().parents[1]
GROUP, VERSION = "skillop.dev", "v1alpha1"
HASH_ANNOTATION = "skillop.dev/tools-hash"
MANAGED = "app.kubernetes.io/managed-by=skillop"


# -- the object graph ------------------------------------------------------------


def skill(ns: str, name: str, *, includes: list[str] = (), tool: str,  # type: ignore[assignment]
          description: str, builtins: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    spec: dict[str, Any] = {
        "description": f"skill {name}",
        "anonymousTools": [{
            "name": tool, "description": description,
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
            "capabilities": {"readOnly": True},
        }],
    }
    if includes:
        spec["includes"] = [{"skill": s} for s in includes]
    if builtins:
        spec["builtins"] = list(builtins)
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Skill",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def actor(ns: str, name: str, skills: list[str]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Actor",
            "metadata": {"name": name, "namespace": ns}, "spec": {"skills": skills}}


def cascade_objects(ns: str, actors: int, depth: int, tops: int,
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    skills = [skill(ns, "base", tool="probe", description="probe v1",
                    builtins=["git_operations"])]
    previous = "base"
    for k in range(1, depth + 1):
        skills.append(skill(ns, f"chain-{k}", includes=[previous], tool=f"step_{k}",
                            description=f"chain step {k}"))
        previous = f"chain-{k}"
    for t in range(tops):
        skills.append(skill(ns, f"top-{t}", includes=[previous], tool=f"top_{t}",
                            description=f"top skill {t}"))
    return skills, [actor(ns, f"actor-{i:05d}", [f"top-{i % tops}"]) for i in range(actors)]


# -- write accounting --------------------------------------------------------------


class WriteLog(Protocol):
    exact: bool

    def mark(self) -> int: ...

    def counts(self, since: int) -> Counter[str]: ...

    def close(self) -> None: ...


def _category(resource_: str, subresource: str | None) -> str:
    if resource_ == "configmaps":
        return "configmaps"
    if resource_ in ("actors", "skills"):
        return f"{resource_[:-1]} status" if subresource == "status" else f"{resource_[:-1]} other"
    return resource_


class EmulatorLog:
    """Exact: every mutating request the emulated API received."""

    exact = True

    def __init__(self, emulator: Any) -> None:
        self.emulator = emulator

    def mark(self) -> int:
        return int(self.emulator.write_mark())

    def counts(self, since: int) -> Counter[str]:
        return Counter(_category(w.resource, w.subresource)
                       for w in self.emulator.filter_writes(since=since, include_events=True))

    def close(self) -> None:
        pass


class WatchLog:
    """A real cluster: changes seen by watches on the benchmark's namespace."""

    exact = False

    def __init__(self, ns: str) -> None:
        import kubernetes

        self.ns = ns
        self.records: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        core, custom = kubernetes.client.CoreV1Api(), kubernetes.client.CustomObjectsApi()
        self._threads: list[threading.Thread] = []
        sources: list[tuple[str, Callable[..., Any], tuple[Any, ...]]] = [
            ("configmaps", core.list_namespaced_config_map, (ns,)),
            ("events", core.list_namespaced_event, (ns,)),
            ("actors", custom.list_namespaced_custom_object, (GROUP, VERSION, ns, "actors")),
            ("skills", custom.list_namespaced_custom_object, (GROUP, VERSION, ns, "skills")),
        ]
        for name, fn, args in sources:
            thread = threading.Thread(target=self._watch, args=(name, fn, args), daemon=True)
            thread.start()
            self._threads.append(thread)
        time.sleep(1.0)  # let the watches start

    def _watch(self, name: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        import kubernetes

        seen: dict[str, dict[str, Any]] = {}
        version: dict[str, str] = {}  # resume where the last stream ended: no change lost
        while not self._stop.is_set():
            watch = kubernetes.watch.Watch()
            try:
                for event in watch.stream(fn, *args, timeout_seconds=5, deserialize=False,
                                          **version):
                    obj = event["object"]
                    if event["type"] == "ERROR":  # 410 Gone: list afresh
                        version.clear()
                        break
                    version["resource_version"] = obj["metadata"]["resourceVersion"]
                    uid = obj["metadata"]["uid"]
                    before, seen[uid] = seen.get(uid), obj
                    if event["type"] == "ADDED" and before is not None:
                        continue  # a re-listed object after a watch restart
                    category = name
                    if name in ("actors", "skills") and before is not None:
                        status_changed = before.get("status") != obj.get("status")
                        category = _category(name, "status" if status_changed else None)
                    with self._lock:
                        self.records.append(category)
                    if self._stop.is_set():
                        break
            except Exception:  # a dropped watch is restarted
                time.sleep(0.2)

    def mark(self) -> int:
        time.sleep(1.0)  # let in-flight events arrive before the mark
        with self._lock:
            return len(self.records)

    def counts(self, since: int) -> Counter[str]:
        time.sleep(1.0)
        with self._lock:
            return Counter(self.records[since:])

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:  # each stream ends within its 5 s timeout
            thread.join(10)


class Progress:
    """Each Actor's status hash and Ready, and each ConfigMap's hash, as watches report them.

    Watches, not LIST polling: a poll of every Actor's status several times a second
    costs the API server (and so the operator's writes) more the more Actors there are.
    """

    def __init__(self, ns: str) -> None:
        import kubernetes

        self.ns = ns
        self.actors: dict[str, tuple[str | None, bool]] = {}
        self.configmaps: dict[str, str | None] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._synced = {"actors": threading.Event(), "configmaps": threading.Event()}
        client = kubernetes.client.ApiClient()
        core, custom = kubernetes.client.CoreV1Api(client), kubernetes.client.CustomObjectsApi(
            client)
        sources: list[tuple[str, Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = [
            ("actors", custom.list_namespaced_custom_object, (GROUP, VERSION, ns, "actors"), {}),
            ("configmaps", core.list_namespaced_config_map, (ns,), {"label_selector": MANAGED}),
        ]
        self._threads = [threading.Thread(target=self._follow, args=source, daemon=True)
                         for source in sources]
        for thread in self._threads:
            thread.start()
        for event in self._synced.values():
            event.wait(30)

    def _follow(self, name: str, fn: Callable[..., Any], args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> None:
        import kubernetes

        version = ""
        while not self._stop.is_set():
            if not version:  # (re)list, then watch from the list's version
                listing = json.loads(fn(*args, _preload_content=False, **kwargs).data)
                with self._lock:
                    for obj in listing["items"]:
                        self._record(name, "ADDED", obj)
                version = listing["metadata"]["resourceVersion"]
                self._synced[name].set()
            try:
                for event in kubernetes.watch.Watch().stream(
                        fn, *args, resource_version=version, timeout_seconds=5,
                        deserialize=False, **kwargs):
                    obj = event["object"]  # deserialize=False: the JSON as sent
                    if event["type"] == "ERROR":
                        raise RuntimeError(obj.get("message"))
                    version = obj["metadata"].get("resourceVersion", version)
                    with self._lock:
                        self._record(name, event["type"], obj)
                    if self._stop.is_set():
                        return
            except Exception:  # 410 Gone or a dropped stream: list again
                version = ""
                time.sleep(0.1)

    def _record(self, name: str, type_: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        if name == "actors":
            status = obj.get("status") or {}
            ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in status.get("conditions") or [])
            table: dict[str, Any] = self.actors
            value: Any = (status.get("toolsHash"), ready)
        else:
            table = self.configmaps
            value = (meta.get("annotations") or {}).get(HASH_ANNOTATION)
        if type_ == "DELETED":
            table.pop(meta["name"], None)
        else:
            table[meta["name"]] = value

    def actor_hashes(self) -> dict[str, tuple[str | None, bool]]:
        with self._lock:
            return dict(self.actors)

    def configmap_hashes(self) -> dict[str, str | None]:
        with self._lock:
            return dict(self.configmaps)

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:  # each stream ends within its 5 s timeout
            thread.join(10)


# -- the cluster ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Sample:
    status: dict[str, Any]
    data: dict[str, str]


class Cluster:
    def __init__(self, ns: str) -> None:
        import kubernetes

        self.ns = ns
        self.core = kubernetes.client.CoreV1Api()
        self.custom = kubernetes.client.CustomObjectsApi()
        self.api_exception = kubernetes.client.exceptions.ApiException

    def ensure_namespace(self) -> None:
        try:
            self.core.create_namespace({"metadata": {"name": self.ns}})
        except self.api_exception as err:
            if err.status != 409:
                raise

    def create(self, plural: str, body: dict[str, Any]) -> None:
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, plural, body)

    def actor_hashes(self) -> dict[str, tuple[str | None, bool]]:
        items = self._list(self.custom.list_namespaced_custom_object, GROUP, VERSION, self.ns,
                           "actors")
        out = {}
        for item in items:
            status = item.get("status") or {}
            ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in status.get("conditions") or [])
            out[item["metadata"]["name"]] = (status.get("toolsHash"), ready)
        return out

    def configmap_hashes(self) -> dict[str, str | None]:
        items = self._list(self.core.list_namespaced_config_map, self.ns,
                           label_selector=MANAGED)
        return {cm["metadata"]["name"]: (cm["metadata"].get("annotations") or {}).get(
            HASH_ANNOTATION) for cm in items}

    @staticmethod
    def _list(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        """A LIST as plain JSON: the client's model classes would cost more than the API."""
        response = fn(*args, _preload_content=False, **kwargs)
        return list(json.loads(response.data)["items"])

    def sample(self, name: str = "actor-00000") -> Sample:
        """One Actor's status and ConfigMap data: the bodies the raw client writes."""
        body = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, "actors", name)
        cm = json.loads(self.core.read_namespaced_config_map(
            default_configmap_name(name), self.ns, _preload_content=False).data)
        return Sample(dict(body.get("status") or {}), dict(cm.get("data") or {}))

    def set_probe_description(self, description: str) -> None:
        body = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, "skills", "base")
        tools = body["spec"]["anonymousTools"]
        tools[0]["description"] = description
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.ns, "skills", "base",
                                                   {"spec": {"anonymousTools": tools}})

    def delete_namespace(self) -> None:
        with contextlib.suppress(self.api_exception):
            self.core.delete_namespace(self.ns)


@contextlib.contextmanager
def operator(kubeconfig: str | None = None) -> Iterator[None]:
    """The operator: in this process (emulated API), or ``skillop operator`` in its own
    process against ``kubeconfig``, as in a cluster (nothing else shares its GIL)."""
    if kubeconfig is not None:
        with operator_process(kubeconfig):
            yield
        return
    sys.path.insert(0, str(ROOT / "tests"))
    import skillop.operator  # noqa: F401  (registers the handlers)
    from kube_emulator import run_operator

    with run_operator(module="skillop.operator", timeout=60):
        yield


@contextlib.contextmanager
def environment(kubeconfig: str | None) -> Iterator[WriteLog | None]:
    """The API to talk to: the emulator (yields its log) or a real cluster (None)."""
    if kubeconfig is not None:
        import kubernetes

        os.environ["KUBECONFIG"] = os.path.abspath(kubeconfig)
        # The client reads $KUBECONFIG when first imported; kopf's login uses that.
        kubernetes.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION = os.path.abspath(kubeconfig)
        kubernetes.config.load_kube_config(config_file=kubeconfig)
        yield None
        return
    sys.path.insert(0, str(ROOT / "tests"))
    from kube_emulator import run_emulator

    with run_emulator(sorted((ROOT / "crds").glob("*.yaml"))) as handle:
        yield EmulatorLog(handle.emulator)


# -- the run ---------------------------------------------------------------------------


def run_cascade(args: argparse.Namespace) -> dict[str, Any]:
    os.environ.setdefault("SKILLOP_DEBOUNCE_SECONDS", str(args.debounce))
    os.environ.setdefault("SKILLOP_LOG_LEVEL", "WARNING")
    figures: dict[str, Any] = {}
    with environment(args.kubeconfig) as emulator_log:
        cluster = Cluster(args.namespace)
        cluster.ensure_namespace()
        log: WriteLog = emulator_log if emulator_log is not None else WatchLog(args.namespace)
        progress = Progress(args.namespace)
        skills, actors = cascade_objects(args.namespace, args.actors, args.depth, args.tops)
        try:
            with operator(args.kubeconfig):
                start = time.monotonic()
                for body in skills:
                    cluster.create("skills", body)
                for body in actors:
                    cluster.create("actors", body)
                figures["create_seconds"] = time.monotonic() - start

                def all_ready() -> bool:
                    hashes, cms = progress.actor_hashes(), progress.configmap_hashes()
                    return len(hashes) == args.actors and all(
                        ready and h and cms.get(default_configmap_name(name)) == h
                        for name, (h, ready) in hashes.items())

                wait_until(all_ready, args.timeout, "every Actor Ready with its ConfigMap",
                           interval=0.02)
                figures["initial_seconds"] = time.monotonic() - start
                old = {h for h, _ in progress.actor_hashes().values()}
                before = cluster.sample()
                time.sleep(args.settle)  # let the initial reconcile go quiet

                mark = log.mark()
                start = time.monotonic()
                cluster.set_probe_description("probe v2: now with a changed description")

                def all_new() -> bool:
                    hashes, cms = progress.actor_hashes(), progress.configmap_hashes()
                    return len(hashes) == args.actors and all(
                        h and h not in old and cms.get(default_configmap_name(name)) == h
                        for name, (h, _) in hashes.items())

                figures["cascade_seconds"] = wait_until(
                    all_new, args.timeout, "every Actor carrying the new hash", interval=0.02)
                time.sleep(args.settle)  # late or repeated writes count too
                figures["cascade_writes"] = log.counts(mark)
                after = cluster.sample()

            mark = log.mark()
            with operator(args.kubeconfig):
                if isinstance(log, EmulatorLog):
                    wait_until(lambda: log.emulator.active_watches("actors") > 0, 30,
                               "the restarted operator watching Actors")
                time.sleep(args.settle)
            figures["restart_writes"] = log.counts(mark)
            figures["exact"] = log.exact
            figures["raw_seconds"] = raw_writes(
                f"{args.namespace}-raw", args.actors, before, after)
        finally:
            progress.close()
            log.close()
            if args.kubeconfig is not None and not args.keep:
                cluster.delete_namespace()
                Cluster(f"{args.namespace}-raw").delete_namespace()
    return figures


def raw_writes(ns: str, n: int, before: Sample, after: Sample) -> float:
    """Seconds a plain client takes for the cascade's writes, one after another.

    The same API, the same number of writes and the same bodies as the operator's
    cascade: per Actor, its ConfigMap replaced (old data -> new data) and its status
    patched, on ``n`` Actors and ConfigMaps prepared beforehand (not timed) in
    namespace ``ns`` while no operator runs. Responses are not turned into model
    objects (``_preload_content=False``), as a lean client would not.
    """
    raw = Cluster(ns)
    raw.ensure_namespace()

    def configmap(i: int, data: dict[str, str]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"raw-{i:05d}-tools", "namespace": ns,
                             "annotations": {HASH_ANNOTATION: "raw"}},
                "data": data}

    for i in range(n):
        raw.create("actors", actor(ns, f"raw-{i:05d}", ["top-0"]))
        raw.core.create_namespaced_config_map(ns, configmap(i, before.data),
                                              _preload_content=False)
    start = time.monotonic()
    for i in range(n):
        raw.core.replace_namespaced_config_map(f"raw-{i:05d}-tools", ns,
                                               configmap(i, after.data), _preload_content=False)
        raw.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, "actors", f"raw-{i:05d}", {"status": after.status},
            _preload_content=False)
    return time.monotonic() - start


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
    print(f"restart writes: {sum(f['restart_writes'].values())} "
          f"({dict(f['restart_writes']) or 'none'})")
    if mem is not None:
        print(summary(args.memory_skills, args.memory_actors, mem))
    per_actor = (w["configmaps"] + w["actor status"] + w["actor other"]) / max(1, args.actors)
    print(f"writes per changed actor: {per_actor:.2f}")
    print(f"raw writes: a plain client, {2 * args.actors} writes ({args.actors} ConfigMap "
          f"replaces + {args.actors} status patches) one after another: "
          f"{f['raw_seconds']:.2f}s")
    print(f"cascade/raw-write ratio: {f['cascade_seconds'] / f['raw_seconds']:.2f}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--actors", type=int, default=500)
    p.add_argument("--depth", type=int, default=10, help="include chain length below the tops")
    p.add_argument("--tops", type=int, default=4, help="top skills the actors are spread over")
    p.add_argument("--kubeconfig", help="run against a real cluster instead of the emulator")
    p.add_argument("--namespace", default="skillop-bench")
    p.add_argument("--keep", action="store_true", help="real cluster: keep the namespace")
    p.add_argument("--debounce", type=float, default=0.05, help="SKILLOP_DEBOUNCE_SECONDS")
    p.add_argument("--settle", type=float, default=2.5,
                   help="seconds to watch for late writes (and after a restart)")
    p.add_argument("--timeout", type=float, default=600.0)
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
