"""The gateway's settings: one object for the process, built where its flags are
read (``command.gateway_command``) and passed down.

The upstreams' part (``upstream``: where Secrets and CA bundles are mounted, which
hosts may be contacted, how links connect and relist) is the pool's own
``upstream.Settings``, nested whole; the rest is the gateway's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillop.gateway.secrets import DEFAULT_CONFIGMAPS_DIR
from skillop.gateway.transport.base import CONNECT_TIMEOUT_SECONDS
from skillop.gateway.upstream import Settings
from skillop.model.settings import API_DIR, GATEWAY_RELIST_INTERVAL
from skillop.sources.egress import EgressGuard


@dataclass(frozen=True, slots=True)
class Options:
    """Where the mounts are and how the gateway behaves (``skillop gateway`` flags)."""

    toolset_dir: Path
    #: How the upstreams are reached (the pool's settings, whole).
    upstream: Settings
    poll_interval: float = 1.0
    default_timeout: float = 60.0
    #: An HTTP session nothing was asked in for this long is ended (as the SDK would).
    session_idle_timeout: float = 30 * 60.0
    #: The front answers one-shot requests itself (off: the SDK's server answers
    #: every request, the reference the fast path is tested against).
    fast_path: bool = True
    #: Seconds a request has to arrive whole, headers and body (``--request-timeout``).
    request_timeout: float = 10.0
    #: ``search_tools``: rank with the sentence model when it is installed (off:
    #: lexical only), and where its vectors are cached (None: in memory only).
    semantic_search: bool = True
    search_cache_dir: Path | None = None
    #: Where Prometheus scrapes ``/metrics`` (``--metrics-listen``; None: no metrics).
    metrics_listen: str | None = None

    @classmethod
    def build(cls, *, toolset_dir: Path, secrets_dir: Path, allow: tuple[str, ...],
              configmaps_dir: Path = DEFAULT_CONFIGMAPS_DIR, ca_file: Path | None = None,
              connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
              relist_interval: float = GATEWAY_RELIST_INTERVAL.default,
              api_dir: Path = Path(API_DIR.default), **gateway: Any) -> Options:
        """The options from the flags' values: the upstreams' ones into ``upstream``
        (``allow``: the egress allow-list; ``relist_interval``: upstreams are listed
        again at least this often; ``api_dir``: the projected ServiceAccount token,
        CA and namespace, for approval requests); ``gateway``: this class's own
        fields."""
        return cls(toolset_dir=toolset_dir, upstream=Settings(
            secrets_dir, EgressGuard(allow), connect_timeout, configmaps_dir, ca_file,
            relist_interval=relist_interval, api_dir=api_dir), **gateway)

    @property
    def api_dir(self) -> Path:
        """Where the projected ServiceAccount token is (approval requests)."""
        return self.upstream.api_dir or Path(API_DIR.default)
