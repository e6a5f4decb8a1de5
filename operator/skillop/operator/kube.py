"""The one module that talks to the Kubernetes API (besides kopf's own watching).

Uses the official client from a thread pool. Conflicts (409), throttling (429),
server errors and dropped connections are retried with exponential backoff; a
write that still fails raises ``WriteFailed`` and the caller re-queues the object.
Secrets are read only here and their values are never logged.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from skillop.model.names import API_GROUP, API_VERSION, ObjectRef

log = logging.getLogger("skillop.kube")
T = TypeVar("T")
RETRIABLE = {409, 429, 500, 502, 503, 504}
BACKOFF = (0.05, 0.2, 0.5, 1.0, 2.0)
PLURALS = {"Skill": "skills", "Actor": "actors", "Tool": "tools"}


class WriteFailed(Exception):
    """A write still failing after the retries; the caller re-queues the object."""


class Kube:
    def __init__(self, *, threads: int = 16) -> None:
        import kubernetes  # the operator only: the CLI never imports the client

        config: Any = kubernetes.config
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        # Bodies are plain dicts (the API server validates them): typed as Any here.
        self._client: Any = kubernetes.client
        configuration = kubernetes.client.Configuration.get_default_copy()
        configuration.connection_pool_maxsize = threads  # one connection per writer thread
        self._api = kubernetes.client.ApiClient(configuration)
        self.core: Any = kubernetes.client.CoreV1Api(self._api)
        self.custom: Any = kubernetes.client.CustomObjectsApi(self._api)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="skillop-api")
        self.writes = 0

    async def _call(self, what: str, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        for attempt, delay in enumerate((*BACKOFF, None)):
            try:
                return await loop.run_in_executor(self._pool, fn)
            except self._client.ApiException as err:
                if err.status not in RETRIABLE or delay is None:
                    raise WriteFailed(f"{what}: HTTP {err.status} {err.reason}") from None
                log.info("%s: HTTP %s, retry %d in %.2fs", what, err.status, attempt + 1, delay)
            except OSError as err:  # connection reset, refused, timeout
                if delay is None:
                    raise WriteFailed(f"{what}: {type(err).__name__}") from None
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def patch_status(self, kind: str, ref: ObjectRef, new: Mapping[str, Any],
                           old: Mapping[str, Any]) -> None:
        # A merge patch: fields no longer present are nulled, so the status is whole.
        body = {"status": {**{k: None for k in old if k not in new}, **new}}
        self.writes += 1
        await self._call(f"patch {kind} {ref} status", lambda: (
            self.custom.patch_namespaced_custom_object_status(
                API_GROUP, API_VERSION, ref.namespace, PLURALS[kind], ref.name, body)))

    async def apply_configmap(self, body: Mapping[str, Any], *, exists: bool) -> None:
        meta = body["metadata"]
        ns, name = meta["namespace"], meta["name"]
        self.writes += 1

        def write() -> object:
            try:
                if exists:
                    return self.core.replace_namespaced_config_map(name, ns, body)
                return self.core.create_namespaced_config_map(ns, body)
            except self._client.ApiException as err:
                if err.status == 404 and exists:
                    return self.core.create_namespaced_config_map(ns, body)
                if err.status == 409 and not exists:
                    return self.core.replace_namespaced_config_map(name, ns, body)
                raise

        await self._call(f"write configmap {ns}/{name}", write)

    async def post_event(self, kind: str, ref: ObjectRef, uid: str, type_: str, reason: str,
                         message: str) -> None:
        now = datetime.datetime.now(datetime.UTC)
        body = {
            "metadata": {"generateName": f"{ref.name}.", "namespace": ref.namespace},
            "involvedObject": {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": kind,
                               "name": ref.name, "namespace": ref.namespace, "uid": uid},
            "type": type_, "reason": reason, "message": message[:1024],
            "source": {"component": "skillop"},
            "firstTimestamp": now.isoformat(), "lastTimestamp": now.isoformat(), "count": 1,
            "reportingComponent": "skillop", "reportingInstance": "skillop",
        }
        try:
            await self._call(f"post event on {kind} {ref}",
                             lambda: self.core.create_namespaced_event(ref.namespace, body))
        except WriteFailed as err:
            log.warning("could not post event: %s", err)

    async def read_secret(self, ref: ObjectRef) -> dict[str, str]:
        """A Secret's data, decoded. The caller keeps it in memory only."""
        secret = await self._call(f"read secret {ref}", lambda: (
            self.core.read_namespaced_secret(ref.name, ref.namespace)))
        data = getattr(secret, "data", None) or {}
        return {k: base64.b64decode(v).decode() for k, v in data.items()}

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
