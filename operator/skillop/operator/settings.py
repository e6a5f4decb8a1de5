"""Operator settings, from environment variables (the Helm chart sets them).

A value that is set but does not parse stops the operator at start
(``SettingsError``, one line naming the variable): silently falling back to the
default would run the operator with a setting its administrator did not choose.
An unset or empty variable means the default.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.parse
import uuid
from dataclasses import dataclass, field

from skillop.resolve.inject import SidecarSettings
from skillop.sources.egress import DEFAULT_EGRESS_PATTERNS

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: Where Kubernetes mounts the pod's namespace (the Lease lives there by default).
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


class SettingsError(ValueError):
    """A setting that is set but does not parse; the message names the variable."""


def _raw(name: str) -> str | None:
    raw = os.environ.get(name)
    return raw.strip() if raw is not None and raw.strip() else None


def _list(name: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _float(name: str, default: float, *, zero: bool = False) -> float:
    """A finite number of seconds above zero (or zero too, with ``zero``)."""
    raw = _raw(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number") from None
    if not (0 <= value < float("inf")) or (value == 0 and not zero):
        least = "zero or more" if zero else "above zero"
        raise SettingsError(f"{name}={raw!r} must be a finite number {least}")
    return value


def _int(name: str, default: int, *, minimum: int = 1, maximum: int = 65535) -> int:
    raw = _raw(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a whole number") from None
    if not minimum <= value <= maximum:
        raise SettingsError(f"{name}={raw!r} must be between {minimum} and {maximum}")
    return value


def _bool(name: str, default: bool = False) -> bool:
    raw = _raw(name)
    if raw is None:
        return default
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise SettingsError(f"{name}={raw!r} is not a boolean (true/false, yes/no, 1/0, on/off)")


def _level(name: str) -> str:
    raw = (_raw(name) or "INFO").upper()
    if raw not in _LEVELS:
        raise SettingsError(f"{name}={raw!r} is not one of {', '.join(_LEVELS)}")
    return raw


def _endpoint(name: str) -> str:
    """``http://HOST:PORT/PATH`` (the health server), or empty: none."""
    raw = _raw(name)
    if raw is None:
        return ""
    parts = urllib.parse.urlsplit(raw)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or port is None:
        raise SettingsError(f"{name}={raw!r} is not an http://HOST:PORT/PATH address")
    return raw


_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_RESOURCE_KEYS = ("requests", "limits")


def _resources(name: str, default: SidecarSettings) -> dict[str, tuple[tuple[str, str], ...]]:
    """``{"requests": {...}, "limits": {...}}`` as JSON (the chart's toJson), each a
    map of resource name to quantity string; an absent part keeps the default."""
    out = {"requests": default.requests, "limits": default.limits}
    raw = _raw(name)
    if raw is None:
        return out
    try:
        value = json.loads(raw)
    except ValueError:
        raise SettingsError(f"{name} is not JSON") from None
    if not isinstance(value, dict) or set(value) - set(_RESOURCE_KEYS):
        raise SettingsError(f"{name} must be an object with requests and/or limits")
    for part in _RESOURCE_KEYS:
        table = value.get(part)
        if table is None:
            continue
        if not isinstance(table, dict) or not all(
                isinstance(v, (str, int)) and not isinstance(v, bool) for v in table.values()):
            raise SettingsError(f"{name}: {part} must map resource names to quantities")
        out[part] = tuple(sorted((str(k), str(v)) for k, v in table.items()))
    return out


