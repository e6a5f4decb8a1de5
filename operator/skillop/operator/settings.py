"""Operator settings, from environment variables (the Helm chart sets them).

Each variable is declared once, with its default, parser and meaning, in
``model.settings``; this module only groups them into the values the operator
passes down. A value that is set but does not parse stops the operator at start
(``SettingsError``, one line naming the variable); unset or blank means the default.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any

from skillop.model import settings as s
from skillop.model.settings import SettingsError
from skillop.model.shardselector import LabelSelector
from skillop.resolve.inject import SidecarSettings

__all__ = ["OPERATOR_FIELDS", "LeaseConfig", "OperatorConfig", "SettingsError", "sidecar_from_env"]

#: Where Kubernetes mounts the pod's namespace (the Lease lives there by default).
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def sidecar_from_env() -> SidecarSettings:
    """The injected gateway's settings (the chart's ``injection`` values); the same
    variables serve ``skillop inject``, so that offline and webhook agree."""
    default = SidecarSettings()
    # A part the variable leaves out keeps its default.
    resources = {**s.INJECT_RESOURCES.default, **(s.INJECT_RESOURCES.read_set() or {})}
    return SidecarSettings(
        image=s.INJECT_IMAGE.read() or default.image,
        pull_policy=s.INJECT_PULL_POLICY.read(),
        port=s.INJECT_PORT.read(),
        metrics_port=s.INJECT_METRICS_PORT.read(),
        # Unset: the gateway's own default, which is the same list.
        allow=s.MCP_ALLOW.read_set() or default.allow,
        requests=resources["requests"],
        limits=resources["limits"],
    )


def _pod_namespace() -> str:
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as file:
            return file.read().strip() or "default"
    except OSError:
        return "default"


def _identity() -> str:
    # As client-go's examples do: the pod name plus a random suffix, so a restarted
    # container never mistakes its predecessor's Lease for its own.
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class LeaseConfig:
    """Leader election on a coordination.k8s.io/v1 Lease (docs/install.md)."""

    enabled: bool = s.LEADER_ELECTION.default
    name: str = s.LEASE_NAME.default
    namespace: str = "default"
    identity: str = field(default_factory=_identity)
    #: How long a Lease stays valid without renewal: a crashed leader's successor
    #: waits this long (client-go's default).
    duration_seconds: float = s.LEASE_DURATION_SECONDS.default
    #: A leader that could not renew for this long stops writing.
    renew_deadline_seconds: float = s.LEASE_RENEW_DEADLINE_SECONDS.default
    #: How often the leader renews and standbys look (client-go: 2 s; 1 s so that a
    #: released Lease is taken within 1 s on a rolling upgrade).
    retry_seconds: float = s.LEASE_RETRY_SECONDS.default

    def __post_init__(self) -> None:
        if not self.duration_seconds > self.renew_deadline_seconds:
            raise SettingsError(
                f"{s.LEASE_DURATION_SECONDS.env}={self.duration_seconds:g} must be above"
                f" {s.LEASE_RENEW_DEADLINE_SECONDS.env}={self.renew_deadline_seconds:g}")
        if not self.renew_deadline_seconds > self.retry_seconds:
            raise SettingsError(
                f"{s.LEASE_RENEW_DEADLINE_SECONDS.env}={self.renew_deadline_seconds:g} must"
                f" be above {s.LEASE_RETRY_SECONDS.env}={self.retry_seconds:g}")

    @classmethod
    def from_env(cls) -> LeaseConfig:
        return cls(
            enabled=s.LEADER_ELECTION.read(),
            name=s.LEASE_NAME.read(),
            namespace=s.LEASE_NAMESPACE.read() or _pod_namespace(),
            identity=s.LEASE_IDENTITY.read() or _identity(),
            duration_seconds=s.LEASE_DURATION_SECONDS.read(),
            renew_deadline_seconds=s.LEASE_RENEW_DEADLINE_SECONDS.read(),
            retry_seconds=s.LEASE_RETRY_SECONDS.read(),
        )


@dataclass(frozen=True)
class OperatorConfig:
    """What the operator runs with; each field's meaning is its setting's
    (``model.settings``, docs/install.md)."""

    namespaces: tuple[str, ...] = s.NAMESPACES.default
    mcp_discovery: bool = s.MCP_DISCOVERY.default
    mcp_allow: tuple[str, ...] = s.MCP_ALLOW.default
    mcp_ca_file: str | None = s.MCP_CA_FILE.default
    mcp_refresh_seconds: float = s.MCP_REFRESH_SECONDS.default
    resync_seconds: float = s.RESYNC_SECONDS.default
    debounce_seconds: float = s.DEBOUNCE_SECONDS.default
    write_concurrency: int = s.WRITE_CONCURRENCY.default
    stale_part_seconds: float = s.STALE_PART_SECONDS.default
    log_level: str = s.LOG_LEVEL.default
    liveness: str = s.LIVENESS.default
    lease: LeaseConfig = field(default_factory=LeaseConfig)
    #: The namespaces this installation writes (docs/install.md, Sharding).
    shard_selector: LabelSelector = s.SHARD_SELECTOR.default
    shard_cluster_owner: bool = s.SHARD_CLUSTER_OWNER.default
    webhook: bool = s.WEBHOOK.default
    webhook_port: int = s.WEBHOOK_PORT.default
    webhook_cert: str | None = s.WEBHOOK_CERT.default
    webhook_key: str | None = s.WEBHOOK_KEY.default
    webhook_ca: str | None = s.WEBHOOK_CA.default
    webhook_managed: bool = s.WEBHOOK_MANAGED.default
    webhook_host: str | None = s.WEBHOOK_HOST.default
    #: Serve the mutating webhook that injects the gateway into actor pods, and
    #: watch those pods (docs/gateway.md, Injection).
    injection: bool = s.INJECTION.default
    sidecar: SidecarSettings = field(default_factory=SidecarSettings)
    #: The operator may ``get`` Secrets (the chart's mcp.headersFromSecrets): it then
    #: checks that the Secrets an Actor's set names exist (CredentialsReady).
    secrets_readable: bool = s.SECRETS_READABLE.default

    @property
    def serves_webhooks(self) -> bool:
        """Whether the HTTPS admission server runs (validating, mutating or both)."""
        return self.webhook or self.injection

    @classmethod
    def from_env(cls) -> OperatorConfig:
        """The settings; raises ``SettingsError`` for a value that does not parse."""
        read = {name: setting.read() for name, setting in OPERATOR_FIELDS.items()}
        return cls(**read, lease=LeaseConfig.from_env(), sidecar=sidecar_from_env())


#: ``OperatorConfig``'s fields that are one setting each (``from_env``).
OPERATOR_FIELDS: dict[str, s.Setting[Any]] = {
    "namespaces": s.NAMESPACES, "mcp_discovery": s.MCP_DISCOVERY, "mcp_allow": s.MCP_ALLOW,
    "mcp_ca_file": s.MCP_CA_FILE, "mcp_refresh_seconds": s.MCP_REFRESH_SECONDS,
    "resync_seconds": s.RESYNC_SECONDS, "debounce_seconds": s.DEBOUNCE_SECONDS,
    "write_concurrency": s.WRITE_CONCURRENCY, "log_level": s.LOG_LEVEL,
    "stale_part_seconds": s.STALE_PART_SECONDS,
    "liveness": s.LIVENESS, "webhook": s.WEBHOOK, "webhook_port": s.WEBHOOK_PORT,
    "webhook_cert": s.WEBHOOK_CERT, "webhook_key": s.WEBHOOK_KEY, "webhook_ca": s.WEBHOOK_CA,
    "webhook_managed": s.WEBHOOK_MANAGED, "webhook_host": s.WEBHOOK_HOST,
    "injection": s.INJECTION, "secrets_readable": s.SECRETS_READABLE,
    "shard_selector": s.SHARD_SELECTOR, "shard_cluster_owner": s.SHARD_CLUSTER_OWNER,
}
