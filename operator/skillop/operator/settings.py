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


@dataclass(frozen=True)
class OperatorConfig:
    #: Namespaces to watch; empty means all (cluster-wide).
    namespaces: tuple[str, ...] = ()
    #: Host globs the operator may contact for MCP discovery.
    mcp_allow: tuple[str, ...] = DEFAULT_MCP_ALLOW
    #: Default MCP refresh period (a Skill's refreshInterval overrides it).
    mcp_refresh_seconds: float = 300.0
    #: Full resync of every Skill and Actor (kopf timer).
    resync_seconds: float = 300.0
    #: How long to gather changes into one batch before resolving.
    debounce_seconds: float = 0.05
    #: Concurrent API writes.
    write_concurrency: int = 16
    log_level: str = "INFO"
    liveness: str = field(default="")

    @classmethod
    def from_env(cls) -> OperatorConfig:
        return cls(
            namespaces=_list("SKILLOP_NAMESPACES"),
            mcp_allow=_list("SKILLOP_MCP_ALLOW", DEFAULT_MCP_ALLOW),
            mcp_refresh_seconds=_float("SKILLOP_MCP_REFRESH_SECONDS", 300.0),
            resync_seconds=_float("SKILLOP_RESYNC_SECONDS", 300.0),
            debounce_seconds=_float("SKILLOP_DEBOUNCE_SECONDS", 0.05),
            write_concurrency=int(_float("SKILLOP_WRITE_CONCURRENCY", 16)),
            log_level=os.environ.get("SKILLOP_LOG_LEVEL", "INFO").upper(),
            liveness=os.environ.get("SKILLOP_LIVENESS", ""),
        )
