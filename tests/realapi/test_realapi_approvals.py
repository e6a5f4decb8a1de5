"""Approval by a person, on a real API server: the gateway asks, a person decides.

As in an Actor's pod: the gateway runs with a ServiceAccount token bound only to
the chart's gateway ClusterRole (RoleBinding in the namespace), reads the
ToolSet the operator wrote, and reaches the API server by KUBERNETES_SERVICE_HOST
and _PORT with the projected token and CA in its api directory. The operator
serves the webhook, registered from the chart's MutatingWebhookConfiguration
(url instead of Service). People are ServiceAccounts too: alice holds the chart's
approver role, "both" holds the gateway and approver roles (the case only the
webhook can refuse). Decisions are made with ``kubectl skillop approve|deny``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from controlplane import free_port
from gatewaykit import GatewayProcess, Volume, agent
from mcp_servers import ServerHandle, make_tool
from realkit import (
    BIN,
    KUBECTL,
    SKILLOP,
    RealCluster,
    chart_objects,
    chart_policies,
    webhook_operator,
)
from skillkit import actor, skill

import chartkit
from clusterkit import wait_for
from skillop.model.toolset import default_configmap_name

pytestmark = pytest.mark.realapi

NS = "realapi-approvals"
#: A namespace the approvals webhook does not cover (its namespaceSelector is NS):
#: only the chart's ValidatingAdmissionPolicy stands between a user and a forgery.
BARE = "realapi-approvals-bare"
GATEWAY_SA, APPROVER_SA, BOTH_SA = "agent", "alice", "both"
ROLE_NAMES = {f"{chartkit.RELEASE}-gateway", f"{chartkit.RELEASE}-approver",
              f"{chartkit.RELEASE}-approver-rules"}


def user(sa: str, namespace: str = NS) -> str:
    return f"system:serviceaccount:{namespace}:{sa}"


def roles() -> list[dict[str, Any]]:
    return [d for d in chart_objects({}) if d["kind"] == "ClusterRole"
            and d["metadata"]["name"] in ROLE_NAMES]


def binding(sa: str, role: str, namespace: str = NS) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": f"{sa}-{role}", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": f"{chartkit.RELEASE}-{role}"},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}]}


def token(real: RealCluster, sa: str, namespace: str = NS) -> str:
    from kubernetes import client

    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600))
    return str(real.core.create_namespaced_service_account_token(sa, namespace, request
                                                                 ).status.token)


class Stage:
    """Everything the tests share: cluster, upstream, people's kubeconfigs, gateways."""

    def __init__(self, real: RealCluster, upstream: ServerHandle, root: Path) -> None:
        self.real, self.upstream, self.root = real, upstream, root
        self.kubeconfigs: dict[str, Path] = {}
        self.tokens: dict[str, str] = {}
        self.metrics = ""  # the operator's /metrics
        self.policies: list[str] = []  # the chart's ValidatingAdmissionPolicies

    def person(self, sa: str) -> None:
        self.tokens[sa] = token(self.real, sa)
        self.kubeconfigs[sa] = self.real.plane.kubeconfig_for_token(self.tokens[sa], sa)

    def kubectl_skillop(self, sa: str, *args: str) -> subprocess.CompletedProcess[str]:
        """``kubectl skillop ...`` as ``sa`` (kubectl finds the plugin on PATH)."""
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfigs[sa]),
               "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        return subprocess.run([KUBECTL, "skillop", *args], capture_output=True, text=True,
                              env=env, timeout=60, check=False)

    @contextlib.contextmanager
    def gateway(self, actor_name: str, sa: str = GATEWAY_SA, *,
                api_port: int | None = None) -> Iterator[GatewayProcess]:
        """The Actor's gateway as injection runs it: its ToolSet, its api directory
        (``api_port``: the API server's address on this port, a ``Relay``'s)."""
        name = default_configmap_name(actor_name)
        cm = wait_for(lambda: self.real.configmap(NS, name), timeout=30)
        tools = Volume(self.root / name)
        tools.write(cm.data)
        api = self.root / f"{actor_name}-api"
        api.mkdir(exist_ok=True)
        (api / "token").write_text(self.tokens[sa])
        (api / "ca.crt").write_bytes(self.real.plane.ca)
        (api / "namespace").write_text(NS)
        secrets = self.root / f"{actor_name}-secrets"
        secrets.mkdir(exist_ok=True)
        host_port = self.real.plane.url.removeprefix("https://")
        env = {"KUBERNETES_SERVICE_HOST": host_port.rsplit(":", 1)[0],
               "KUBERNETES_SERVICE_PORT": str(api_port or host_port.rsplit(":", 1)[1]),
               "SKILLOP_POD_NAME": f"{actor_name}-0", "SKILLOP_POD_NAMESPACE": NS}
        with GatewayProcess(tools.root, secrets, "--api-dir", str(api), env=env) as gw:
            yield gw

    def requests(self) -> list[dict[str, Any]]:
        return self.real.list("ToolCallApproval", NS)


