"""Benchmark: unrelated ConfigMaps must not cost the operator memory.

What is measured, and why
-------------------------
The operator watches every ConfigMap of the namespaces it watches (a Skill may
reference any of them for its SKILL.md), and clusters hold many ConfigMaps that
have nothing to do with skillop, some of them large. The store keeps the data
only of ConfigMaps some Skill references, a digest of the ones skillop writes,
and only the name of the others.

Two measurements, each printed with its input size:

* ``store``: in this process, a ``Store`` holding a small catalog (Skills, an
  Actor, a referenced SKILL.md ConfigMap) receives ``--count`` unrelated
  ConfigMaps of ``--kib`` KiB each, one body at a time and dropped after
  ``upsert`` (as watch events arrive). Memory held by Python objects is traced
  (``tracemalloc``) before and after, after a garbage collection.
* ``operator`` (with ``--kubeconfig PATH``): ``skillop operator`` runs in its own
  process against that API (the out-of-process emulator, ``python
  tests/kube_emulator.py --crds crds --kubeconfig PATH``, or a real cluster);
  once its watches are up, the same ConfigMaps are created in namespace
  ``--namespace``, and the operator's resident memory (VmRSS from /proc) is
  read before, right after the last one is created, and after ``--settle``
  seconds (kopf drops an object's worker 5 s after its last event).

The last line is ``retained per unrelated ConfigMap: N bytes`` (the ``store``
measurement).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchkit import wait_until

from skillop.model.toolset import default_configmap_name

NS = "team-a"


def unrelated(i: int, kib: int, ns: str = NS) -> dict[str, Any]:
    """A ConfigMap no Skill references: mostly one value of ``kib`` KiB."""
    blob = (f"{i:08d}" * (kib * 128))[: kib * 1024]
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"unrelated-{i:05d}", "namespace": ns,
                         "uid": f"uid-cm-{i}", "resourceVersion": str(1000 + i)},
            "data": {"payload": blob, "owner": "someone else"}}


def catalog() -> list[dict[str, Any]]:
    skill_md = "---\nname: pdf\ndescription: reads PDF files\n---\n# PDF\n"
    group = "skillop.dev/v1alpha1"
    docs: list[dict[str, Any]] = [
        {"apiVersion": group, "kind": "Skill",
         "metadata": {"name": "pdf", "namespace": NS, "uid": "uid-s-pdf", "generation": 1},
         "spec": {"agentSkills": [{"configMapRef": {"name": "pdf-skill"}}]}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "pdf-skill", "namespace": NS, "uid": "uid-pdf"},
         "data": {"SKILL.md": skill_md}},
        {"apiVersion": group, "kind": "Actor",
         "metadata": {"name": "dev", "namespace": NS, "uid": "uid-a-dev", "generation": 1},
         "spec": {"skills": ["pdf"]}},
    ]
    return docs


def traced_mib() -> float:
    gc.collect()
    return tracemalloc.get_traced_memory()[0] / 2**20


def measure_store(count: int, kib: int) -> dict[str, float]:
    from skillop.operator.store import Store

    tracemalloc.start()
    store = Store()
    for doc in catalog():
        store.upsert(doc)
    before = traced_mib()
    start = time.monotonic()
    for i in range(count):
        store.upsert(unrelated(i, kib))  # the body is dropped right after
    seconds = time.monotonic() - start
    after = traced_mib()
    tracemalloc.stop()
    assert store.catalog.configmaps.get(_ref(NS, "pdf-skill")) is not None
    return {"before": before, "after": after, "seconds": seconds}


def _ref(ns: str, name: str) -> Any:
    from skillop.model.names import ObjectRef

    return ObjectRef(ns, name)


# -- the operator process -----------------------------------------------------------


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@contextlib.contextmanager
def api(kubeconfig: str) -> Iterator[Any]:
    import kubernetes

    os.environ["KUBECONFIG"] = os.path.abspath(kubeconfig)
    kubernetes.config.load_kube_config(config_file=kubeconfig)
    yield kubernetes.client.CoreV1Api(), kubernetes.client.CustomObjectsApi()


def measure_operator(args: argparse.Namespace) -> dict[str, float]:
    from benchkit import operator_process

    with api(args.kubeconfig) as (core, custom):
        with contextlib.suppress(Exception):
            core.create_namespace({"metadata": {"name": args.namespace}})
        for doc in catalog():
            doc["metadata"]["namespace"] = args.namespace
            for key in ("uid", "generation", "resourceVersion"):
                doc["metadata"].pop(key, None)
            if doc["kind"] == "ConfigMap":
                core.create_namespaced_config_map(args.namespace, doc)
            else:
                custom.create_namespaced_custom_object(
                    "skillop.dev", "v1alpha1", args.namespace, f"{doc['kind'].lower()}s", doc)
        with operator_process(args.kubeconfig) as proc:
            def ready() -> bool:
                cm = core.read_namespaced_config_map(default_configmap_name("dev"), args.namespace,
                                                     _preload_content=False)
                return cm.status == 200

            wait_until(lambda: _quietly(ready), 120, "the Actor's ConfigMap", interval=0.5)
            time.sleep(args.settle)
            before = rss_mib(proc.pid)
            start = time.monotonic()
            for i in range(args.count):
                body = unrelated(i, args.kib, args.namespace)
                for key in ("uid", "resourceVersion"):
                    body["metadata"].pop(key)
                core.create_namespaced_config_map(args.namespace, body, _preload_content=False)
            created = time.monotonic() - start
            peak = rss_mib(proc.pid)
            time.sleep(args.settle)
            after = rss_mib(proc.pid)
            return {"before": before, "created": peak, "after": after, "seconds": created}


def _quietly(predicate: Any) -> bool:
    try:
        return bool(predicate())
    except Exception:
        return False


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--count", type=int, default=5000)
    p.add_argument("--kib", type=int, default=100)
    p.add_argument("--kubeconfig", help="also measure `skillop operator` against this API")
    p.add_argument("--namespace", default="skillop-cm-bench")
    p.add_argument("--settle", type=float, default=10.0)
    args = p.parse_args(argv)
    total = args.count * args.kib / 1024
    print(f"input: {args.count} unrelated ConfigMaps of {args.kib} KiB "
          f"({total:.0f} MiB of data)")
    if args.kubeconfig:
        op = measure_operator(args)
        print(f"operator RSS (skillop operator, own process, VmRSS): before {op['before']:.0f}"
              f" MiB; right after the last create {op['created']:.0f} MiB; {args.settle:.0f}s"
              f" later {op['after']:.0f} MiB (created in {op['seconds']:.1f}s)")
    st = measure_store(args.count, args.kib)
    print(f"store (tracemalloc, after gc): before {st['before']:.2f} MiB, after "
          f"{st['after']:.2f} MiB (+{st['after'] - st['before']:.2f} MiB; "
          f"{st['seconds']:.2f}s of upserts)")
    per = (st["after"] - st["before"]) * 2**20 / max(1, args.count)
    print(f"retained per unrelated ConfigMap: {per:.0f} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
