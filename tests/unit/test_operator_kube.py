"""The API writer's retries, without a cluster: 409/429/5xx retried, the rest fails fast."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kubernetes
import pytest
import urllib3
from kubernetes.client import ApiException

from skillop.model.names import ObjectRef
from skillop.operator.kube import Gone, Kube, LeaseUnavailable, WriteFailed
from skillop.operator.kube import client as kube


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[Kube]:
    monkeypatch.setattr(kube, "BACKOFF", (0.0, 0.0, 0.0))
    client = Kube.__new__(Kube)  # no kubeconfig, no cluster
    client._client = kubernetes.client
    client._pool = ThreadPoolExecutor(max_workers=2)
    client._lease_pool = ThreadPoolExecutor(max_workers=1)
    client._event_pool = ThreadPoolExecutor(max_workers=1)
    client.writes = 0
    client.may_write = lambda: True
    client.metrics = None
    yield client
    client.close()


class Raw:
    """A raw (``_preload_content=False``) response."""

    def __init__(self, data: bytes, status: int = 200) -> None:
        self.data, self.status = data, status


class Flaky:
    """A call that raises the given errors in turn, then returns "ok"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def _run(api: Kube, fn: Flaky) -> Any:
    return asyncio.run(api._call("patch Actor team-a/dev status", fn))


def test_conflicts_and_server_errors_are_retried(api: Kube) -> None:
    fn = Flaky(ApiException(status=409, reason="Conflict"),
               ApiException(status=500, reason="Internal Server Error"),
               ApiException(status=429, reason="Too Many Requests"))
    assert _run(api, fn) == "ok"
    assert fn.calls == 4


def test_dropped_connections_are_retried(api: Kube) -> None:
    fn = Flaky(ConnectionResetError("reset by peer"))
    assert _run(api, fn) == "ok"
    assert fn.calls == 2


def test_urllib3_network_errors_are_retried_and_named_in_one_line(api: Kube) -> None:
    refused = urllib3.exceptions.MaxRetryError(
        None, "/api/v1/namespaces/team-a/configmaps",  # type: ignore[arg-type]
        urllib3.exceptions.NewConnectionError(None, "Connection refused"))  # type: ignore[arg-type]
    dropped = urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError())
    fn = Flaky(refused, dropped)
    assert _run(api, fn) == "ok"
    assert fn.calls == 3
    with pytest.raises(WriteFailed) as failed:
        _run(api, Flaky(*[refused] * 10))
    assert str(failed.value) == (
        "patch Actor team-a/dev status: MaxRetryError (NewConnectionError)")


def test_a_lease_call_that_cannot_reach_the_api_is_lease_unavailable(api: Kube) -> None:
    refused = urllib3.exceptions.MaxRetryError(
        None, "/apis/coordination.k8s.io", None)  # type: ignore[arg-type]
    with pytest.raises(LeaseUnavailable, match="read lease default/skillop: MaxRetryError"):
        asyncio.run(api._lease_call("read lease default/skillop", Flaky(refused)))


def test_a_not_found_fails_at_once_with_write_failed(api: Kube) -> None:
    fn = Flaky(ApiException(status=404, reason="Not Found"))
    with pytest.raises(WriteFailed, match="patch Actor team-a/dev status: HTTP 404 Not Found"):
        _run(api, fn)
    assert fn.calls == 1


def _terminating() -> ApiException:
    err = ApiException(status=403, reason="Forbidden")
    err.body = json.dumps({
        "kind": "Status", "reason": "Forbidden", "code": 403,
        "message": "unable to create new content in namespace t because it is being terminated",
        "details": {"name": "dev-tools", "kind": "configmaps", "causes": [
            {"reason": "NamespaceTerminating", "field": "metadata.namespace"}]}}).encode()
    return err


def test_a_write_into_a_namespace_being_deleted_is_gone_at_once(api: Kube) -> None:
    fn = Flaky(_terminating())
    with pytest.raises(Gone, match="its namespace is being deleted"):
        _run(api, fn)
    assert fn.calls == 1


