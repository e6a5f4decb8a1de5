"""The real-API tier's helpers: the cluster seen as admin, and the operator as a process.

The operator runs as ``skillop operator`` in a child process with its own
``KUBECONFIG``, as it runs in a pod: its own identity (so the audit log tells
its requests apart), its own settings, and a restart is a real restart. It is
handed over once its watches are open and it holds the Lease (leader election),
so that "it wrote nothing" is never measured on a standby.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from controlplane import OPERATOR_USER, ControlPlane

from clusterkit import Cluster, wait_for

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
KUBECTL = str(BIN / "kubectl")
SKILLOP = str(BIN / "skillop")
#: What the operator lists and watches before it reconciles anything.
WATCHED = ("tools", "skills", "actors", "configmaps", "namespaces")
OPERATOR_ENV = {
    "SKILLOP_DEBOUNCE_SECONDS": "0.02",
    "SKILLOP_MCP_ALLOW": "127.0.0.1",
    "SKILLOP_MCP_REFRESH_SECONDS": "600",
    "SKILLOP_LOG_LEVEL": "INFO",
}


class RealCluster(Cluster):
    """The control plane, seen as an admin, with kubectl and the audit log at hand."""

    def __init__(self, plane: ControlPlane) -> None:
        from kubernetes import config

        super().__init__(config.new_client_from_config(config_file=str(plane.admin_kubeconfig)))
        self.plane = plane

    def kubectl(self, *args: str, stdin: str | None = None,
                kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
        config = str(kubeconfig or self.plane.admin_kubeconfig)
        return subprocess.run([KUBECTL, f"--kubeconfig={config}", *args], input=stdin,
                              capture_output=True, text=True, timeout=60, check=False)

    def namespace(self, name: str) -> None:
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def delete_namespaces(self, *names: str) -> None:
        """Start deleting (the namespace controller finishes it in the background)."""
        from kubernetes.client.exceptions import ApiException

        for name in names:
            with contextlib.suppress(ApiException):
                self.core.delete_namespace(name)


@dataclasses.dataclass
class OperatorProcess:
    popen: subprocess.Popen[bytes]
    log: Path
    started: str  # audit stageTimestamp before the start
    identity: str  # its Lease identity

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def _watching(plane: ControlPlane, user: str, since: str) -> bool:
    watched = {e["objectRef"]["resource"] for e in plane.audit()
               if e.get("verb") == "watch" and e.get("user", {}).get("username") == user
               and e.get("stageTimestamp", "") > since and "objectRef" in e}
    return set(WATCHED) <= watched


def audit_now() -> str:
    """A timestamp comparable with the audit log's ``stageTimestamp`` (RFC 3339, UTC, µs)."""
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@contextlib.contextmanager
def operator_process(plane: ControlPlane, *, kubeconfig: Path | None = None,
                     user: str = OPERATOR_USER, env: Mapping[str, str] | None = None,
                     name: str = "operator", timeout: float = 60.0, lead: bool = True,
                     ) -> Iterator[OperatorProcess]:
    """``skillop operator`` until the context exits.

    Yields once its watches are open and, with ``lead`` (and leader election on),
    once it holds the Lease; a standby started beside a leader passes ``lead=False``.
    """
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SKILLOP_")}
    environ.update(OPERATOR_ENV)
    environ.update(env or {})
    environ["KUBECONFIG"] = str(kubeconfig or plane.operator_kubeconfig)
    environ.setdefault("SKILLOP_LEASE_IDENTITY", f"{name}-{secrets.token_hex(3)}")
    log = plane.workdir / f"{name}-{time.monotonic_ns()}.log"
    started = audit_now()
    with log.open("wb") as out:
        popen = subprocess.Popen([SKILLOP, "operator"], stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env=environ, start_new_session=True)
    proc = OperatorProcess(popen, log, started, environ["SKILLOP_LEASE_IDENTITY"])

    def ready() -> bool:
        return _watching(plane, user, started) and (
            not lead or environ.get("SKILLOP_LEADER_ELECTION", "true") == "false"
            or lease_holder(plane, environ) == proc.identity)

    try:
        wait_for(lambda: popen.poll() is not None or ready(), timeout=timeout, interval=0.1,
                 message=f"{name} watching {WATCHED} and leading")
        if popen.poll() is not None:
            raise RuntimeError(f"{name} exited with {popen.returncode}:\n{proc.output()[-3000:]}")
        yield proc
    finally:
        stop(popen)


