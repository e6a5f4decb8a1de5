"""What the cascade benchmark follows: the API writes (from the emulator's log or
from watches) and each Actor's and ConfigMap's hash (from watches)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from cascade_graph import GROUP, VERSION

HASH_ANNOTATION = "skillop.dev/tools-hash"
MANAGED = "app.kubernetes.io/managed-by=skillop"


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
            try:
                if not version:  # (re)list, then watch from the list's version
                    listing = json.loads(fn(*args, _preload_content=False, **kwargs).data)
                    with self._lock:
                        for obj in listing["items"]:
                            self._record(name, "ADDED", obj)
                    version = listing["metadata"]["resourceVersion"]
                    self._synced[name].set()
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
            except Exception:  # 410 Gone, a dropped stream, the API server away: list again
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