def test_a_plain_forbidden_is_a_write_failure_not_gone(api: Kube) -> None:
    err = ApiException(status=403, reason="Forbidden")
    err.body = b'{"kind": "Status", "reason": "Forbidden", "code": 403}'
    with pytest.raises(WriteFailed, match="HTTP 403") as raised:
        _run(api, Flaky(err))
    assert not isinstance(raised.value, Gone)


def test_retries_give_up_after_the_last_backoff(api: Kube) -> None:
    fn = Flaky(*[ApiException(status=503, reason="Unavailable") for _ in range(10)])
    with pytest.raises(WriteFailed, match="HTTP 503"):
        _run(api, fn)
    assert fn.calls == len(kube.BACKOFF) + 1


def test_patch_status_nulls_fields_that_are_gone(api: Kube) -> None:
    seen: list[tuple[Any, ...]] = []

    class Custom:
        def patch_namespaced_custom_object_status(self, *args: Any, **kwargs: Any) -> Any:
            seen.append(args)
            # No model built from the answer (whole: the audit log shows what was kept).
            assert kwargs == {"_preload_content": False}
            return Raw(b"{}")

    api.custom = Custom()
    asyncio.run(api.patch_status("Actor", ObjectRef("team-a", "dev"),
                                 {"toolCount": 1}, {"toolCount": 0, "toolsHash": "sha256:x"}))
    assert seen == [("skillop.dev", "v1alpha1", "team-a", "actors", "dev",
                     {"status": {"toolsHash": None, "toolCount": 1}})]


class Core:
    """ConfigMaps by (namespace, name), served the way the client does with raw responses."""

    def __init__(self, **configmaps: dict[str, Any]) -> None:
        self.configmaps = configmaps

    def read_namespaced_config_map(self, name: str, namespace: str, **kwargs: Any) -> Raw:
        assert kwargs == {"_preload_content": False}
        body = self.configmaps.get(f"{namespace}/{name}")
        if body is None:
            raise ApiException(status=404, reason="Not Found")
        return Raw(json.dumps(body).encode())


def test_read_configmap_returns_the_object_or_none(api: Kube) -> None:
    body = {"metadata": {"name": "pdf", "namespace": "team-a"}, "data": {"SKILL.md": "x"}}
    api.core = Core(**{"team-a/pdf": body})
    got = asyncio.run(api.read_configmap(ObjectRef("team-a", "pdf")))
    assert got == {"apiVersion": "v1", "kind": "ConfigMap", **body}
    assert asyncio.run(api.read_configmap(ObjectRef("team-a", "gone"))) is None


def test_an_event_is_posted_once_even_when_its_answer_is_lost(api: Kube) -> None:
    # An Event is created with generateName: a 5xx or a dropped connection may come
    # after the API server stored it, and a retry would store a second one.
    for error in (ApiException(status=500, reason="Internal Server Error"),
                  ApiException(status=504, reason="Gateway Timeout"),
                  ConnectionResetError("reset by peer")):
        fn = Flaky(error)
        with pytest.raises(WriteFailed):
            asyncio.run(api._call("post event on Actor team-a/dev", fn, maybe_done=False))
        assert fn.calls == 1
    refused = Flaky(ApiException(status=429, reason="Too Many Requests"))
    assert asyncio.run(api._call("post event", refused, maybe_done=False)) == "ok"
    assert refused.calls == 2


def test_post_event_sends_one_create_when_the_answer_is_a_server_error(api: Kube) -> None:
    class Events:
        calls = 0

        def create_namespaced_event(self, namespace: str, body: Any, **kwargs: Any) -> Raw:
            Events.calls += 1
            raise ApiException(status=503, reason="Service Unavailable")

    api.core = Events()
    asyncio.run(api.post_event("Actor", ObjectRef("team-a", "dev"), "uid-1", "Normal",
                               "ToolSetChanged", "3 tools"))
    assert Events.calls == 1


