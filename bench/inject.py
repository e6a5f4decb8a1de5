"""What sidecar injection adds to a pod create, against a real API server.

Starts the real-API tier's control plane (``tests/realapi/controlplane.py``:
etcd, kube-apiserver, kube-controller-manager; ``KUBEBUILDER_ASSETS``), the
operator as its own process with injection on, and the chart's
MutatingWebhookConfiguration with a ``url`` clientConfig. Then creates
``--pods`` pods one after the other, alternating unlabelled ones (never sent
to the webhook) and labelled ones (injected: an Actor reaching ``--servers``
MCP servers, each with its own Secret), and prints the latency of each kind
and the difference: what a pod create costs with injection on. Also times the
pure injector alone (``resolve.inject``), without HTTP.

    python bench/inject.py [--pods 200] [--servers 8]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "tests", ROOT / "tests" / "realapi", ROOT / "bench"):
    sys.path.insert(0, str(_path))

from benchkit import operator_process, wait_until  # noqa: E402
from controlplane import free_port, install_crds, start_control_plane  # noqa: E402

import chartkit  # noqa: E402

NS = "bench-inject"


def catalog(servers: int) -> list[dict[str, Any]]:
    skill = {"apiVersion": "skillop.dev/v1alpha1", "kind": "Skill",
             "metadata": {"name": "tools", "namespace": NS},
             "spec": {"mcpServers": [
                 {"name": f"s{i}", "url": f"http://s{i}.tools.svc/mcp",
                  "headersFrom": {"secretRef": {"name": f"auth-{i}"}},
                  "tools": [{"name": f"t{i}", "description": "a tool"}]}
                 for i in range(servers)]}}
    actor = {"apiVersion": "skillop.dev/v1alpha1", "kind": "Actor",
             "metadata": {"name": "agent", "namespace": NS}, "spec": {"skills": ["tools"]}}
    return [skill, actor]


def pod(name: str, labelled: bool) -> dict[str, Any]:
    labels = {"skillop.dev/actor": "agent"} if labelled else {"app": "plain"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"containers": [{"name": "agent", "image": "example/agent:1"}]}}


def configuration(port: int, ca: bytes) -> dict[str, Any]:
    (mwc,) = [d for d in chartkit.objects(chartkit.load(), {"namespaces": [NS]})
              if d["kind"] == "MutatingWebhookConfiguration"
              and d["metadata"]["name"].endswith("-inject")]
    for hook in mwc["webhooks"]:
        path = hook["clientConfig"].pop("service")["path"]
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}",
                                "caBundle": base64.b64encode(ca).decode()}
    return dict(mwc)


def timed_creates(core: Any, count: int) -> tuple[list[float], list[float]]:
    plain: list[float] = []
    injected: list[float] = []
    for i in range(count):
        labelled = i % 2 == 1
        start = time.perf_counter()
        made = core.create_namespaced_pod(NS, pod(f"p{i}", labelled))
        (injected if labelled else plain).append((time.perf_counter() - start) * 1000)
        assert bool(made.spec.init_containers) == labelled
    return plain, injected


def pure_injector(servers: int, rounds: int = 2000) -> float:
    """Microseconds per ``inject`` of one labelled pod (target resolved once)."""
    from skillop.resolve.inject import Credentials, Target, inject

    target = Target("agent", "agent-tools", Credentials(
        secrets=tuple(f"auth-{i}" for i in range(servers))))
    start = time.perf_counter()
    for _ in range(rounds):
        inject(pod("p", True), target, namespace=NS)
    return (time.perf_counter() - start) / rounds * 1e6


def summary(name: str, ms: list[float]) -> str:
    ordered = sorted(ms)
    p95 = ordered[int(len(ordered) * 0.95) - 1]
    return (f"{name:<24} n={len(ms):<4} p50 {statistics.median(ms):6.2f} ms"
            f"  p95 {p95:6.2f} ms  mean {statistics.fmean(ms):6.2f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=200, help="pod creates (half labelled)")
    parser.add_argument("--servers", type=int, default=8,
                        help="MCP servers (and Secrets) in the Actor's set")
    args = parser.parse_args()
    from kubernetes import client, config

    from skillop.operator import webhook

    with start_control_plane() as plane, tempfile.TemporaryDirectory() as tmp:
        install_crds(plane, ROOT / "crds")
        api = config.new_client_from_config(config_file=str(plane.admin_kubeconfig))
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": NS}})
        custom = client.CustomObjectsApi(api)
        for doc in catalog(args.servers):
            plural = doc["kind"].lower() + "s"
            custom.create_namespaced_custom_object("skillop.dev", "v1alpha1", NS, plural, doc)
        cert, key = webhook.self_signed_certificate(["127.0.0.1"])
        Path(tmp, "tls.crt").write_bytes(cert)
        Path(tmp, "tls.key").write_bytes(key)
        port = free_port()
        os.environ.update({
            "SKILLOP_INJECTION": "true", "SKILLOP_WEBHOOK_PORT": str(port),
            "SKILLOP_WEBHOOK_CERT": str(Path(tmp, "tls.crt")),
            "SKILLOP_WEBHOOK_KEY": str(Path(tmp, "tls.key")),
            "SKILLOP_MCP_DISCOVERY": "false", "SKILLOP_LOG_LEVEL": "WARNING"})
        with operator_process(str(plane.operator_kubeconfig)):
            client.AdmissionregistrationV1Api(api).create_mutating_webhook_configuration(
                configuration(port, cert))

            def live() -> bool:
                try:
                    made = core.create_namespaced_pod(NS, pod("warm", True), dry_run="All")
                except client.ApiException:
                    return False  # the namespace's ServiceAccount is not there yet
                return bool(made.spec.init_containers) and len(
                    [v for v in made.spec.volumes if v.secret]) == args.servers

            wait_until(live, 60, "the webhook injects the Actor's Secrets", 0.2)
            timed_creates(core, 20)  # warm-up: connections, the resolver's memo
            for i in range(20):
                core.delete_namespaced_pod(f"p{i}", NS, grace_period_seconds=0)
            plain, injected = timed_creates(core, args.pods)
    added = statistics.median(injected) - statistics.median(plain)
    print(f"pod create latency, real API server, {args.pods} creates, one Actor with"
          f" {args.servers} MCP servers (one Secret each):")
    print(summary("unlabelled (not sent)", plain))
    print(summary("labelled (injected)", injected))
    print(f"added by injection: p50 {added:+.2f} ms"
          f"  (the pure injector alone: {pure_injector(args.servers):.0f} us a pod)")
    print(json.dumps({"pods": args.pods, "servers": args.servers,
                      "plain_p50_ms": round(statistics.median(plain), 3),
                      "injected_p50_ms": round(statistics.median(injected), 3),
                      "added_p50_ms": round(added, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
