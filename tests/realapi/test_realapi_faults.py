"""Faults against a real control plane: a watch gap, foreign writes, a paused leader.

Each test is a way a revoked tool could stay granted, or a wrong set be written
(docs/operations.md lists them and what each costs). The watch gap is a real one:
the operator is paused (SIGSTOP) while kube-apiserver restarts and objects change,
so when it resumes its watches find a new server that no longer has their
resourceVersion ("410 Gone") and list again, with no DELETED event for what
vanished meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import skillkit
from realkit import (
    SKILLOP,
    OperatorProcess,
    RealCluster,
    audit_now,
    lease_holder,
    operator_process,
    wait_quiet,
    writes_by,
)
from skillkit import anon, skill

from clusterkit import wait_for
from skillop.model.toolset import TOOLS_KEY, default_configmap_name

pytestmark = pytest.mark.realapi

NS = "realapi-faults"
#: One replica, no Lease: a restart of the API server must not also be a handover.
SOLO = {"SKILLOP_LEADER_ELECTION": "false"}
#: A short Lease of its own (4 s, renew deadline 3 s), so a takeover is quick.
LEASE = {"SKILLOP_LEASE_NAMESPACE": "default", "SKILLOP_LEASE_NAME": "realapi-faults",
         "SKILLOP_LEASE_DURATION_SECONDS": "4", "SKILLOP_LEASE_RENEW_DEADLINE_SECONDS": "3",
         "SKILLOP_LEASE_RETRY_SECONDS": "0.5"}


def tools_skill(name: str, *tools: str) -> dict[str, Any]:
    return skill(name, NS, anonymousTools=[anon(t, capabilities={"readOnly": True})
                                           for t in tools])


def actor(name: str, skills: list[str]) -> dict[str, Any]:
    return skillkit.actor(name, NS, skills=skills)


@contextlib.contextmanager
def paused(proc: OperatorProcess) -> Iterator[None]:
    """The operator stopped (SIGSTOP) for the block, resumed (SIGCONT) after it."""
    os.kill(proc.popen.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(proc.popen.pid, signal.SIGCONT)


def reason(real: RealCluster, name: str) -> str | None:
    ready = real.ready("Actor", NS, name)
    return ready["reason"] if ready else None


def owner_uid(real: RealCluster, configmap: str) -> str | None:
    cm = real.configmap(NS, configmap)
    owners = (cm.metadata.owner_references or []) if cm is not None else []
    return owners[0].uid if owners else None


def writes_to(real: RealCluster, name: str, since: str) -> list[tuple[str, str]]:
    return [(w["verb"], w["objectRef"].get("resource", "")) for w in real.plane.writes(since=since)
            if w["objectRef"].get("name") == name]


def test_a_watch_gap_drops_what_vanished_and_renews_what_was_recreated(
        real: RealCluster) -> None:
    real.namespace(NS)
    real.apply(tools_skill("base", "base_tool"))
    real.apply(tools_skill("extra", "extra_tool"))
    real.apply(actor("agent", ["base", "extra"]))
    real.apply(actor("doomed", ["base"]))
    real.apply(actor("reborn", ["base"]))
    with operator_process(real.plane, env=SOLO, name="gap") as op:
        for name in ("agent", "doomed", "reborn"):
            real.wait_ready("Actor", NS, name, timeout=30)
        old_uid = real.get("Actor", NS, "reborn")["metadata"]["uid"]
        with paused(op):
            real.plane.restart_apiserver()
            real.delete("Skill", NS, "extra")
            real.delete("Actor", NS, "doomed")
            real.delete("Actor", NS, "reborn")
            real.apply(actor("reborn", ["base"]))  # the same spec, a new object
        resumed = audit_now()
        # The deleted Skill is gone for the operator too: its user is not Ready.
        wait_for(lambda: reason(real, "agent") == "RefNotFound", timeout=30, interval=0.2,
                 message="agent Ready=False RefNotFound after its Skill was deleted")
        # The re-created Actor is a new object: a status, a ConfigMap owned by it.
        new_uid = real.get("Actor", NS, "reborn")["metadata"]["uid"]
        assert new_uid != old_uid
        real.wait_ready("Actor", NS, "reborn", timeout=30)
        wait_for(lambda: owner_uid(real, "reborn-tools") == new_uid, timeout=30, interval=0.2,
                 message="reborn-tools owned by the new Actor")
        # The deleted Actor's ConfigMap is collected, and never written again.
        wait_for(lambda: real.configmap(NS, "doomed-tools") is None, timeout=60, interval=0.2,
                 message="doomed-tools garbage-collected")
        wait_quiet(real.plane, quiet=2.0)
        said = [line for line in op.output().splitlines() if "doomed" in line or "gone" in line]
        assert writes_to(real, "doomed-tools", resumed) == [], said
        assert writes_to(real, "doomed", resumed) == [], said


def configmap_hashes(real: RealCluster, namespace: str) -> dict[str, str | None]:
    return {cm.metadata.name: (cm.metadata.annotations or {}).get("skillop.dev/tools-hash")
            for cm in real.core.list_namespaced_config_map(namespace).items}


def test_a_leader_paused_past_its_lease_writes_nothing_when_it_resumes(
        real: RealCluster) -> None:
    """A leader stopped (SIGSTOP) mid-batch while the standby takes over and writes a
    newer set: once resumed, the old leader must not put the older set back."""
    ns, count = "realapi-paused", 60
    real.namespace(ns)
    description = {"v": 1}

    def shared() -> dict[str, Any]:
        return skill("shared", ns, anonymousTools=[anon(
            "probe", description=f"probe v{description['v']}",
            capabilities={"readOnly": True})])

    real.apply(shared())
    names = [f"agent-{i:02d}" for i in range(count)]
    for name in names:
        real.apply({**actor(name, ["shared"]), "metadata": {"name": name, "namespace": ns}})

    def all_hashes(excluding: set[str | None]) -> dict[str, str | None] | None:
        hashes = configmap_hashes(real, ns)
        done = len(hashes) == count and not set(hashes.values()) & excluding
        return hashes if done else None

    # A writes one object at a time, so that its batch is long enough to pause in.
    a_env = {**LEASE, "SKILLOP_LEASE_IDENTITY": "paused-a", "SKILLOP_WRITE_CONCURRENCY": "1"}
    b_env = {**LEASE, "SKILLOP_LEASE_IDENTITY": "paused-b"}
    with operator_process(real.plane, env=a_env, name="paused-a") as a, \
            operator_process(real.plane, env=b_env, name="paused-b", lead=False):
        v1 = wait_for(lambda: all_hashes({None}), timeout=60, interval=0.2,
                      message="every ConfigMap written")
        description["v"] = 2
        real.patch_spec("Skill", ns, "shared", shared()["spec"])
        wait_for(lambda: configmap_hashes(real, ns) != v1, timeout=20, interval=0.02,
                 message="the leader starts writing the change")
        with paused(a):
            at_pause = configmap_hashes(real, ns)
            old = set(v1.values())
            assert sum(h in old for h in at_pause.values()) > count // 4  # mid-batch
            wait_for(lambda: lease_holder(real.plane, LEASE) == "paused-b", timeout=20,
                     interval=0.1, message="the standby takes over")
            v2 = wait_for(lambda: all_hashes(old), timeout=30, interval=0.2,
                          message="the new leader writes the change")
            description["v"] = 3
            real.patch_spec("Skill", ns, "shared", shared()["spec"])
            v3 = wait_for(lambda: all_hashes(set(v2.values())), timeout=30, interval=0.2,
                          message="the new leader writes a newer change")
            resumed = audit_now()
        wait_for(lambda: "lost" in a.output(), timeout=10, interval=0.1,
                 message="the old leader notices it lost the Lease")
        wait_quiet(real.plane, quiet=1.0)
        # What the old leader sent after it resumed: at most a write that had passed
        # its gate as it was paused, which the API server refuses, as it asserts the
        # resourceVersion the new leader has written past (HTTP 409).
        late = [(w["verb"], w["objectRef"].get("resource"), w["objectRef"].get("name"),
                 (w.get("responseStatus") or {}).get("code"))
                for w in writes_by(real.plane, "paused-a", resumed, leases=False)]
        assert [w for w in late if not w[3] or w[3] < 400] == []
        assert all(w[:2] == ("update", "configmaps") and w[3] == 409 for w in late)
        assert configmap_hashes(real, ns) == v3  # nothing the new leader wrote is undone


# -- hand-written status, labels and owners ---------------------------------------------


@pytest.fixture(scope="module")
def solo(real: RealCluster) -> Iterator[OperatorProcess]:
    """One operator (no Lease) for the tests that write by hand what it owns. It
    watches its own namespace only: a module-scoped fixture lives until the module
    ends, and a second writer in the later tests' namespaces would be a replica
    without a Lease, which is not supported (docs/install.md)."""
    real.namespace(HANDS)
    real.apply(skill("base", HANDS, anonymousTools=[anon("probe")]))
    with operator_process(real.plane, env={**SOLO, "SKILLOP_NAMESPACES": HANDS},
                          name="hands") as proc:
        yield proc


HANDS = "realapi-hands"


def hands_actor(real: RealCluster, name: str) -> dict[str, Any]:
    real.apply({**actor(name, ["base"]), "metadata": {"name": name, "namespace": HANDS}})
    real.wait_ready("Actor", HANDS, name, timeout=30)
    wait_for(lambda: real.configmap(HANDS, default_configmap_name(name)), timeout=10, interval=0.1)
    return real.get("Actor", HANDS, name)


def kubectl(real: RealCluster, *args: str) -> None:
    out = real.kubectl(*args, "-n", HANDS)
    assert out.returncode == 0, out.stderr


def test_a_status_written_by_hand_is_repaired_at_once(real: RealCluster,
                                                      solo: OperatorProcess) -> None:
    right = hands_actor(real, "hand")["status"]["toolsHash"]
    since = audit_now()
    kubectl(real, "patch", "actor", "hand", "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"toolsHash": "sha256:" + "0" * 64}}))
    # Not at the resync (300 s): at once, and once (no fight with its own echo).
    wait_for(lambda: real.get("Actor", HANDS, "hand")["status"]["toolsHash"] == right,
             timeout=10, interval=0.1, message="the operator restores toolsHash")
    wait_quiet(real.plane, quiet=1.0)
    assert writes_to(real, "hand", since) == [("patch", "actors")]


def test_an_older_status_of_its_own_put_back_by_another_writer_is_repaired(
        real: RealCluster, solo: OperatorProcess) -> None:
    """A lagging second writer (a former leader, a restored backup) puts back a status
    the operator itself wrote before the Actor changed: not the latest it wrote, so
    repaired at once, with one write (its own echoes start no rewrites)."""
    before = hands_actor(real, "lagging")["status"]
    real.apply(skill("more", HANDS, anonymousTools=[anon("extra")]))
    real.patch_spec("Actor", HANDS, "lagging", {"skills": ["base", "more"]})
    wait_for(lambda: real.get("Actor", HANDS, "lagging")["status"]["toolsHash"]
             != before["toolsHash"], timeout=10, interval=0.1,
             message="the status for the changed Actor")
    wait_quiet(real.plane, quiet=1.0)
    current = real.get("Actor", HANDS, "lagging")
    latest = {k: current["status"][k] for k in ("toolsHash", "observedGeneration")}
    since = audit_now()
    real.custom.replace_namespaced_custom_object_status(  # as the admin, not the operator
        "skillop.dev", "v1alpha1", HANDS, "actors", "lagging", {**current, "status": before})
    assert real.get("Actor", HANDS, "lagging")["status"]["toolsHash"] == before["toolsHash"]
    wait_for(lambda: {k: real.get("Actor", HANDS, "lagging")["status"][k] for k in latest}
             == latest, timeout=10, interval=0.1,
             message="the operator restores the status it wrote last")
    wait_quiet(real.plane, quiet=1.0)
    assert writes_to(real, "lagging", since) == [("patch", "actors")]


def test_configmap_labels_and_owner_removed_by_hand_are_restored(
        real: RealCluster, solo: OperatorProcess) -> None:
    uid = hands_actor(real, "labelled")["metadata"]["uid"]
    name = "labelled-tools"

    def labels() -> dict[str, str]:
        return dict(real.configmap(HANDS, name).metadata.labels or {})

    kubectl(real, "label", "configmap", name, "app.kubernetes.io/managed-by-")
    wait_for(lambda: labels().get("app.kubernetes.io/managed-by") == "skillop", timeout=10,
             interval=0.1, message="the managed-by label restored")
    kubectl(real, "patch", "configmap", name, "--type=json",
            "-p", '[{"op": "remove", "path": "/metadata/ownerReferences"}]')
    wait_for(lambda: owner_uid_in(real, HANDS, name) == uid, timeout=10, interval=0.1,
             message="the ownerReference restored")
    # Unlabelled, then edited: still the Actor's ConfigMap, still repaired.
    good = real.configmap(HANDS, name).data
    kubectl(real, "label", "configmap", name, "app.kubernetes.io/managed-by-")
    kubectl(real, "patch", "configmap", name, "--type=merge",
            "-p", json.dumps({"data": {TOOLS_KEY: "{}"}}))
    wait_for(lambda: real.configmap(HANDS, name).data == good, timeout=10, interval=0.1,
             message="the edited, unlabelled ConfigMap repaired")
    assert labels().get("app.kubernetes.io/managed-by") == "skillop"


def test_an_orphaned_configmap_is_owned_by_the_recreated_actor(
        real: RealCluster, solo: OperatorProcess) -> None:
    hands_actor(real, "orphan")
    name = "orphan-tools"
    kubectl(real, "delete", "actor", "orphan", "--cascade=orphan", "--wait=true")
    wait_for(lambda: owner_uid_in(real, HANDS, name) is None, timeout=30, interval=0.1,
             message="the garbage collector orphans the ConfigMap")
    uid = hands_actor(real, "orphan")["metadata"]["uid"]
    wait_for(lambda: owner_uid_in(real, HANDS, name) == uid, timeout=10, interval=0.1,
             message="the re-created Actor owns its ConfigMap")
    kubectl(real, "delete", "configmap", name)
    wait_for(lambda: owner_uid_in(real, HANDS, name) == uid, timeout=10, interval=0.1,
             message="a deleted ConfigMap comes back, owned")


def owner_uid_in(real: RealCluster, namespace: str, configmap: str) -> str | None:
    cm = real.configmap(namespace, configmap)
    owners = (cm.metadata.owner_references or []) if cm is not None else []
    return owners[0].uid if owners else None


# -- a kill between ConfigMap and status ----------------------------------------------------


def _killed_mid_batch(real: RealCluster, ns: str, count: int,
                      ) -> tuple[list[str], dict[str, str | None], list[str]]:
    """Actors of a shared Skill in ``ns``; the Skill changed and the operator SIGKILLed
    as soon as the first ConfigMap changes: (Actor names, hashes before, the Actors
    whose new set reached the ConfigMap but not the status)."""
    real.namespace(ns)
    version = {"v": 1}

    def shared() -> dict[str, Any]:
        return skill("shared", ns, anonymousTools=[anon(f"probe_v{version['v']}")])

    real.apply(shared())
    names = [f"agent-{i:02d}" for i in range(count)]
    for name in names:
        real.apply({**actor(name, ["shared"]), "metadata": {"name": name, "namespace": ns}})
    slow = {**SOLO, "SKILLOP_WRITE_CONCURRENCY": "1"}  # windows of 16: ConfigMaps, statuses
    with operator_process(real.plane, env=slow, name="killed") as first:
        v1 = wait_for(lambda: (h := configmap_hashes(real, ns)) and len(h) == count
                      and None not in h.values() and h, timeout=60, interval=0.2)
        wait_quiet(real.plane, quiet=1.0)
        version["v"] = 2
        real.patch_spec("Skill", ns, "shared", shared()["spec"])
        wait_for(lambda: configmap_hashes(real, ns) != v1, timeout=20, interval=0.01)
        first.popen.kill()  # SIGKILL: no batch end, no Events
        first.popen.wait(10)
    statuses = {a["metadata"]["name"]: (a.get("status") or {}).get("toolsHash")
                for a in real.list("Actor", ns)}
    cms = configmap_hashes(real, ns)
    owed = [n for n in names if cms[default_configmap_name(n)] != v1[default_configmap_name(n)]
            and cms[default_configmap_name(n)] != statuses[n]]
    return names, v1, owed


def test_a_kill_between_configmap_and_status_still_posts_the_event_once(
        real: RealCluster) -> None:
    # The kill is timed by watching the ConfigMaps; when it lands between two write
    # windows (every written ConfigMap's status written too) the fault did not
    # happen, and the scenario runs again in a fresh namespace.
    for attempt in range(4):
        ns = f"realapi-killed-{attempt}"
        names, v1, owed = _killed_mid_batch(real, ns, 40)
        if owed:
            break
    assert owed, "killed after some ConfigMaps and before their statuses"

    def settled() -> bool:
        now = configmap_hashes(real, ns)
        return all((a.get("status") or {}).get("toolsHash") == now[default_configmap_name(n)]
                   != v1[default_configmap_name(n)] for a in real.list("Actor", ns)
                   if (n := a["metadata"]["name"]))

    with operator_process(real.plane, env=SOLO, name="restarted"):
        wait_for(settled, timeout=60, interval=0.2,
                 message="every Actor's status records the new set")
        wait_quiet(real.plane, quiet=1.0)
    events: dict[str, int] = {}
    seen: list[str] = []
    stands_for = 0  # Actors an Event folding a burst speaks for, beside its own
    for event in real.core.list_namespaced_event(ns).items:
        if event.reason == "ToolSetChanged":
            events[event.involved_object.name] = events.get(event.involved_object.name, 0) + 1
            seen.append(f"{event.involved_object.name}: {event.message}")
            if (folded := re.match(r"this one and (\d+) other Actors", event.message)):
                stands_for += int(folded[1])
    # Each Actor's change told once: its own Event, or within the one for a burst.
    assert set(events.values()) == {1}, sorted(seen)
    assert len(events) + stands_for == len(names), sorted(seen)


# -- every ConfigMap version across an API server restart --------------------------------


class Recorder:
    """Every version of every ConfigMap of a namespace, as a watch (re-listing after
    a gap, as any client would) delivers them: (name, tool names) in order."""

    def __init__(self, real: RealCluster, namespace: str) -> None:
        self.real, self.namespace = real, namespace
        self.versions: list[tuple[str, frozenset[str]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Recorder:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _record(self, cm: Any) -> None:
        doc = json.loads((cm.data or {}).get(TOOLS_KEY) or "{}")
        self.versions.append((cm.metadata.name,
                              frozenset(t["name"] for t in doc.get("tools") or [])))

    def _run(self) -> None:
        from kubernetes import watch

        while not self._stop.is_set():
            try:
                listed = self.real.core.list_namespaced_config_map(self.namespace)
                for cm in listed.items:
                    self._record(cm)
                version = listed.metadata.resource_version
                while not self._stop.is_set():
                    for event in watch.Watch().stream(
                            self.real.core.list_namespaced_config_map, self.namespace,
                            resource_version=version, timeout_seconds=1):
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self._record(event["object"])
                        version = event["object"].metadata.resource_version
            except Exception:  # the API server restarting, or 410 Gone: list again
                self._stop.wait(0.2)


def offline_tools(folder: Path, namespace: str, actors: list[str]) -> dict[str, frozenset[str]]:
    """What the offline CLI grants each Actor, from the same manifests."""
    runs = {name: subprocess.Popen([SKILLOP, "tools", f"{namespace}/{name}", "-f", str(folder),
                                    "-o", "json"], stdout=subprocess.PIPE, text=True)
            for name in actors}
    out = {}
    for name, run in runs.items():
        stdout, _ = run.communicate(timeout=60)
        assert run.returncode == 0, name
        out[name] = frozenset(t["name"] for t in json.loads(stdout)["tools"])
    return out


def test_an_api_server_restart_loses_no_tool_and_keeps_no_revoked_one(
        real: RealCluster, tmp_path: Path) -> None:
    ns = "realapi-restart"
    real.namespace(ns)
    manifests: dict[str, dict[str, Any]] = {}

    def put(doc: dict[str, Any], *, create: bool = True) -> None:
        manifests[doc["metadata"]["name"]] = doc
        if create:
            real.apply(doc)
        else:
            real.patch_spec(doc["kind"], ns, doc["metadata"]["name"], doc["spec"])

    def extra(*tools: str) -> dict[str, Any]:
        return skill("extra", ns, anonymousTools=[anon(t) for t in tools])

    put(skill("base", ns, anonymousTools=[anon("kept_a"), anon("kept_b")]))
    put(extra("revoked", "kept_c"))
    put(skill("top", ns, includes=[{"skill": "base"}, {"skill": "extra"}]))
    actors = [f"agent-{i}" for i in range(4)]
    for i, name in enumerate(actors):
        put({**actor(name, ["top"] if i % 2 == 0 else ["extra"]),
             "metadata": {"name": name, "namespace": ns}})
    (tmp_path / "ns.yaml").write_text(json.dumps(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))

    def write_manifests() -> Path:
        for name, doc in manifests.items():
            (tmp_path / f"{doc['kind']}-{name}.yaml").write_text(json.dumps(doc))
        return tmp_path

    before = offline_tools(write_manifests(), ns, actors)
    # Leader election on, with a renew deadline longer than the restart may take:
    # the API going away must not cost the Lease, nor log a traceback.
    env = {"SKILLOP_LEASE_NAMESPACE": "default", "SKILLOP_LEASE_NAME": "realapi-restart",
           "SKILLOP_LEASE_DURATION_SECONDS": "60", "SKILLOP_LEASE_RENEW_DEADLINE_SECONDS": "45",
           "SKILLOP_LEASE_IDENTITY": "restart-a"}
    with operator_process(real.plane, env=env, name="restart") as op, \
            Recorder(real, ns) as recorder:

        def granted() -> dict[str, frozenset[str]]:
            latest: dict[str, frozenset[str]] = {}
            for name, tools in recorder.versions:
                latest[name] = tools
            return {a: latest.get(default_configmap_name(a), frozenset()) for a in actors}

        wait_for(lambda: granted() == before, timeout=60, interval=0.2,
                 message="every Actor has its tools")
        real.plane.restart_apiserver(down=1.0)
        put(extra("kept_c", "granted"), create=False)  # one revoked, one granted
        after = offline_tools(write_manifests(), ns, actors)
        assert after != before
        wait_for(lambda: granted() == after, timeout=60, interval=0.2,
                 message="every ConfigMap ends with what the offline CLI grants")
        wait_quiet(real.plane, quiet=2.0)
        output = op.output()
    versions = recorder.versions
    kept = {a: before[a] & after[a] for a in actors}
    lost = [(name, sorted(kept[name[:-len("-tools")]] - tools)) for name, tools in versions
            if kept[name[:-len("-tools")]] - tools]
    assert lost == []  # no version ever lacked a tool granted before and after
    assert granted() == after  # the revoked tool is gone everywhere, once settled
    print(f"\nreal API: {len(versions)} ConfigMap versions recorded across a restart",
          flush=True)
    assert "Traceback" not in output
    assert "lost (held by" not in output  # it kept the Lease through the restart


def test_a_configmap_rewrite_asserts_the_version_it_was_made_from(
        real: RealCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fence behind the test above, without its timing: a rewrite whose body
    names a resourceVersion the ConfigMap has moved past is refused by the API
    server and changes nothing; one naming the current version is written."""
    import kubernetes

    from skillop.operator.kube import Kube, WriteFailed

    ns, name = "realapi-fence", "fence-tools"
    real.namespace(ns)
    # As KUBECONFIG names it in a pod (the client reads the variable at import).
    monkeypatch.setattr(kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION",
                        str(real.plane.admin_kubeconfig))
    before = kubernetes.client.Configuration.get_default_copy()
    kube = Kube(threads=1)
    try:
        body: dict[str, Any] = {"metadata": {"namespace": ns, "name": name},
                                "data": {"k": "ours"}}
        first = asyncio.run(kube.apply_configmap(body, exists=False))
        assert first is not None
        real.core.patch_namespaced_config_map(name, ns, {"data": {"k": "theirs"}})
        stale = {**body, "metadata": {**body["metadata"], "resourceVersion": first}}
        with pytest.raises(WriteFailed, match="409"):
            asyncio.run(kube.apply_configmap(stale, exists=True))
        assert real.configmap(ns, name).data == {"k": "theirs"}
        current = real.configmap(ns, name).metadata.resource_version
        fresh = {**body, "metadata": {**body["metadata"], "resourceVersion": current}}
        written = asyncio.run(kube.apply_configmap(fresh, exists=True))
        assert written not in (None, first, current)
        assert real.configmap(ns, name).data == {"k": "ours"}
    finally:
        kube.close()
        kubernetes.client.Configuration.set_default(before)
