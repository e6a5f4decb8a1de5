"""Operator settings, from environment variables (the Helm chart sets them)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

DEFAULT_MCP_ALLOW = ("*.svc", "*.svc.cluster.local")


def _list(name: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def _bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    return raw.strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class OperatorConfig:
    #: Namespaces to watch; empty means all (cluster-wide).
    namespaces: tuple[str, ...] = ()
    #: List url MCP servers live; off: declared tools only, no connection made.
    mcp_discovery: bool = True
    #: Host globs the operator may contact for MCP discovery.
    mcp_allow: tuple[str, ...] = DEFAULT_MCP_ALLOW
    #: Default MCP refresh period (a Skill's refreshInterval overrides it).
    mcp_refresh_seconds: float = 300.0
    #: Full resync of every Skill and Actor (the reconciler's own timer).
    resync_seconds: float = 300.0
    #: How long to gather changes into one batch before resolving.
    debounce_seconds: float = 0.05
    #: Concurrent API writes.
    write_concurrency: int = 16
    log_level: str = "INFO"
    liveness: str = field(default="")
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

    @classmethod
    def from_env(cls) -> OperatorConfig:
        return cls(
            namespaces=_list("SKILLOP_NAMESPACES"),
            mcp_discovery=_bool("SKILLOP_MCP_DISCOVERY", default=True),
            mcp_allow=_list("SKILLOP_MCP_ALLOW", DEFAULT_MCP_ALLOW),
            mcp_refresh_seconds=_float("SKILLOP_MCP_REFRESH_SECONDS", 300.0),
            resync_seconds=_float("SKILLOP_RESYNC_SECONDS", 300.0),
            debounce_seconds=_float("SKILLOP_DEBOUNCE_SECONDS", 0.05),
            write_concurrency=int(_float("SKILLOP_WRITE_CONCURRENCY", 16)),
            log_level=os.environ.get("SKILLOP_LOG_LEVEL", "INFO").upper(),
            liveness=os.environ.get("SKILLOP_LIVENESS", ""),
            webhook=_bool("SKILLOP_WEBHOOK"),
            webhook_port=int(_float("SKILLOP_WEBHOOK_PORT", 9443)),
            webhook_cert=os.environ.get("SKILLOP_WEBHOOK_CERT") or None,
            webhook_key=os.environ.get("SKILLOP_WEBHOOK_KEY") or None,
            webhook_ca=os.environ.get("SKILLOP_WEBHOOK_CA") or None,
            webhook_managed=_bool("SKILLOP_WEBHOOK_MANAGED"),
            webhook_host=os.environ.get("SKILLOP_WEBHOOK_HOST") or None,
        )