@pytest.fixture(scope="module")
def stage(real: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    from kubernetes import client

    folder = tmp_path_factory.mktemp("approvals")
    real.namespace(NS)
    rbac = client.RbacAuthorizationV1Api(real.api_client)
    metrics_port = free_port()
    env = {"SKILLOP_LIVENESS": f"http://127.0.0.1:{metrics_port}/healthz",
           "SKILLOP_WEBHOOK": "true"}
    tools = [make_tool("danger", input_schema={"type": "object", "properties": {
        "target": {"type": "string"}, "payload": {"type": "string"}}}), make_tool("safe")]
    # The chart's policy for the whole module: the webhook's answers must pass it too.
    with ServerHandle(tools=tools) as upstream, webhook_operator(
            real, folder, kind="MutatingWebhookConfiguration", webhook="approvals",
            values={"webhook": {"enabled": True}, "namespaces": [NS]}, env=env,
            name="approvals-operator"), chart_policies(real, {}) as policies:
        for role in roles():
            rbac.create_cluster_role(role)
        try:
            for sa in (GATEWAY_SA, APPROVER_SA, BOTH_SA):
                real.core.create_namespaced_service_account(NS, {"metadata": {"name": sa}})
            for sa, granted in ((GATEWAY_SA, "gateway"), (APPROVER_SA, "approver"),
                                (BOTH_SA, "gateway"), (BOTH_SA, "approver")):
                rbac.create_namespaced_role_binding(NS, binding(sa, granted))
            # Discovered tools, the one that needs a person marked by an override.
            server = {"name": "ops", "url": upstream.url, "overrides": {
                "danger": {"capabilities": {"requiresApproval": True}}}}
            real.apply(skill("ops", NS, mcpServers=[server]))
            real.apply(actor("agent", NS, skills=["ops"]))
            real.apply(actor("hasty", NS, skills=["ops"], approval={"timeoutSeconds": 2}))
            for name in ("agent", "hasty"):
                real.wait_ready("Actor", NS, name, timeout=30)
            found = Stage(real, upstream, folder)
            found.policies = policies
            found.metrics = f"http://127.0.0.1:{metrics_port}/metrics"
            for sa in (GATEWAY_SA, APPROVER_SA, BOTH_SA):
                found.person(sa)
            # The API server reads the webhook configuration within a moment, and the
            # aggregated role is filled in by the controller manager.
            wait_for(lambda: found.kubectl_skillop(APPROVER_SA, "approvals", "-n", NS
                                                   ).returncode == 0,
                     timeout=30, interval=0.2, message="the approver role aggregated")
            yield found
        finally:
            for role in roles():
                rbac.delete_cluster_role(role["metadata"]["name"])
            real.delete_namespaces(NS)


def call_in_background(gw: GatewayProcess, name: str, arguments: dict[str, Any], *,
                       timeout: float = 120) -> Callable[[], Any]:
    """Start a tools/call by the agent; the returned function waits for its result.
    The agent's read timeout is generous: the call waits for a person's decision
    made through kubectl, which a loaded machine (parallel test workers) slows."""
    out: list[Any] = []

    async def call() -> None:
        async with agent(gw.url, timeout=timeout) as session:
            out.append(await session.call_tool(name, arguments))

    thread = threading.Thread(target=lambda: anyio.run(call), daemon=True)
    thread.start()

    def result() -> Any:
        thread.join(60 + timeout)
        assert out, "the call did not return"
        return out[0]
    return result


def names(stage: Stage) -> set[str]:
    return {r["metadata"]["name"] for r in stage.requests()}


def pending(stage: Stage, known: set[str], gw: GatewayProcess) -> dict[str, Any]:
    """The first request not in ``known``, once there is one."""
    try:
        found: list[dict[str, Any]] = wait_for(
            lambda: [r for r in stage.requests() if r["metadata"]["name"] not in known],
            timeout=30, interval=0.02, message="a new approval request")
    except TimeoutError:
        raise AssertionError(f"no approval request; the gateway said: {gw.stdout} {gw.stderr}"
                             ) from None
    return found[0]


def scrape(stage: Stage, sample: str) -> float:
    """One sample of the operator's /metrics (0 when absent)."""
    import urllib.request

    with urllib.request.urlopen(stage.metrics, timeout=5) as response:
        text = response.read().decode()
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def actor_events(stage: Stage, actor_name: str) -> list[Any]:
    """The approval Events on an Actor, oldest first."""
    found = [e for e in stage.real.core.list_namespaced_event(NS).items
             if e.involved_object.name == actor_name and e.reason.startswith("Approval")]
    return sorted(found, key=lambda e: (e.first_timestamp, e.metadata.creation_timestamp,
                                        e.metadata.resource_version))


def text_of(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def test_a_person_approves_and_the_call_runs_once_and_a_second_call_asks_again(
        stage: Stage) -> None:
    big = "x" * 5000
    known = names(stage)
    with stage.gateway("agent") as gw:
        result = call_in_background(gw, "danger", {"target": "prod", "payload": big})
        request = pending(stage, known, gw)
        name = request["metadata"]["name"]
        spec = request["spec"]
        assert spec["actor"] == "agent" and spec["tool"]["bindingName"] == "danger"
        assert spec["tool"]["upstream"] == "ops" and spec["tool"]["upstreamTool"] == "danger"
        assert spec["requester"] == user(GATEWAY_SA)
        assert spec["pod"] == {"name": "agent-0", "namespace": NS}
        args = {a["name"]: a for a in spec["arguments"]}
        assert args["target"]["value"] == '"prod"' and not args["target"]["truncated"]
        assert args["payload"]["truncated"] and args["payload"]["size"] == 5002
        assert len(args["payload"]["value"]) < 2100
        (owner,) = request["metadata"]["ownerReferences"]
        assert owner["kind"] == "Actor" and owner["name"] == "agent"
        # The operator marks it Pending, for the printer column a person scans.
        wait_for(lambda: (stage.real.get("ToolCallApproval", NS, name).get("status") or {}
                          ).get("state") == "Pending", timeout=10, message="Pending")
        shown = stage.real.kubectl("get", "toolcallapprovals", "-n", NS)
        assert shown.returncode == 0, shown.stderr
        (row,) = [line.split() for line in shown.stdout.splitlines() if name in line]
        assert row[1:4] == ["agent", "danger", "Pending"]
        time.sleep(0.5)
        assert stage.upstream.calls == []  # nothing forwarded before the decision

        listed = stage.kubectl_skillop(APPROVER_SA, "approvals", "-n", NS)
        assert listed.returncode == 0, listed.stderr
        assert name in listed.stdout and "danger" in listed.stdout
        assert "target=\"prod\"" in listed.stdout
        everywhere = subprocess.run(  # as an admin, who may list every namespace
            [SKILLOP, "approvals", "-A", "--kubeconfig", str(stage.real.plane.admin_kubeconfig)],
            capture_output=True, text=True, timeout=60, check=False)
        assert everywhere.returncode == 0, everywhere.stderr
        (row,) = [line.split() for line in everywhere.stdout.splitlines() if name in line]
        assert row[:2] == [NS, name] and everywhere.stdout.startswith("NAMESPACE")
        assert scrape(stage, "skillop_approval_requests_pending") >= 1

        # The requester's own identity: RBAC has no status write for it.
        own = stage.kubectl_skillop(GATEWAY_SA, "approve", name, "-n", NS)
        assert own.returncode == 1 and "Forbidden" in own.stderr, own.stderr
        assert stage.upstream.calls == []

        approved = stage.kubectl_skillop(APPROVER_SA, "approve", name, "-n", NS)
        assert approved.returncode == 0, approved.stderr
        assert f"decided by {user(APPROVER_SA)}" in approved.stdout
        first = result()
        assert not first.is_error, text_of(first)
        assert [c[0] for c in stage.upstream.calls] == ["danger"]

        again = stage.kubectl_skillop(APPROVER_SA, "deny", name, "-n", NS, "--reason", "late")
        assert again.returncode == 1 and "a decision is final" in again.stderr, again.stderr

        # A second call needs a second approval: here it is denied, with a reason.
        result = call_in_background(gw, "danger", {"target": "prod"})
        second = pending(stage, known | {name}, gw)
        assert second["metadata"]["name"] != name
        denied = stage.kubectl_skillop(APPROVER_SA, "deny", second["metadata"]["name"],
                                       "-n", NS, "--reason", "not on a Friday")
        assert denied.returncode == 0, denied.stderr
        refusal = result()
        assert refusal.is_error
        assert "not on a Friday" in text_of(refusal) and user(APPROVER_SA) in text_of(refusal)
        assert len(stage.upstream.calls) == 1
        audit = gw.wait_audit(2)
    assert audit[0]["outcome"] == "ok" and audit[0]["approval"] == f"{NS}/{name}"
    assert audit[0]["approver"] == user(APPROVER_SA)
    assert audit[1]["outcome"] == "refused"
    assert audit[1]["approval"] == f"{NS}/{second['metadata']['name']}"
    # An Event on the Actor for every request and every decision.
    events = wait_for(lambda: (found := actor_events(stage, "agent")) and len(found) >= 4
                      and found, timeout=15, message="four approval events")
    assert [e.reason for e in events] == ["ApprovalRequested", "ApprovalApproved",
                                          "ApprovalRequested", "ApprovalDenied"]
    assert name in events[0].message and user(APPROVER_SA) in events[1].message
    assert scrape(stage, 'skillop_approval_decision_seconds_count{state="Approved"}') >= 1
    assert scrape(stage, 'skillop_approval_decision_seconds_count{state="Denied"}') >= 1


def test_the_requester_cannot_decide_and_cannot_write_who_decided(stage: Stage) -> None:
    """A person holding both roles asks (creating a request directly) and tries to
    approve it: the webhook refuses. What a client writes as requester or decider
    is replaced by the API request's user."""
    doc = {"apiVersion": "skillop.dev/v1alpha1", "kind": "ToolCallApproval",
           "metadata": {"name": "self-service", "namespace": NS},
           "spec": {"actor": "agent", "tool": {"bindingName": "danger", "digest": "sha256:0"},
                    "expiresAt": "2099-01-01T00:00:00Z", "requester": "someone-else"},
           "status": {"state": "Approved", "decidedBy": "someone-else"}}
    made = stage.real.kubectl("create", "-f", "-", stdin=json.dumps(doc),
                              kubeconfig=stage.kubeconfigs[BOTH_SA])
    assert made.returncode == 0, made.stderr
    kept = stage.real.get("ToolCallApproval", NS, "self-service")
    assert kept["spec"]["requester"] == user(BOTH_SA)
    assert "status" not in kept or kept["status"].get("state") in (None, "Pending")
    own = stage.kubectl_skillop(BOTH_SA, "approve", "self-service", "-n", NS)
    assert own.returncode == 1
    assert f"{user(BOTH_SA)} asked for this call and may not decide it" in own.stderr
    # Someone else may, and what they claim as decider does not count.
    patch = json.dumps({"status": {"state": "Approved", "decidedBy": "the-boss"}})
    approved = stage.real.kubectl("patch", "toolcallapproval", "self-service", "-n", NS,
                                  "--subresource=status", "--type=merge", "-p", patch,
                                  kubeconfig=stage.kubeconfigs[APPROVER_SA])
    assert approved.returncode == 0, approved.stderr
    assert stage.real.get("ToolCallApproval", NS, "self-service")["status"]["decidedBy"] == (
        user(APPROVER_SA))


def test_no_decision_in_time_is_refused_and_expires(stage: Stage) -> None:
    known = names(stage)
    calls = len(stage.upstream.calls)
    with stage.gateway("hasty") as gw:
        started = time.monotonic()
        result = call_in_background(gw, "danger", {"target": "prod"})
        request = pending(stage, known, gw)
        refusal = result()
        waited = time.monotonic() - started
    # The gateway's own bound, or the operator's Expired if it came first: one wording.
    assert refusal.is_error and "no decision" in text_of(refusal)
    assert f"the approval request expired (ToolCallApproval {NS}/" in text_of(refusal)
    assert waited < 10
    name = request["metadata"]["name"]
    late = stage.kubectl_skillop(APPROVER_SA, "approve", name, "-n", NS)
    assert late.returncode == 1 and "expired" in late.stderr, late.stderr
    assert len(stage.upstream.calls) == calls
    # The operator marks it Expired (and says so on the Actor).
    status = wait_for(lambda: (s := stage.real.get("ToolCallApproval", NS, name).get("status")
                               or {}).get("state") == "Expired" and s,
                      timeout=15, message="marked Expired")
    assert status["reason"] == "no decision before expiresAt"
    wait_for(lambda: [e.reason for e in actor_events(stage, "hasty")][-1:] == ["ApprovalExpired"],
             timeout=15, message="ApprovalExpired event")


def test_time_from_approval_to_the_upstream(stage: Stage) -> None:
    """Not a timed assertion: the figure the issue asks for, printed (docs/gateway.md)."""
    from kubernetes import client, config

    api = client.CustomObjectsApi(config.new_client_from_config(
        config_file=str(stage.kubeconfigs[APPROVER_SA])))
    figures = []
    with stage.gateway("agent") as gw:
        for i in range(5):
            calls, known = len(stage.upstream.calls), names(stage)
            result = call_in_background(gw, "danger", {"target": f"run-{i}"})
            name = pending(stage, known, gw)["metadata"]["name"]
            started = time.perf_counter()
            api.patch_namespaced_custom_object_status(
                "skillop.dev", "v1alpha1", NS, "toolcallapprovals", name,
                {"status": {"state": "Approved"}})
            wait_for(lambda c=calls: len(stage.upstream.calls) > c, timeout=10, interval=0.002)
            figures.append(time.perf_counter() - started)
            assert not result().is_error
    figures.sort()
    print(f"\napproval -> upstream: median {figures[2] * 1000:.0f} ms,"
          f" max {figures[-1] * 1000:.0f} ms over {len(figures)} calls")


def test_without_the_webhook_the_policy_keeps_the_requester_from_deciding(
        stage: Stage) -> None:
    """Where the approvals webhook does not run, a user holding both roles forges a
    requester, then decides their own request, then an approver forges the decider:
    the chart's ValidatingAdmissionPolicy refuses each from the request's user."""
    from kubernetes import client

    real = stage.real
    (policy,) = stage.policies
    checked = wait_for(lambda: (real.kubectl("get", "validatingadmissionpolicy", policy,
                                             "-o", "json").stdout or None), timeout=10)
    assert not (json.loads(checked).get("status") or {}).get("typeChecking", {}).get(
        "expressionWarnings")
    real.namespace(BARE)
    rbac = client.RbacAuthorizationV1Api(real.api_client)
    try:
        people: dict[str, Path] = {}
        for sa, granted in ((BOTH_SA, ("gateway", "approver")), (APPROVER_SA, ("approver",))):
            real.core.create_namespaced_service_account(BARE, {"metadata": {"name": sa}})
            for role in granted:
                rbac.create_namespaced_role_binding(BARE, binding(sa, role, BARE))
            people[sa] = real.plane.kubeconfig_for_token(token(real, sa, BARE), f"{sa}-bare")

        def request(requester: str) -> dict[str, Any]:
            return {"apiVersion": "skillop.dev/v1alpha1", "kind": "ToolCallApproval",
                    "metadata": {"name": "mine", "namespace": BARE},
                    "spec": {"actor": "agent", "tool": {"bindingName": "danger",
                                                        "digest": "sha256:0"},
                             "expiresAt": "2099-01-01T00:00:00Z", "requester": requester}}

        def create(doc: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
            return real.kubectl("create", *extra, "-f", "-", stdin=json.dumps(doc),
                                kubeconfig=people[BOTH_SA])

        # The policy is in force once the API server has read it.
        forged = wait_for(lambda: (done := create(request("someone-else"), "--dry-run=server"))
                          .returncode == 1 and done, timeout=15, interval=0.2,
                          message="the forged requester refused")
        assert ("spec.requester: must be the user who creates the request"
                f" ({user(BOTH_SA, BARE)})") in forged.stderr, forged.stderr
        made = create(request(user(BOTH_SA, BARE)))
        assert made.returncode == 0, made.stderr

        def decide(sa: str, decided_by: str) -> subprocess.CompletedProcess[str]:
            patch = json.dumps({"status": {"state": "Approved", "decidedBy": decided_by}})
            return real.kubectl("patch", "toolcallapproval", "mine", "-n", BARE,
                                "--subresource=status", "--type=merge", "-p", patch,
                                kubeconfig=people[sa])

        for claimed in ("the-boss", user(BOTH_SA, BARE)):
            own = decide(BOTH_SA, claimed)
            assert own.returncode == 1
            assert f"{user(BOTH_SA, BARE)} asked for this call and may not decide it" in (
                own.stderr), own.stderr
        lied = decide(APPROVER_SA, "the-boss")
        assert lied.returncode == 1
        assert ("status.decidedBy: must be the user who decides"
                f" ({user(APPROVER_SA, BARE)})") in lied.stderr, lied.stderr
        kept = real.get("ToolCallApproval", BARE, "mine").get("status") or {}
        assert kept.get("state") in (None, "Pending")
        honest = decide(APPROVER_SA, user(APPROVER_SA, BARE))
        assert honest.returncode == 0, honest.stderr
        assert real.get("ToolCallApproval", BARE, "mine")["status"]["decidedBy"] == (
            user(APPROVER_SA, BARE))
    finally:
        real.delete_namespaces(BARE)

class Relay:
    """A TCP relay to the API server, to cut the gateway off: ``hold`` closes its
    connections and keeps new ones waiting (their watch and reads too) until
    ``release``. TLS passes through: the gateway still talks to the API server."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.server.getsockname()[1])
        self.open = threading.Event()
        self.open.set()
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        self.open.wait()
        upstream = socket.create_connection(self.target)
        with self.lock:
            self.sockets += [client, upstream]
        for source, sink in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pump, args=(source, sink), daemon=True).start()

    def hold(self) -> None:
        self.open.clear()
        with self.lock:
            for sock in self.sockets:
                _shut(sock)
            self.sockets.clear()

    def release(self) -> None:
        self.open.set()

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *_: object) -> None:
        self.server.close()
        self.hold()
        self.release()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        _shut(source)
        _shut(sink)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def test_a_request_replaced_while_the_gateway_could_not_watch_is_not_its_approval(
        stage: Stage) -> None:
    """The gateway's request is deleted and made again under its name with other
    arguments while the gateway is cut off, and the new one approved; the API
    server restarts meanwhile, so the gateway's watch cannot resume from where it
    was (410) and it reads the object afresh: another uid, not its request. The
    call is refused and nothing reaches the upstream (last in this module: the
    restart is every client's watch gap)."""
    known, calls = names(stage), len(stage.upstream.calls)
    host, port = stage.real.plane.url.removeprefix("https://").rsplit(":", 1)
    with Relay(host, int(port)) as relay, stage.gateway("agent", api_port=relay.port) as gw:
        # The agent waits as long as the cut and the API server's restart take.
        result = call_in_background(gw, "danger", {"target": "staging"}, timeout=300)
        request = pending(stage, known, gw)
        name = request["metadata"]["name"]
        relay.hold()
        stage.real.delete("ToolCallApproval", NS, name)
        wait_for(lambda: name not in names(stage), timeout=10, message="deleted")
        stage.real.apply({"apiVersion": request["apiVersion"], "kind": "ToolCallApproval",
                          "metadata": {"name": name, "namespace": NS},
                          "spec": {**request["spec"], "arguments": [
                              {"name": "target", "value": '"prod"', "size": 6}]}})
        approved = stage.kubectl_skillop(APPROVER_SA, "approve", name, "-n", NS)
        assert approved.returncode == 0, approved.stderr
        stage.real.plane.restart_apiserver()
        relay.release()
        refusal = result()
        audit = gw.wait_audit(1)
    assert refusal.is_error, text_of(refusal)
    assert f"the approval request {NS}/{name} was deleted and replaced" in text_of(refusal)
    assert len(stage.upstream.calls) == calls
    assert audit[-1]["outcome"] == "refused"
