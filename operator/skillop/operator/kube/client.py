"""The client of the Kubernetes API: every call but the Lease's (``kube.lease``).

Uses the official client from a thread pool. Conflicts (409), throttling (429),
server errors and network failures (OSError, urllib3's MaxRetryError and
ProtocolError) are retried with exponential backoff; a
write that still fails raises ``WriteFailed`` and the caller re-queues the object.
Secrets are read only here and their values are never logged.

Writes pass a gate (``may_write``): with leader election, only the leader's
writes go out; a standby's are refused before any request (``NotLeader``).
Lease calls (leader election, ``kube.lease``) bypass the gate.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import functools
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from skillop.model.names import API_GROUP, API_VERSION, ObjectRef
from skillop.operator.kube.errors import (
    REFUSED,
    TRANSIENT,
    Gone,
    NotLeader,
    Refused,
    WriteFailed,
    api_message,
    namespace_terminating,
    network,
)
from skillop.operator.kube.lease import LeaseCalls

if TYPE_CHECKING:
    from skillop.operator.events import Event
    from skillop.operator.metrics import Metrics

log = logging.getLogger("skillop.kube")
T = TypeVar("T")
RETRIABLE = {409, 429, 500, 502, 503, 504}
BACKOFF = (0.05, 0.2, 0.5, 1.0, 2.0)
#: Kinds without a namespace: listed cluster-wide even when the operator watches
#: only some namespaces.
CLUSTER_SCOPED = frozenset({"Namespace", "ClusterSkillPolicy"})
PLURALS = {"Skill": "skills", "Actor": "actors", "Tool": "tools",
           "SkillPolicy": "skillpolicies", "ClusterSkillPolicy": "clusterskillpolicies",
           "ToolCallApproval": "toolcallapprovals"}
#: Lists for membership ask for metadata only (kubectl get's own trick).
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
#: ConfigMap writes are answered with the written object's metadata only: the
#: resourceVersion is all the operator reads of the answer, and a ConfigMap echoed
#: whole (its tool set) costs the API server its encoding and this process its
#: parsing. A status write's answer stays whole: the audit log's copy of it is
#: what shows the schema kept every status field (tests/realapi/realkit.py).
ANSWER_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
LIST_PAGE = 500
#: Threads (and connections) of their own for Events (``events.EventRecorder``).
EVENT_THREADS = 2


class Kube(LeaseCalls):
    def __init__(self, *, threads: int = 16, user_agent: str | None = None) -> None:
        import kubernetes  # the operator only: the CLI never imports the client

        config: Any = kubernetes.config
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        # Bodies are plain dicts (the API server validates them): typed as Any here.
        self._client: Any = kubernetes.client
        configuration = kubernetes.client.Configuration.get_default_copy()
        # One connection per thread: the writers', the Lease's and the Events'.
        configuration.connection_pool_maxsize = threads + 1 + EVENT_THREADS
        self._api = kubernetes.client.ApiClient(configuration)
        if user_agent:  # which replica wrote what, in the API server's audit log
            self._api.user_agent = user_agent
        self.core: Any = kubernetes.client.CoreV1Api(self._api)
        self.custom: Any = kubernetes.client.CustomObjectsApi(self._api)
        self.coordination: Any = kubernetes.client.CoordinationV1Api(self._api)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="skillop-api")
        self._lease_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="skillop-lease")
        #: Events have threads of their own: posting them never takes a writer's.
        self._event_pool = ThreadPoolExecutor(max_workers=EVENT_THREADS,
                                              thread_name_prefix="skillop-events")
        self.writes = 0
        #: The write gate; leader election makes it "am I the leader".
        self.may_write: Callable[[], bool] = lambda: True
        self.metrics: Metrics | None = None

    def _gate(self, kind: str, what: str) -> None:
        if not self.may_write():
            self._count(kind, "refused")
            raise NotLeader(f"{what}: not the leader")

    async def _write(self, kind: str, what: str, fn: Callable[[], T], *,
                     gone_on_404: bool = False, maybe_done: bool = True,
                     pool: ThreadPoolExecutor | None = None) -> T:
        """A gated, counted write (retried by ``_call``). The gate is asked again
        in the thread that sends, right before each attempt: a write that waited
        for a thread, or for its backoff, while this replica stopped leading is
        never sent."""
        self._gate(kind, what)
        self.writes += 1

        def gated() -> T:
            self._gate(kind, what)
            return fn()

        try:
            result = await self._call(what, gated, gone_on_404=gone_on_404,
                                      maybe_done=maybe_done, pool=pool)
        except NotLeader:
            raise  # counted as refused by the gate: nothing was sent
        except WriteFailed:
            self._count(kind, "error")
            raise
        self._count(kind, "success")
        return result

    async def _call(self, what: str, fn: Callable[[], T], *, gone_on_404: bool = False,
                    maybe_done: bool = True, pool: ThreadPoolExecutor | None = None) -> T:
        """``fn`` with retries. ``maybe_done=False``: only what the API server refused
        before acting (429) is retried; a 5xx or a lost connection may come after it
        acted, and a create with ``generateName`` sent again would make a second
        object (an Event posted twice)."""
        loop = asyncio.get_running_loop()
        retriable = RETRIABLE if maybe_done else {429}
        for attempt, delay in enumerate((*BACKOFF, None)):
            try:
                return await loop.run_in_executor(pool or self._pool, fn)
            except self._client.ApiException as err:
                if err.status == 404 and gone_on_404:
                    raise Gone(f"{what}: HTTP 404 (deleted)") from None
                if namespace_terminating(err):
                    # Its namespace is being deleted: what is written there goes
                    # with it, so a retry (or a re-created ConfigMap) only adds noise.
                    raise Gone(f"{what}: its namespace is being deleted") from None
                if err.status in REFUSED:
                    raise Refused(what, err.status, api_message(err)) from None
                if err.status not in retriable or delay is None:
                    raise WriteFailed(f"{what}: HTTP {err.status} {err.reason}") from None
                log.info("%s: HTTP %s, retry %d in %.2fs", what, err.status, attempt + 1, delay)
            except TRANSIENT as err:  # connection reset, refused, timeout
                if delay is None or not maybe_done:
                    raise WriteFailed(f"{what}: {network(err)}") from None
                log.info("%s: %s, retry %d in %.2fs", what, network(err), attempt + 1, delay)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def patch_status(self, kind: str, ref: ObjectRef, new: Mapping[str, Any],
                           old: Mapping[str, Any]) -> str | None:
        """Write the status; the resourceVersion the object now has (None if the
        answer does not say): its echo is told apart from the same status put back
        by another writer later."""
        # A merge patch: fields no longer present are nulled, so the status is whole.
        body = {"status": {**{k: None for k in old if k not in new}, **new}}
        if not ref.namespace:  # a ClusterSkillPolicy: cluster-scoped
            return _resource_version(await self._write(
                kind, f"patch {kind} {ref.name} status", lambda: _drained(
                    self.custom.patch_cluster_custom_object_status(
                        API_GROUP, API_VERSION, PLURALS[kind], ref.name, body,
                        _preload_content=False)),
                gone_on_404=True))
        return _resource_version(await self._write(
            kind, f"patch {kind} {ref} status", lambda: _drained(
                self.custom.patch_namespaced_custom_object_status(
                    API_GROUP, API_VERSION, ref.namespace, PLURALS[kind], ref.name, body,
                    _preload_content=False)), gone_on_404=True))

    async def delete_approval(self, ref: ObjectRef) -> None:
        """Delete a decided ToolCallApproval (gone already is fine)."""
        def delete() -> bytes:
            try:
                return _drained(self.custom.delete_namespaced_custom_object(
                    API_GROUP, API_VERSION, ref.namespace, PLURALS["ToolCallApproval"],
                    ref.name, _preload_content=False))
            except self._client.ApiException as err:
                if err.status == 404:
                    return b""
                raise

        await self._write("ToolCallApproval", f"delete toolcallapproval {ref}", delete)

    async def apply_configmap(self, body: Mapping[str, Any], *, exists: bool) -> str | None:
        """Create or replace a ConfigMap; the resourceVersion it now has (None if
        the answer does not say). A replace whose body asserts a resourceVersion
        fails if the ConfigMap changed since (HTTP 409, not retried): a replica
        that lost the Lease while the write was on its way then overwrites
        nothing the new leader wrote."""
        meta = body["metadata"]
        ns, name = meta["namespace"], meta["name"]
        version = meta.get("resourceVersion")
        fresh = body if version is None else {
            **body, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}}

        def write() -> bytes:
            try:
                if exists:
                    return _drained(self.core.replace_namespaced_config_map(
                        name, ns, body, **_lean()))
                return _drained(self.core.create_namespaced_config_map(ns, fresh, **_lean()))
            except self._client.ApiException as err:
                if err.status == 404 and exists:
                    return _drained(self.core.create_namespaced_config_map(ns, fresh, **_lean()))
                if err.status == 409 and exists and version is not None:
                    raise WriteFailed(f"write configmap {ns}/{name}: changed since resourceVersion"
                                      f" {version} (HTTP 409); written again once the change"
                                      " is seen") from None
                if err.status == 409 and not exists:
                    return _drained(self.core.replace_namespaced_config_map(
                        name, ns, fresh, **_lean()))
                raise

        return _resource_version(
            await self._write("ConfigMap", f"write configmap {ns}/{name}", write))

    async def delete_configmap(self, ref: ObjectRef, *, version: str | None = None) -> None:
        """Delete a ConfigMap (gone already is fine). With ``version``, only that
        version (a precondition): changed since, HTTP 409 is not retried, and the
        change the watch then shows decides again."""
        options = {"preconditions": {"resourceVersion": version}} if version else None

        def delete() -> bytes:
            try:
                return _drained(self.core.delete_namespaced_config_map(
                    ref.name, ref.namespace, body=options, _preload_content=False))
            except self._client.ApiException as err:
                if err.status == 404:
                    return b""
                if err.status == 409 and version is not None:
                    raise WriteFailed(f"delete configmap {ref}: changed since resourceVersion"
                                      f" {version} (HTTP 409)") from None
                raise

        await self._write("ConfigMap", f"delete configmap {ref}", delete)

    async def create_event(self, event: Event) -> None:
        """Post one Event under the name it was given; raises as a write does. The
        name makes a retry safe: an Event the API server made on an attempt whose
        answer was lost is found there (409) and not made twice."""
        body = _event_body(event.kind, event.ref, event.uid, event.spec.type,
                           event.spec.reason, event.spec.message, at=event.at)
        body["metadata"] = {"name": event.name, "namespace": event.ref.namespace}

        def create() -> bytes:
            try:
                return _drained(self.core.create_namespaced_event(
                    event.ref.namespace, body, _preload_content=False))
            except self._client.ApiException as err:
                if err.status == 409:  # made by an attempt whose answer was lost
                    return b""
                raise

        await self._write("Event", f"post event on {event.kind} {event.ref}", create,
                          pool=self._event_pool)

    async def post_event(self, kind: str, ref: ObjectRef, uid: str, type_: str, reason: str,
                         message: str) -> None:
        """Post one Event now (a failure is logged): the approvals' own Events."""
        body = _event_body(kind, ref, uid, type_, reason, message)
        body["metadata"] = {"generateName": f"{ref.name}.", "namespace": ref.namespace}
        try:
            await self._write("Event", f"post event on {kind} {ref}", lambda: _drained(
                self.core.create_namespaced_event(ref.namespace, body, _preload_content=False)),
                maybe_done=False, pool=self._event_pool)
        except NotLeader:
            pass  # stepped down mid-batch: the new leader reports what it finds
        except WriteFailed as err:
            log.warning("could not post event: %s", err)

    async def namespace_labels(self, name: str) -> dict[str, str] | None:
        """A namespace's labels as the API server holds them now (a quorum read),
        or None if there is none: a shard's fence before it writes there."""
        def read() -> dict[str, str] | None:
            try:
                namespace = self.core.read_namespace(name)
            except self._client.ApiException as err:
                if err.status == 404:
                    return None
                raise
            return dict(getattr(namespace.metadata, "labels", None) or {})

        return await self._call(f"read namespace {name}", read)

    async def read_configmap(self, ref: ObjectRef) -> dict[str, Any] | None:
        """A ConfigMap as the API serves it (plain JSON), or None if there is none."""
        def read() -> dict[str, Any] | None:
            try:
                response = self.core.read_namespaced_config_map(
                    ref.name, ref.namespace, _preload_content=False)
            except self._client.ApiException as err:
                if err.status == 404:
                    return None
                raise
            body: dict[str, Any] = json.loads(response.data)
            return {"apiVersion": "v1", "kind": "ConfigMap", **body}

        return await self._call(f"read configmap {ref}", read)

    async def list_uids(self, kind: str, namespaces: Sequence[str] = ()) -> dict[ObjectRef, str]:
        """Every object of ``kind`` the API server holds (in ``namespaces``, or all):
        name and uid, from metadata-only pages (no data, no status, no spec)."""
        def pages(namespace: str | None) -> list[dict[str, Any]]:
            items: list[dict[str, Any]] = []
            token: str | None = None
            while True:
                raw = {"_preload_content": False, "_headers": {"Accept": METADATA_ONLY},
                       "limit": LIST_PAGE, **({"_continue": token} if token else {})}
                page = json.loads(self._list(kind, namespace, raw).data)
                items += page.get("items") or []
                token = (page.get("metadata") or {}).get("continue")
                if not token:
                    return items

        scopes: Sequence[str | None] = namespaces if namespaces and kind not in CLUSTER_SCOPED \
            else (None,)
        out: dict[ObjectRef, str] = {}
        for scope in scopes:
            for item in await self._call(f"list {kind}", functools.partial(pages, scope)):
                meta = item.get("metadata") or {}
                out[ObjectRef(meta.get("namespace") or "", meta.get("name") or "")] = \
                    str(meta.get("uid") or "")
        return out

    async def uid_of(self, kind: str, ref: ObjectRef) -> str | None:
        """The uid of the object of that name now, or None if there is none (a
        metadata-only list by name: the list verb the watch already has)."""
        raw = {"_preload_content": False, "_headers": {"Accept": METADATA_ONLY},
               "field_selector": f"metadata.name={ref.name}"}
        data = await self._call(f"list {kind} {ref}", lambda: self._list(
            kind, ref.namespace or None, raw).data)
        for item in json.loads(data).get("items") or []:
            meta = item.get("metadata") or {}
            if meta.get("name") == ref.name:  # the selector, checked
                return str(meta.get("uid") or "")
        return None

    def _list(self, kind: str, namespace: str | None, raw: dict[str, Any]) -> Any:
        if kind == "Namespace":
            return self.core.list_namespace(**raw)
        if kind == "ConfigMap":
            return (self.core.list_namespaced_config_map(namespace, **raw) if namespace
                    else self.core.list_config_map_for_all_namespaces(**raw))
        if namespace:
            return self.custom.list_namespaced_custom_object(
                API_GROUP, API_VERSION, namespace, PLURALS[kind], **raw)
        return self.custom.list_cluster_custom_object(API_GROUP, API_VERSION, PLURALS[kind],
                                                      **raw)

    async def read_secret(self, ref: ObjectRef) -> dict[str, str]:
        """A Secret's data, decoded. The caller keeps it in memory only."""
        secret = await self._call(f"read secret {ref}", lambda: (
            self.core.read_namespaced_secret(ref.name, ref.namespace)))
        data = getattr(secret, "data", None) or {}
        return {k: base64.b64decode(v).decode() for k, v in data.items()}

    async def secret_keys(self, ref: ObjectRef) -> frozenset[str] | None:
        """The keys of a Secret, None when it does not exist. The values the API
        sends with them are dropped here, never kept or logged (docs/security.md)."""
        try:
            secret = await self._call(f"read secret {ref}", lambda: (
                self.core.read_namespaced_secret(ref.name, ref.namespace)), gone_on_404=True)
        except Gone:
            return None
        return frozenset(getattr(secret, "data", None) or {})

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._lease_pool.shutdown(wait=False, cancel_futures=True)
        self._event_pool.shutdown(wait=False, cancel_futures=True)