def lease_holder(plane: ControlPlane, environ: Mapping[str, str]) -> str | None:
    """Who holds the operator's Lease (settings as the process reads them)."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    api = client.CoordinationV1Api(
        config.new_client_from_config(config_file=str(plane.admin_kubeconfig)))
    try:
        lease = api.read_namespaced_lease(environ.get("SKILLOP_LEASE_NAME") or "skillop",
                                          environ.get("SKILLOP_LEASE_NAMESPACE") or "default")
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    return lease.spec.holder_identity if lease.spec else None


def writes_by(plane: ControlPlane, identity: str, since: str, *,
              leases: bool = True) -> list[dict[str, Any]]:
    """Writes since ``since`` by the operator replica of Lease ``identity`` (its
    user agent names it: replicas of one ServiceAccount share the user)."""
    return [w for w in plane.writes(since=since, leases=leases)
            if f"({identity})" in w.get("userAgent", "")]


def stop(popen: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    if popen.poll() is None:
        popen.send_signal(signal.SIGTERM)  # kopf stops gracefully on SIGTERM
        try:
            popen.wait(timeout)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(timeout)


def strip_nulls(value: Any) -> Any:
    """A merge patch's content as it reads once applied: null means absent."""
    if isinstance(value, dict):
        return {k: strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [strip_nulls(v) for v in value]
    return value


def status_writes(plane: ControlPlane, *, user: str = OPERATOR_USER,
                  ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(status sent, status the server kept) for every status write of ``user`` so far."""
    out = []
    for event in plane.writes(user=user):
        ref = event.get("objectRef", {})
        if ref.get("subresource") != "status" or "requestObject" not in event:
            continue
        sent = (event["requestObject"] or {}).get("status")
        kept = (event.get("responseObject") or {}).get("status")
        if sent is not None and event.get("responseStatus", {}).get("code") == 200:
            out.append((sent, kept or {}))
    return out


def wait_quiet(plane: ControlPlane, *, user: str = OPERATOR_USER, quiet: float = 1.0,
               timeout: float = 30.0) -> None:
    """Until ``user`` has written nothing for ``quiet`` seconds."""
    def last_write() -> str:
        writes = plane.writes(user=user)
        return writes[-1]["stageTimestamp"] if writes else ""

    deadline = time.monotonic() + timeout
    seen, since = last_write(), time.monotonic()
    while time.monotonic() - since < quiet:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{user} still writing after {timeout}s")
        time.sleep(0.1)
        now = last_write()
        if now != seen:
            seen, since = now, time.monotonic()


def assert_statuses_kept(plane: ControlPlane, *, user: str = OPERATOR_USER) -> int:
    """Every status ``user`` sent was accepted and kept whole; returns how many."""
    # Refused by the schema (400, 422) or by RBAC (403). A 404 or 409 means the
    # object was deleted or changed meanwhile (a loaded machine lets a test's
    # teardown overtake a write), which the operator handles by reading again.
    # Also handled: the approvals webhook refusing a Pending or Expired mark on a
    # request a person decided meanwhile ("a decision is final"; the operator reads
    # the decided object next, operator/approval_keeper.py).
    rejected = [(w["objectRef"].get("name"), w["responseStatus"])
                for w in plane.writes(user=user)
                if w.get("objectRef", {}).get("subresource") == "status"
                and w.get("responseStatus", {}).get("code", 0) in (400, 403, 422)
                and not (w["objectRef"].get("resource") == "toolcallapprovals"
                         and "a decision is final" in str(
                             w.get("responseStatus", {}).get("message", "")))]
    assert rejected == [], rejected
    writes = status_writes(plane, user=user)
    for sent, kept in writes:
        assert kept == strip_nulls(sent)
    return len(writes)


# -- the operator's webhooks, called by the API server ------------------------------


@dataclasses.dataclass(frozen=True)
class WebhookServing:
    """The operator's webhook server on loopback: a self-signed certificate for
    127.0.0.1 (also the caBundle the API server trusts) and the settings serving it."""

    cert: bytes
    port: int
    env: dict[str, str]


def webhook_serving(folder: Path) -> WebhookServing:
    """A certificate and key written into ``folder``, and a free port."""
    from controlplane import free_port

    from skillop.operator import webhook

    cert, key = webhook.self_signed_certificate(["127.0.0.1"])
    (folder / "tls.crt").write_bytes(cert)
    (folder / "tls.key").write_bytes(key)
    port = free_port()
    return WebhookServing(cert, port, {
        "SKILLOP_WEBHOOK_PORT": str(port), "SKILLOP_WEBHOOK_CERT": str(folder / "tls.crt"),
        "SKILLOP_WEBHOOK_KEY": str(folder / "tls.key")})


def chart_objects(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chart rendered with ``values`` (the test is skipped where Helm cannot run)."""
    import pytest

    import chartkit

    try:
        chart = chartkit.load()
    except Exception as err:  # helm-python-sdk missing or unusable on this platform
        pytest.skip(f"helm_python cannot render the chart: {err}")
    return chartkit.objects(chart, dict(values))


def chart_webhook(kind: str, name: str, values: Mapping[str, Any],
                  serving: WebhookServing) -> dict[str, Any]:
    """The chart's webhook configuration ``kind`` named ``<release>-<name>`` (the
    chart has several), reaching ``serving`` by url."""
    import chartkit

    (found,) = [d for d in chart_objects(values) if d["kind"] == kind
                and d["metadata"]["name"] == f"{chartkit.RELEASE}-{name}"]
    return by_url(found, serving.port, serving.cert)


def by_url(configuration: dict[str, Any], port: int, ca: bytes) -> dict[str, Any]:
    """A chart's webhook configuration reaching the operator on loopback by url (and
    ``ca`` as caBundle) instead of its Service: nothing routes Services here."""
    import base64

    for hook in configuration["webhooks"]:
        service = hook["clientConfig"].pop("service")
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{service['path']}",
                                "caBundle": base64.b64encode(ca).decode()}
    return configuration


@contextlib.contextmanager
def registered(real: RealCluster, configuration: dict[str, Any]) -> Iterator[None]:
    """A Mutating- or ValidatingWebhookConfiguration, registered while in the block."""
    from kubernetes import client

    api = client.AdmissionregistrationV1Api(real.api_client)
    name = configuration["metadata"]["name"]
    if configuration["kind"] == "MutatingWebhookConfiguration":
        api.create_mutating_webhook_configuration(configuration)
        try:
            yield
        finally:
            api.delete_mutating_webhook_configuration(name)
        return
    api.create_validating_webhook_configuration(configuration)
    try:
        yield
    finally:
        api.delete_validating_webhook_configuration(name)


POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


@contextlib.contextmanager
def chart_policies(real: RealCluster, values: Mapping[str, Any]) -> Iterator[list[str]]:
    """The chart's ValidatingAdmissionPolicies and their bindings (rendered with
    ``values``), created while in the block; yields the policies' names."""
    import json

    docs = [d for d in chart_objects(values) if d["kind"] in POLICY_KINDS]
    made = real.kubectl("create", "-f", "-", stdin=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": docs}))
    assert made.returncode == 0, made.stderr
    try:
        yield [d["metadata"]["name"] for d in docs if d["kind"] == POLICY_KINDS[0]]
    finally:
        for doc in docs:
            real.kubectl("delete", doc["kind"], doc["metadata"]["name"], "--wait=false")


@contextlib.contextmanager
def webhook_operator(real: RealCluster, folder: Path, *, kind: str, webhook: str,
                     values: Mapping[str, Any], env: Mapping[str, str],
                     name: str, also: tuple[tuple[str, str], ...] = ()
                     ) -> Iterator[OperatorProcess]:
    """The operator (process ``name``, settings ``env``) serving its webhooks with a
    certificate in ``folder``, and the chart's configuration ``kind`` named
    ``<release>-<webhook>`` (rendered with ``values``) registered to call it, and
    those ``also`` names as (kind, webhook)."""
    serving = webhook_serving(folder)
    configurations = [chart_webhook(k, w, values, serving) for k, w in ((kind, webhook), *also)]
    with operator_process(real.plane, env={**env, **serving.env}, name=name) as proc, \
            contextlib.ExitStack() as stack:
        for configuration in configurations:
            stack.enter_context(registered(real, configuration))
        yield proc
