"""The cascade benchmark's API: the cluster it writes, the operator it runs, and
the plain client's writes it compares the cascade with."""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import os
import signal
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchkit import operator_process
from cascade_graph import GROUP, VERSION, actor
from cascade_watch import HASH_ANNOTATION, MANAGED, EmulatorLog, WriteLog

from skillop.model.toolset import default_configmap_name

ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class Sample:
    status: dict[str, Any]
    data: dict[str, str]


class Cluster:
    def __init__(self, ns: str, *, client: Any = None) -> None:
        import kubernetes

        self.ns = ns
        self.core = kubernetes.client.CoreV1Api(client)
        self.custom = kubernetes.client.CustomObjectsApi(client)
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
def operator(kubeconfig: str | None = None) -> Iterator[OperatorProbe | None]:
    """The operator: in this process (emulated API; yields None), or ``skillop
    operator`` in its own process against ``kubeconfig``, as in a cluster (nothing
    else shares its GIL; yields what reads its memory and metrics)."""
    if kubeconfig is not None:
        with operator_process(kubeconfig) as proc:
            yield OperatorProbe(proc.pid)
        return
    sys.path.insert(0, str(ROOT / "tests"))
    import skillop.operator  # noqa: F401  (registers the handlers)
    from kube_emulator import run_operator

    with run_operator(module="skillop.operator", timeout=60):
        yield None


@dataclasses.dataclass(frozen=True)
class OperatorProbe:
    """The operator process, from outside: its peak memory and its own metrics."""

    pid: int

    def peak_rss_mib(self) -> float:
        """VmHWM: the most memory the process has held resident."""
        status = Path(f"/proc/{self.pid}/status").read_text()
        line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
        return int(line.split()[1]) / 1024

    def cpu_seconds(self) -> float:
        """User and system CPU time the process has used so far."""
        return cpu_seconds(self.pid)

    def objects_resolved(self, kind: str) -> float:
        """``skillop_reconcile_objects_total{kind}`` from its ``/metrics``."""
        environ = Path(f"/proc/{self.pid}/environ").read_bytes().split(b"\0")
        health = next(e for e in environ if e.startswith(b"SKILLOP_LIVENESS=")).split(b"=", 1)
        url = health[1].decode().rsplit("/", 1)[0] + "/metrics"
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                text = answer.read().decode()
        except OSError:  # its event loop busy with the batch: not done yet
            return 0.0
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(f'skillop_reconcile_objects_total{{kind="{kind}"}}'))


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process (all its threads) has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def control_plane_pids() -> dict[str, int]:
    """kube-apiserver's and etcd's pids, children of the control plane this runs
    under (``tests/realapi/controlplane.py``: its pid in ``CONTROLPLANE_PID``);
    none elsewhere. Other control planes on the machine are not its children."""
    parent = os.environ.get("CONTROLPLANE_PID")
    if parent is None:
        return {}
    out: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat.rsplit(")", 1)[1].split()
        if rest[1] == parent and comm in ("kube-apiserver", "etcd"):
            out[comm] = int(entry.name)
    return out


@dataclasses.dataclass
class CpuMeter:
    """CPU seconds of named processes between ``start`` and ``stop``. With
    ``BENCH_PHASE_SIGNAL`` set, both send SIGUSR2 to the ``operator`` process (the
    profiler of ``bench/sample_operator.py`` records between them)."""

    pids: dict[str, int]
    used: dict[str, float] = dataclasses.field(default_factory=dict)
    _at: dict[str, float] = dataclasses.field(default_factory=dict)

    def start(self) -> None:
        self._signal()
        self._at = {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def stop(self) -> dict[str, float]:
        self.used = {name: cpu_seconds(pid) - self._at[name] for name, pid in self.pids.items()}
        self._signal()
        return self.used

    def _signal(self) -> None:
        if os.environ.get("BENCH_PHASE_SIGNAL") and "operator" in self.pids:
            os.kill(self.pids["operator"], signal.SIGUSR2)


def api_requests() -> int | None:
    """Requests the API server has served (``apiserver_request_total``, every verb
    and code, from its ``/metrics``); None where it has none (the emulator)."""
    import kubernetes

    client = kubernetes.client.ApiClient()
    headers: dict[str, str] = {}
    client.update_params_for_auth(headers, [], ["BearerToken"], "/metrics", "GET", None)
    try:
        answer = client.call_api("GET", client.configuration.host + "/metrics",
                                 header_params=headers)
        answer.read()
    except Exception:  # no /metrics here
        return None
    if answer.status != 200:
        return None
    text = answer.data.decode()
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("apiserver_request_total{")))


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


def in_threads(threads: int, n: int, job: Callable[[Cluster, int], None], ns: str) -> None:
    """``job(cluster, i)`` for every ``i < n``, on ``threads`` threads, each with its
    own API client (its own connections)."""
    import kubernetes

    def worker(first: int) -> None:
        cluster = Cluster(ns, client=kubernetes.client.ApiClient())
        for i in range(first, n, threads):
            job(cluster, i)

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for done in [pool.submit(worker, t) for t in range(threads)]:
            done.result()


def create_all(ns: str, plural: str, bodies: list[dict[str, Any]], threads: int) -> None:
    """One POST per object, on ``threads`` threads (in order with one)."""
    in_threads(threads, len(bodies), lambda cluster, i: cluster.create(plural, bodies[i]), ns)


def raw_writes(ns: str, n: int, before: Sample, after: Sample, *, threads: int = 1,
               meter: CpuMeter | None = None) -> float:
    """Seconds a plain client takes for the cascade's writes, on ``threads`` threads.

    The same API, the same number of writes and the same bodies as the operator's
    cascade: per Actor, its ConfigMap replaced (old data -> new data) and its status
    patched, on ``n`` Actors and ConfigMaps prepared beforehand (not timed) in
    namespace ``ns`` while no operator runs. Responses are not turned into model
    objects (``_preload_content=False``), as a lean client would not. With 16
    threads it is the floor of the operator's 16 writes in flight.
    """
    Cluster(ns).ensure_namespace()

    def configmap(i: int, data: dict[str, str]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"raw-{i:05d}-tools", "namespace": ns,
                             "annotations": {HASH_ANNOTATION: "raw"}},
                "data": data}

    def prepare(raw: Cluster, i: int) -> None:
        raw.create("actors", actor(ns, f"raw-{i:05d}", ["top-0"]))
        raw.core.create_namespaced_config_map(ns, configmap(i, before.data),
                                              _preload_content=False)

    def write(raw: Cluster, i: int) -> None:
        raw.core.replace_namespaced_config_map(f"raw-{i:05d}-tools", ns,
                                               configmap(i, after.data), _preload_content=False)
        raw.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, "actors", f"raw-{i:05d}", {"status": after.status},
            _preload_content=False)

    in_threads(max(threads, 16), n, prepare, ns)
    if meter is not None:
        meter.start()
    start = time.monotonic()
    in_threads(threads, n, write, ns)
    took = time.monotonic() - start
    if meter is not None:
        meter.stop()
    return took