def _event_body(kind: str, ref: ObjectRef, uid: str, type_: str, reason: str, message: str,
                *, at: float | None = None) -> dict[str, Any]:
    """A core/v1 Event on one of skillop's objects (its metadata is the caller's)."""
    when = (datetime.datetime.now(datetime.UTC) if at is None
            else datetime.datetime.fromtimestamp(at, datetime.UTC)).isoformat()
    return {
        "involvedObject": {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": kind,
                           "name": ref.name, "namespace": ref.namespace, "uid": uid},
        "type": type_, "reason": reason, "message": message[:1024],
        "source": {"component": "skillop"},
        "firstTimestamp": when, "lastTimestamp": when, "count": 1,
        "reportingComponent": "skillop", "reportingInstance": "skillop",
    }


def _lean() -> dict[str, Any]:
    """A ConfigMap write's options: its answer raw (no model objects), metadata only."""
    return {"_preload_content": False, "_headers": {"Accept": ANSWER_METADATA}}


def _resource_version(data: bytes) -> str | None:
    """The resourceVersion of a written object, from the API's answer."""
    try:
        meta = json.loads(data).get("metadata") or {}
    except (ValueError, AttributeError):
        return None
    version = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return str(version) if version else None


def _drained(response: Any) -> bytes:
    """The body of a raw (``_preload_content=False``) response, read so that its
    connection goes back to the pool. Writes do not turn the echoed object into the
    client's model classes: nothing reads it, and with a thread per write that
    work only competes with the event loop."""
    data: bytes = response.data
    return data

