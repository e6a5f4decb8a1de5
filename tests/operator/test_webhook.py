"""The validating webhook over HTTPS: kopf's server and admission engine, skillop's handlers.

The server is the one the operator runs (``webhook.SelfSignedWebhookServer``, a
self-signed certificate on loopback); requests go through kopf's own
``serve_admission_request`` into the registered ``@kopf.on.validate`` handlers,
whose memo holds a Store, as in the operator. The client trusts only the CA
bundle the server reports, as an API server would.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import ssl
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import kopf

# kopf serves admission only from a running operator; to call skillop's webhook
# handlers the way kopf's server does (same request parsing, same registry
# lookup), the test drives kopf's own admission engine, which kopf does not
# export: there is no public way to feed it one AdmissionReview.
from kopf._cogs.structs import references
from kopf._core.engines import admission, indexing
from kopf._core.reactor import inventory
from skillkit import actor, skill

from skillop.operator import webhook
from skillop.operator.settings import OperatorConfig
from skillop.operator.store import Store

NS = "team-a"


def review_request(obj: dict[str, Any], *, operation: str = "CREATE",
                   old: dict[str, Any] | None = None) -> dict[str, Any]:
    plural = {"Skill": "skills", "Actor": "actors"}[obj["kind"]]
    return {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "skillop.dev", "version": "v1alpha1", "kind": obj["kind"]},
            "resource": {"group": "skillop.dev", "version": "v1alpha1", "resource": plural},
            "name": obj["metadata"]["name"], "namespace": NS, "operation": operation,
            "userInfo": {"username": "tester"}, "object": obj, "oldObject": old,
            "dryRun": False,
        },
    }


class Webhook:
    def __init__(self, url: str, cadata: bytes, store: Store) -> None:
        self.url, self.store = url, store
        self.ssl = ssl.create_default_context(cadata=cadata.decode("ascii"))

    async def post(self, handler_id: str, body: dict[str, Any]) -> dict[str, Any]:
        async with aiohttp.ClientSession() as session, session.post(
                f"{self.url}/{handler_id}", json=body, ssl=self.ssl) as resp:
            assert resp.status == 200, await resp.text()
            data: dict[str, Any] = await resp.json()
            assert data["response"]["uid"] == body["request"]["uid"]
            return data["response"]

    async def check(self, obj: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        handler = webhook.SKILL_WEBHOOK if obj["kind"] == "Skill" else webhook.ACTOR_WEBHOOK
        return await self.post(handler, review_request(obj, **kwargs))


@asynccontextmanager
async def serving(store: Store) -> AsyncIterator[Webhook]:
    registry = kopf.OperatorRegistry()
    webhook.register(registry)
    webhook.register_injection(registry)
    settings = kopf.OperatorSettings()
    insights = references.Insights()
    insights.webhook_resources.add(references.Resource(
        group="", version="v1", plural="pods", kind="Pod", namespaced=True,
        verbs=["list", "watch", "patch"]))
    for plural, kind in (("skills", "Skill"), ("actors", "Actor")):
        insights.webhook_resources.add(references.Resource(
            group="skillop.dev", version="v1alpha1", plural=plural, kind=kind,
            namespaced=True, verbs=["list", "watch", "patch"]))
    fn = functools.partial(
        admission.serve_admission_request, settings=settings, registry=registry,
        insights=insights, memories=inventory.ResourceMemories(),
        memobase=kopf.Memo(store=store), indices=indexing.OperatorIndexers().indices)
    config = OperatorConfig(webhook=True, webhook_port=0, webhook_host="127.0.0.1")
    server = webhook.server(config, addr="127.0.0.1")
    assert isinstance(server, webhook.SelfSignedWebhookServer)
    server.port = None  # any free port
    configs = server(fn)
    client_config = await configs.__anext__()
    try:
        assert client_config["url"].startswith("https://127.0.0.1:")
        cadata = base64.b64decode(client_config["caBundle"])
        yield Webhook(client_config["url"].rstrip("/"), cadata, store)
    finally:
        await configs.aclose()


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout=60))


def test_cycle_is_denied_and_valid_skill_allowed() -> None:
    async def main() -> None:
        store = Store()
        store.upsert(skill("a", includes=[{"skill": "b"}], builtins=["git_operations"]))
        async with serving(store) as hook:
            denied = await hook.check(skill("b", includes=[{"skill": "a"}]))
            assert denied["allowed"] is False
            assert denied["status"]["code"] == 422
            assert denied["status"]["message"] == (
                "spec.includes[0].skill: CycleDetected: "
                "include cycle: team-a/b -> team-a/a -> team-a/b")
            allowed = await hook.check(skill("b", builtins=["file_operations"]))
            assert allowed["allowed"] is True
            assert "status" not in allowed
            # The store was only read: b is still unknown to it.
            assert [r.name for r in store.catalog.skills] == ["a"]

    run(main())


def test_several_problems_in_one_message_and_unknown_refs_allowed() -> None:
    async def main() -> None:
        async with serving(Store()) as hook:
            bad = skill("s", includes=[{"skill": "hub:team-a/x"}],
                        tools=[{"ref": "a/b/c"}])
            denied = await hook.check(bad)
            assert denied["allowed"] is False
            message = denied["status"]["message"]
            assert "spec.includes[0].skill: InvalidRef: " in message
            assert "spec.tools[0].ref: InvalidRef: " in message
            assert "; " in message
            assert (await hook.check(skill("s", includes=[{"skill": "later"}])))["allowed"]
            forbidden = await hook.check(skill("s", tools=[{"ref": "t", "overrides": {
                "name": "other"}}]))
            assert forbidden["allowed"] is False
            assert forbidden["status"]["message"].startswith(
                "spec.tools[0].overrides.name: ForbiddenOverride: ")

    run(main())


def test_actor_glob_and_update_of_unchanged_spec() -> None:
    async def main() -> None:
        async with serving(Store()) as hook:
            bad = actor("r", skills=["x"], skillAccessPolicy={"allow": ["team-a/[x"]})
            denied = await hook.check(bad)
            assert denied["allowed"] is False
            assert denied["status"]["message"].startswith(
                "spec.skillAccessPolicy.allow[0]: InvalidSpec: ")
            never = await hook.check(actor("r", skills=["x"],
                                           skillAccessPolicy={"deny": ["deployer"]}))
            assert never["allowed"] is False
            assert never["status"]["message"].startswith(
                "spec.skillAccessPolicy.deny[0]: InvalidSpec: a skill glob without '/' or '*' can"
                " never match namespace/name: 'deployer'")
            ok = await hook.check(actor("r", skills=["x", "platform/y"]))
            assert ok["allowed"] is True
            # Metadata-only updates (finalizers, kopf's annotations) always pass.
            with_finalizer = {**bad, "metadata": {**bad["metadata"], "finalizers": ["f"]}}
            update = await hook.check(with_finalizer, operation="UPDATE", old=bad)
            assert update["allowed"] is True

    run(main())


def test_config_from_env_and_settings(monkeypatch: Any, tmp_path: Any) -> None:
    for name in ("SKILLOP_WEBHOOK", "SKILLOP_WEBHOOK_CERT", "SKILLOP_WEBHOOK_KEY",
                 "SKILLOP_WEBHOOK_MANAGED", "SKILLOP_WEBHOOK_PORT"):
        monkeypatch.delenv(name, raising=False)
    default = OperatorConfig.from_env()
    assert default.webhook is False and default.webhook_port == 9443
    settings = kopf.OperatorSettings()
    webhook.configure(settings, default)
    assert isinstance(settings.admission.server, webhook.SelfSignedWebhookServer)
    assert settings.admission.managed is None

    cert, key = webhook.self_signed_certificate(["skillop-webhook.skillop.svc", "127.0.0.1"])
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    monkeypatch.setenv("SKILLOP_WEBHOOK", "true")
    monkeypatch.setenv("SKILLOP_WEBHOOK_PORT", "8443")
    monkeypatch.setenv("SKILLOP_WEBHOOK_CERT", str(tmp_path / "tls.crt"))
    monkeypatch.setenv("SKILLOP_WEBHOOK_KEY", str(tmp_path / "tls.key"))
    monkeypatch.setenv("SKILLOP_WEBHOOK_MANAGED", "true")
    config = OperatorConfig.from_env()
    assert (config.webhook, config.webhook_port, config.webhook_managed) == (True, 8443, True)
    settings = kopf.OperatorSettings()
    webhook.configure(settings, config)
    server = settings.admission.server
    assert type(server) is kopf.WebhookServer
    assert (server.addr, server.port) == ("0.0.0.0", 8443)
    assert (server.certfile, server.pkeyfile) == (config.webhook_cert, config.webhook_key)
    assert settings.admission.managed == "skillop.dev"


def test_mounted_certificate_serves_https(tmp_path: Any) -> None:
    cert, key = webhook.self_signed_certificate(["127.0.0.1"])
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    config = OperatorConfig(webhook=True, webhook_cert=str(tmp_path / "tls.crt"),
                            webhook_key=str(tmp_path / "tls.key"))

    async def main() -> None:
        server = webhook.server(config, addr="127.0.0.1")
        server.port = None

        async def fn(request: Any, **_: Any) -> dict[str, Any]:
            return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "response": {"uid": request["request"]["uid"], "allowed": True}}

        configs = server(fn)
        client_config = await configs.__anext__()
        try:
            assert base64.b64decode(client_config["caBundle"]) == cert
            hook = Webhook(client_config["url"].rstrip("/"), cert, Store())
            assert (await hook.check(skill("x")))["allowed"] is True
        finally:
            await configs.aclose()

    run(main())
