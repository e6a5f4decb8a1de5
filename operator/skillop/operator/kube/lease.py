"""Leader election's calls: read and write the Lease.

They bypass the write gate, use their own thread (a burst of writes never delays
a renewal) and are never retried here: a 409 means another replica won the race,
and the elector decides what to do next.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from skillop.operator.kube.errors import TRANSIENT, LeaseConflict, LeaseUnavailable, network

if TYPE_CHECKING:
    from skillop.operator.metrics import Metrics

T = TypeVar("T")

#: The wire format of Lease times (metav1.MicroTime).
MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass(frozen=True)
class LeaseRecord:
    """A coordination.k8s.io/v1 Lease's spec, as leader election reads and writes it."""

    holder: str
    duration_seconds: int
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0
    #: The version read; a write asserts it (optimistic concurrency).
    resource_version: str | None = None

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"leaseDurationSeconds": self.duration_seconds,
                                "leaseTransitions": self.transitions}
        if self.holder:
            spec["holderIdentity"] = self.holder
        if self.acquire_time:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time:
            spec["renewTime"] = self.renew_time
        return spec


def _micro_time(value: Any) -> str | None:
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.UTC).strftime(MICRO_TIME)
    return str(value) if value else None


class LeaseCalls:
    """The Lease calls of ``Kube`` (which sets these attributes up), and the count
    of every call's outcome in the operator's metrics (the Lease's and the writes')."""

    _client: Any
    coordination: Any
    _lease_pool: ThreadPoolExecutor
    metrics: Metrics | None

    def _count(self, kind: str, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.api_write(kind, outcome)

    async def _lease_call(self, what: str, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._lease_pool, fn)
        except self._client.ApiException as err:
            if err.status == 409:
                raise LeaseConflict(what) from None
            raise LeaseUnavailable(f"{what}: HTTP {err.status} {err.reason}") from None
        except TRANSIENT as err:
            raise LeaseUnavailable(f"{what}: {network(err)}") from None

    async def read_lease(self, namespace: str, name: str, *,
                         timeout: float) -> LeaseRecord | None:
        """The Lease, or None if there is none."""
        def read() -> Any:
            try:
                return self.coordination.read_namespaced_lease(
                    name, namespace, _request_timeout=timeout)
            except self._client.ApiException as err:
                if err.status == 404:
                    return None
                raise

        lease = await self._lease_call(f"read lease {namespace}/{name}", read)
        if lease is None:
            return None
        spec = lease.spec
        return LeaseRecord(
            holder=spec.holder_identity or "", duration_seconds=spec.lease_duration_seconds or 0,
            acquire_time=_micro_time(spec.acquire_time), renew_time=_micro_time(spec.renew_time),
            transitions=spec.lease_transitions or 0,
            resource_version=lease.metadata.resource_version)

    async def write_lease(self, namespace: str, name: str, record: LeaseRecord, *,
                          timeout: float) -> str:
        """Create the Lease (no version read) or replace the version read.

        Returns the new resourceVersion; ``LeaseConflict`` if another replica
        created or changed it first.
        """
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace}, "spec": record.spec()}
        if record.resource_version is None:
            fn: Callable[[], Any] = lambda: self.coordination.create_namespaced_lease(  # noqa: E731
                namespace, body, _request_timeout=timeout)
        else:
            body["metadata"]["resourceVersion"] = record.resource_version
            fn = lambda: self.coordination.replace_namespaced_lease(  # noqa: E731
                name, namespace, body, _request_timeout=timeout)
        try:
            lease = await self._lease_call(f"write lease {namespace}/{name}", fn)
        except LeaseConflict:
            self._count("Lease", "conflict")
            raise
        except LeaseUnavailable:
            self._count("Lease", "error")
            raise
        self._count("Lease", "success")
        return str(lease.metadata.resource_version)
