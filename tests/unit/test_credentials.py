"""Tenant credentials in an Actor's status: CredentialsReady (the Secrets its set
names, in its namespace: names and keys, never values) and outdatedPods (running
pods whose gateway does not mount what the set now names), with an Event."""

from __future__ import annotations

import asyncio
from typing import Any

from skillkit import actor, anon, resolver, skill

from skillop.model.names import ObjectRef
from skillop.operator.actorplan import actor_plan
from skillop.operator.credentials import CredentialChecker
from skillop.operator.kube import WriteFailed
from skillop.operator.outputs import CredentialState
from skillop.operator.store import Store
from skillop.resolve.inject import Credentials, Target, inject

NS = "team-a"
REF = ObjectRef(NS, "reviewer")
NEEDED = Credentials(secrets=("docker-auth", "git-env"), configmaps=("corp-ca",),
                     secret_keys=(("git-env", "token"),))


class Secrets:
    """Key names by Secret, as the API would answer a get (None: 404)."""

    def __init__(self, table: dict[str, frozenset[str] | None] | None = None,
                 error: Exception | None = None) -> None:
        self.table = table or {}
        self.error = error
        self.reads: list[ObjectRef] = []

    async def secret_keys(self, ref: ObjectRef) -> frozenset[str] | None:
        self.reads.append(ref)
        if self.error is not None:
            raise self.error
        return self.table.get(ref.name)


def pod(name: str, credentials: Credentials, **meta: Any) -> dict[str, Any]:
    bare = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS,
                         "labels": {"skillop.dev/actor": "reviewer"}, **meta},
            "spec": {"containers": [{"name": "agent", "image": "a"}]},
            "status": {"phase": "Running"}}
    return inject(bare, Target("reviewer", "reviewer-tools", credentials), namespace=NS)


def state(store: Store, reader: Secrets | None, needed: Credentials = NEEDED,
          ) -> CredentialState:
    return asyncio.run(CredentialChecker(store, reader).state(REF, needed))


def test_missing_secrets_and_keys_are_named_and_values_never_kept() -> None:
    store = Store()
    store.upsert({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "corp-ca", "namespace": NS}, "data": {"ca.crt": "x"}})
    found = state(store, Secrets({"docker-auth": frozenset({"Authorization"}),
                                  "git-env": frozenset({"other"})}))
    assert found.missing == ("key token of Secret git-env",)
    none = state(Store(), Secrets({}))
    assert none.missing == ("ConfigMap corp-ca", "Secret docker-auth", "Secret git-env")
    ok = state(store, Secrets({"docker-auth": frozenset({"A"}), "git-env": frozenset({"token"})}))
    assert ok.missing == ()


def test_without_leave_to_read_secrets_the_check_is_unknown() -> None:
    assert state(Store(), None).missing is None
    refused = state(Store(), Secrets(error=WriteFailed("read secret team-a/x: HTTP 403")))
    assert refused.missing is None and "HTTP 403" in refused.unknown_reason


def test_a_secret_read_once_serves_a_batch() -> None:
    reader = Secrets({"docker-auth": frozenset({"A"})})
    checker = CredentialChecker(Store(), reader)

    async def twice() -> None:
        needed = Credentials(secrets=("docker-auth",))
        await checker.state(REF, needed)
        await checker.state(ObjectRef(NS, "other"), needed)

    asyncio.run(twice())
    assert reader.reads == [ObjectRef(NS, "docker-auth")]


def test_pods_that_lack_a_mount_are_out_of_date_until_gone() -> None:
    store = Store()
    assert store.upsert_pod(pod("old", Credentials(secrets=("docker-auth",)))) == {
        ("Actor", f"{NS}/reviewer")}
    store.upsert_pod(pod("new", NEEDED))
    store.upsert_pod(pod("done", Credentials(), ) | {"status": {"phase": "Succeeded"}})
    unlabelled = pod("x", Credentials())
    unlabelled["metadata"]["labels"] = {}
    store.upsert_pod(unlabelled)
    assert store.outdated_pods(REF, NEEDED) == ("old",)
    assert store.upsert_pod(pod("new", NEEDED)) == set()  # nothing changed: no cascade
    assert store.remove_pod(NS, "old") == {("Actor", f"{NS}/reviewer")}
    assert store.outdated_pods(REF, NEEDED) == ()


def _plan(old: dict[str, Any], credentials: CredentialState) -> Any:
    docs = [skill("docker", mcpServers=[{"name": "d", "url": "http://d.tools.svc/mcp",
                                         "tools": [anon("build")]}]),
            actor("reviewer", skills=["docker"])]
    r = resolver(docs)
    resolution = r.resolve_actor(REF)
    assert resolution is not None
    return actor_plan(r.catalog.actors[REF], resolution, old_status=old, observed=None,
                      now="2026-12-01T00:00:00Z", credentials=credentials)


def condition(status: dict[str, Any]) -> dict[str, Any]:
    (found,) = [c for c in status["conditions"] if c["type"] == "CredentialsReady"]
    return dict(found)


def test_the_status_names_missing_secrets_and_outdated_pods_and_an_event_says_so() -> None:
    missing = CredentialState(NEEDED, ("Secret docker-auth",), outdated_pods=("rev-1",))
    plan = _plan({}, missing)
    cond = condition(plan.status)
    assert (cond["status"], cond["reason"]) == ("False", "SecretNotFound")
    assert cond["message"] == "missing in namespace team-a: Secret docker-auth"
    assert plan.status["outdatedPods"] == ["rev-1"]
    (event,) = [e for e in plan.events if e.reason == "PodsOutOfDate"]
    assert event.type == "Warning" and "rev-1" in event.message
    assert "kubectl rollout restart" in event.message
    # The same pods again: no second Event.
    again = _plan(plan.status, missing)
    assert not [e for e in again.events if e.reason == "PodsOutOfDate"]
    fine = _plan(plan.status, CredentialState(NEEDED, ()))
    assert condition(fine.status)["status"] == "True"
    assert "outdatedPods" not in fine.status or fine.status["outdatedPods"] is None
    unknown = _plan({}, CredentialState(NEEDED, None, "the operator may not read Secrets"))
    assert (condition(unknown.status)["status"], condition(unknown.status)["reason"]) == (
        "Unknown", "SecretsNotReadable")