def sidecar_from_env() -> SidecarSettings:
    """The injected gateway's settings (the chart's ``injection`` values); the same
    variables serve ``skillop inject``, so that offline and webhook agree."""
    default = SidecarSettings()
    policy = _raw("SKILLOP_INJECT_PULL_POLICY") or default.pull_policy
    if policy not in _PULL_POLICIES:
        raise SettingsError(f"SKILLOP_INJECT_PULL_POLICY={policy!r} is not one of"
                            f" {', '.join(_PULL_POLICIES)}")
    resources = _resources("SKILLOP_INJECT_RESOURCES", default)
    return SidecarSettings(
        image=_raw("SKILLOP_INJECT_IMAGE") or default.image,
        pull_policy=policy,
        port=_int("SKILLOP_INJECT_PORT", default.port),
        allow=_list("SKILLOP_MCP_ALLOW", default.allow),
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

    enabled: bool = True
    name: str = "skillop"
    namespace: str = "default"
    identity: str = field(default_factory=_identity)
    #: How long a Lease stays valid without renewal: a crashed leader's successor
    #: waits this long (client-go's default).
    duration_seconds: float = 15.0
    #: A leader that could not renew for this long stops writing.
    renew_deadline_seconds: float = 10.0
    #: How often the leader renews and standbys look (client-go: 2 s; 1 s so that a
    #: released Lease is taken within 1 s on a rolling upgrade).
    retry_seconds: float = 1.0

    def __post_init__(self) -> None:
        if not self.duration_seconds > self.renew_deadline_seconds:
            raise SettingsError(
                f"SKILLOP_LEASE_DURATION_SECONDS={self.duration_seconds:g} must be above"
                f" SKILLOP_LEASE_RENEW_DEADLINE_SECONDS={self.renew_deadline_seconds:g}")
        if not self.renew_deadline_seconds > self.retry_seconds:
            raise SettingsError(
                f"SKILLOP_LEASE_RENEW_DEADLINE_SECONDS={self.renew_deadline_seconds:g} must be"
                f" above SKILLOP_LEASE_RETRY_SECONDS={self.retry_seconds:g}")

    @classmethod
    def from_env(cls) -> LeaseConfig:
        return cls(
            enabled=_bool("SKILLOP_LEADER_ELECTION", default=True),
            name=_raw("SKILLOP_LEASE_NAME") or "skillop",
            namespace=_raw("SKILLOP_LEASE_NAMESPACE") or _pod_namespace(),
            identity=_raw("SKILLOP_LEASE_IDENTITY") or _identity(),
            duration_seconds=_float("SKILLOP_LEASE_DURATION_SECONDS", 15.0),
            renew_deadline_seconds=_float("SKILLOP_LEASE_RENEW_DEADLINE_SECONDS", 10.0),
            retry_seconds=_float("SKILLOP_LEASE_RETRY_SECONDS", 1.0),
        )


@dataclass(frozen=True)
class OperatorConfig:
    #: Namespaces to watch; empty means all (cluster-wide).
    namespaces: tuple[str, ...] = ()
    #: List url MCP servers live; off: declared tools only, no connection made.
    mcp_discovery: bool = True
    #: Host globs the operator may contact for MCP discovery.
    mcp_allow: tuple[str, ...] = DEFAULT_EGRESS_PATTERNS
    #: PEM file of CA certificates every MCP discovery trusts besides the system's
    #: (a company's private CA); a server's own ``tls`` bundle adds to it.
    mcp_ca_file: str | None = None
    #: Default MCP refresh period (a Skill's refreshInterval overrides it).
    mcp_refresh_seconds: float = 300.0
    #: Full resync of every Skill and Actor (the reconciler's own timer).
    resync_seconds: float = 300.0
    #: How long to gather changes into one batch before resolving.
    debounce_seconds: float = 0.05
    #: Concurrent API writes.
    write_concurrency: int = 16
    log_level: str = "INFO"
    #: The health server: ``http://host:port/path`` of the liveness probe; /metrics
    #: is served on the same port. Empty: no health server.
    liveness: str = field(default="")
    lease: LeaseConfig = field(default_factory=LeaseConfig)
    #: Serve the validating admission webhook (Skills and Actors).
    webhook: bool = False
    webhook_port: int = 9443
    #: TLS certificate and key files (e.g. from cert-manager); unset: self-signed.
    webhook_cert: str | None = None
    webhook_key: str | None = None
    #: CA bundle for the managed webhook configuration (default: the certificate).
    webhook_ca: str | None = None
    #: Let kopf create and maintain the ValidatingWebhookConfiguration.
    webhook_managed: bool = False
    #: Hostname the API server uses to reach the webhook (managed mode).
    webhook_host: str | None = None
    #: Serve the mutating webhook that injects the gateway into actor pods, and
    #: watch those pods (docs/gateway.md, Injection).
    injection: bool = False
    sidecar: SidecarSettings = field(default_factory=SidecarSettings)

    @property
    def serves_webhooks(self) -> bool:
        """Whether the HTTPS admission server runs (validating, mutating or both)."""
        return self.webhook or self.injection

    @classmethod
    def from_env(cls) -> OperatorConfig:
        """The settings; raises ``SettingsError`` for a value that does not parse."""
        return cls(
            namespaces=_list("SKILLOP_NAMESPACES"),
            mcp_discovery=_bool("SKILLOP_MCP_DISCOVERY", default=True),
            mcp_allow=_list("SKILLOP_MCP_ALLOW", DEFAULT_EGRESS_PATTERNS),
            mcp_ca_file=os.environ.get("SKILLOP_MCP_CA_FILE") or None,
            mcp_refresh_seconds=_float("SKILLOP_MCP_REFRESH_SECONDS", 300.0),
            resync_seconds=_float("SKILLOP_RESYNC_SECONDS", 300.0),
            debounce_seconds=_float("SKILLOP_DEBOUNCE_SECONDS", 0.05, zero=True),
            write_concurrency=_int("SKILLOP_WRITE_CONCURRENCY", 16, maximum=1024),
            log_level=_level("SKILLOP_LOG_LEVEL"),
            liveness=_endpoint("SKILLOP_LIVENESS"),
            lease=LeaseConfig.from_env(),
            webhook=_bool("SKILLOP_WEBHOOK"),
            webhook_port=_int("SKILLOP_WEBHOOK_PORT", 9443),
            webhook_cert=os.environ.get("SKILLOP_WEBHOOK_CERT") or None,
            webhook_key=os.environ.get("SKILLOP_WEBHOOK_KEY") or None,
            webhook_ca=os.environ.get("SKILLOP_WEBHOOK_CA") or None,
            webhook_managed=_bool("SKILLOP_WEBHOOK_MANAGED"),
            webhook_host=os.environ.get("SKILLOP_WEBHOOK_HOST") or None,
            injection=_bool("SKILLOP_INJECTION"),
            sidecar=sidecar_from_env(),
        )