@pytest.mark.parametrize("status", [400, 422])
def test_a_body_the_api_server_refuses_for_good_is_refused_at_once_with_its_words(
        api: Kube, status: int) -> None:
    err = ApiException(status=status, reason="Unprocessable Entity")
    err.body = json.dumps({
        "kind": "Status", "code": status, "reason": "Invalid",
        "message": 'ConfigMap "dev-tools" is invalid: []: Too long:\n must have at most'
                   " 1048576 bytes"}).encode()
    fn = Flaky(err, err)
    with pytest.raises(kube.Refused) as refused:
        _run(api, fn)
    assert fn.calls == 1
    assert refused.value.status == status
    assert refused.value.message == ('ConfigMap "dev-tools" is invalid: []: Too long: must have'
                                     " at most 1048576 bytes")


class Deleting:
    """A CoreV1Api whose ConfigMaps answer deletions: ``answers`` in turn (an
    ApiException to raise, or None for a deletion done)."""

    def __init__(self, *answers: ApiException | None) -> None:
        self.answers = list(answers)
        self.sent: list[tuple[str, str, Any]] = []

    def delete_namespaced_config_map(self, name: str, namespace: str, *, body: Any,
                                     _preload_content: bool) -> Raw:
        self.sent.append((namespace, name, body))
        answer = self.answers.pop(0)
        if answer is not None:
            raise answer
        return Raw(b"{}")


def test_a_part_is_deleted_only_at_the_version_seen_and_gone_already_is_fine(api: Kube,
                                                                             ) -> None:
    part = ObjectRef("team-a", "big-tools-part-2")
    api.core = Deleting(None, ApiException(status=404, reason="Not Found"))
    asyncio.run(api.delete_configmap(part, version="41"))
    asyncio.run(api.delete_configmap(part))
    assert api.core.sent == [("team-a", "big-tools-part-2",
                              {"preconditions": {"resourceVersion": "41"}}),
                             ("team-a", "big-tools-part-2", None)]
    # Written since (HTTP 409 on the precondition): not retried, not deleted.
    api.core = Deleting(ApiException(status=409, reason="Conflict"))
    with pytest.raises(WriteFailed, match="changed since resourceVersion 41"):
        asyncio.run(api.delete_configmap(part, version="41"))
    assert len(api.core.sent) == 1 and api.writes == 3


def test_create_event_retries_under_its_name_and_takes_409_as_made(api: Kube) -> None:
    from skillop.operator.events import Event
    from skillop.operator.outputs import EventSpec

    class Events:
        answers = [ApiException(status=503, reason="Service Unavailable"),
                   ApiException(status=409, reason="AlreadyExists")]
        names: list[str] = []

        def create_namespaced_event(self, namespace: str, body: Any, **kwargs: Any) -> Raw:
            Events.names.append(body["metadata"]["name"])
            raise Events.answers.pop(0)

    api.core = Events()
    event = Event("Actor", ObjectRef("team-a", "dev"), "uid-1",
                  EventSpec("Normal", "ToolSetChanged", "3 tools"), "dev.17f3", 0.0, 0.0)
    asyncio.run(api.create_event(event))
    assert Events.names == ["dev.17f3", "dev.17f3"]


def test_a_configmap_write_asks_for_its_answer_as_metadata_only(api: Kube) -> None:
    sent: list[dict[str, Any]] = []

    class Writing:
        def replace_namespaced_config_map(self, name: str, namespace: str, body: Any,
                                          **kwargs: Any) -> Raw:
            sent.append(kwargs)
            return Raw(b'{"kind":"PartialObjectMetadata","metadata":{"resourceVersion":"42"}}')

    api.core = Writing()
    body = {"metadata": {"name": "dev-tools", "namespace": "team-a", "resourceVersion": "41"},
            "data": {"tools.json": "{}"}}
    assert asyncio.run(api.apply_configmap(body, exists=True)) == "42"
    assert sent == [{"_preload_content": False, "_headers": {"Accept": kube.ANSWER_METADATA}}]
