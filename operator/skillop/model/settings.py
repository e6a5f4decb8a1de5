"""Every ``SKILLOP_*`` environment variable, declared once: name, default, parser, meaning.

The operator (``operator.settings``), the gateway (``gateway.command``) and the
injector's sidecar settings read their variables through these declarations
(as kopf's configuration is one table of settings), and the reference tables
of docs/install.md and docs/gateway.md are rendered from them
(``settings_table``; a test fails when the docs drift), as is the check that the
chart's values.yaml defaults are the code's.

One rule for every variable: **unset or blank means the default**. A value that
is set but does not parse is a ``SettingsError`` (one line naming the variable):
silently falling back to the default would run with a setting nobody chose.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from skillop.model.hostpatterns import HostPattern
from skillop.model.shardselector import LabelSelector

T = TypeVar("T")

#: The one default allow-list of MCP hosts: cluster-internal Services only.
DEFAULT_EGRESS_PATTERNS: Final[tuple[str, ...]] = ("*.svc", "*.svc.cluster.local")
LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
PULL_POLICIES: Final = ("Always", "IfNotPresent", "Never")
#: The gateway's loopback port (``skillop gateway --listen`` and the injected sidecar).
GATEWAY_PORT: Final = 8765
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

Resources = tuple[tuple[str, str], ...]


class SettingsError(ValueError):
    """A setting that is set but does not parse; the message names the variable."""


@dataclass(frozen=True, slots=True)
class Setting(Generic[T]):
    """One environment variable."""

    env: str
    default: T
    #: ``parse(env, raw)`` with ``raw`` stripped and not empty; raises ``SettingsError``.
    parse: Callable[[str, str], T]
    #: What it does, as the docs' tables say it.
    description: str
    #: Who reads it: ``operator`` (docs/install.md) or ``gateway`` (docs/gateway.md).
    reader: str = "operator"
    #: The default as the docs show it, when the value itself says it badly.
    shown: str | None = None
    #: The chart value that sets it (a dotted path in values.yaml), if any.
    helm: str | None = None
    #: The gateway's command-line flag that overrides it, if any.
    flag: str | None = None

    def read(self, environ: Mapping[str, str] | None = None) -> T:
        """The value in ``environ`` (default: the process's), or the default."""
        found = self.read_set(environ)
        return self.default if found is None else found

    def read_set(self, environ: Mapping[str, str] | None = None) -> T | None:
        """The value when the variable is set (and not blank), else None."""
        raw = (os.environ if environ is None else environ).get(self.env)
        if raw is None or not raw.strip():
            return None
        return self.parse(self.env, raw.strip())

    @property
    def default_text(self) -> str:
        """The default, as the docs' tables spell it."""
        if self.shown is not None:
            return self.shown
        value: object = self.default
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, tuple):
            return ",".join(str(v) for v in value) or "empty"
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return "unset" if value is None or value == "" else str(value)


# -- parsers: (variable, raw) -> value ---------------------------------------------
def text(env: str, raw: str) -> str:
    return raw


def optional_text(env: str, raw: str) -> str | None:
    return raw


def items(env: str, raw: str) -> tuple[str, ...]:
    """Comma-separated items (blanks dropped)."""
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def globs(env: str, raw: str) -> tuple[str, ...]:
    """Comma-separated host globs; a value naming none is refused, not read as "none"."""
    found = items(env, raw)
    if not found:
        raise SettingsError(f"{env}={raw!r} names no host glob")
    return found


def host_patterns(env: str, raw: str) -> tuple[str, ...]:
    """``globs`` that are each an egress pattern (``model.hostpatterns``)."""
    found = globs(env, raw)
    for pattern in found:
        try:
            HostPattern.parse(pattern)
        except ValueError as exc:
            raise SettingsError(f"{env}: {exc}") from None
    return found


def host_pattern(env: str, raw: str) -> str:
    """One egress pattern (a flag's value), as written."""
    try:
        HostPattern.parse(raw)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    return raw


def label_selector(env: str, raw: str) -> LabelSelector:
    """A namespace label selector (``model.shardselector``)."""
    try:
        return LabelSelector.parse(raw)
    except ValueError as exc:
        raise SettingsError(f"{env}: {exc}") from None


def manifest_path(env: str, raw: str) -> str:
    """A file, a directory or ``-`` (a flag's value): an empty one would read the
    current directory without saying so."""
    if not raw.strip():
        raise SettingsError("an empty path (give a file, a directory or - for stdin)")
    return raw


def flag_type(parse: Callable[[str, str], T]) -> Callable[[str], T]:
    """``parse`` as an argparse ``type``: a value it refuses is the flag's one usage
    line (exit 2), its reason said, not argparse's bare "invalid value"."""
    def convert(raw: str) -> T:
        try:
            return parse("value", raw)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return convert


def boolean(env: str, raw: str) -> bool:
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise SettingsError(f"{env}={raw!r} is not a boolean (true/false, yes/no, 1/0, on/off)")


def seconds(*, zero: bool = False) -> Callable[[str, str], float]:
    """A finite number of seconds above zero (or zero too, with ``zero``)."""
    def parse(env: str, raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise SettingsError(f"{env}={raw!r} is not a number") from None
        if not (0 <= value < math.inf) or (value == 0 and not zero):
            least = "zero or more" if zero else "above zero"
            raise SettingsError(f"{env}={raw!r} must be a finite number {least}")
        return value
    return parse


def whole(*, minimum: int = 1, maximum: int = 65535) -> Callable[[str, str], int]:
    def parse(env: str, raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise SettingsError(f"{env}={raw!r} is not a whole number") from None
        if not minimum <= value <= maximum:
            raise SettingsError(f"{env}={raw!r} must be between {minimum} and {maximum}")
        return value
    return parse


def one_of(choices: Sequence[str], *, upper: bool = False) -> Callable[[str, str], str]:
    def parse(env: str, raw: str) -> str:
        value = raw.upper() if upper else raw
        if value not in choices:
            raise SettingsError(f"{env}={value!r} is not one of {', '.join(choices)}")
        return value
    return parse


def endpoint(env: str, raw: str) -> str:
    """``http://HOST:PORT/PATH`` (the health server)."""
    parts = urllib.parse.urlsplit(raw)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or port is None:
        raise SettingsError(f"{env}={raw!r} is not an http://HOST:PORT/PATH address")
    return raw


_RESOURCE_PARTS = ("requests", "limits")


def resources(env: str, raw: str) -> dict[str, Resources]:
    """``{"requests": {...}, "limits": {...}}`` as JSON (the chart's toJson), each a
    map of resource name to quantity string; an absent part is absent here."""
    try:
        value = json.loads(raw)
    except ValueError:
        raise SettingsError(f"{env} is not JSON") from None
    if not isinstance(value, dict) or set(value) - set(_RESOURCE_PARTS):
        raise SettingsError(f"{env} must be an object with requests and/or limits")
    out: dict[str, Resources] = {}
    for part in _RESOURCE_PARTS:
        table = value.get(part)
        if table is None:
            continue
        if not isinstance(table, dict) or not all(
                isinstance(v, (str, int)) and not isinstance(v, bool) for v in table.values()):
            raise SettingsError(f"{env}: {part} must map resource names to quantities")
        out[part] = tuple(sorted((str(k), str(v)) for k, v in table.items()))
    return out


# -- the operator -------------------------------------------------------------------
NAMESPACES: Setting[tuple[str, ...]] = Setting(
    "SKILLOP_NAMESPACES", (), items,
    "namespaces to watch, comma-separated; empty: all (cluster-wide)",
    helm="namespaces", shown="empty (all)")
MCP_DISCOVERY = Setting("SKILLOP_MCP_DISCOVERY", True, boolean,
                        "list `url` MCP servers live; `false`: declared tools only, no"
                        " connection made", helm="mcp.discovery")
MCP_ALLOW = Setting("SKILLOP_MCP_ALLOW", DEFAULT_EGRESS_PATTERNS, host_patterns,
                    "host globs (comma-separated) MCP discovery and the gateway may contact;"
                    " blank means the default (`SKILLOP_MCP_DISCOVERY=false` contacts none)",
                    helm="mcp.allow", flag="--allow")
MCP_CA_FILE: Setting[str | None] = Setting("SKILLOP_MCP_CA_FILE", None, optional_text,
                                  "PEM file of CA certificates every MCP connection trusts"
                                  " besides the system's", flag="--ca-file")
MCP_REFRESH_SECONDS = Setting("SKILLOP_MCP_REFRESH_SECONDS", 300.0, seconds(),
                              "default MCP refresh period (a Skill's `refreshInterval`"
                              " overrides it)", helm="mcp.refreshSeconds")
RESYNC_SECONDS = Setting("SKILLOP_RESYNC_SECONDS", 300.0, seconds(),
                         "full resync of every Skill and Actor", helm="resyncSeconds")
DEBOUNCE_SECONDS = Setting("SKILLOP_DEBOUNCE_SECONDS", 0.05, seconds(zero=True),
                           "how long changes are gathered into one batch before resolving")
WRITE_CONCURRENCY = Setting("SKILLOP_WRITE_CONCURRENCY", 32, whole(maximum=1024),
                            "concurrent API writes")
STALE_PART_SECONDS = Setting(
    "SKILLOP_STALE_PART_SECONDS", 120.0, seconds(zero=True),
    "how long a part of a packed tool set that no index names any more is kept before it"
    " is deleted (a pod whose kubelet still shows the index before reads it meanwhile)")
LOG_LEVEL = Setting("SKILLOP_LOG_LEVEL", "INFO", one_of(LOG_LEVELS, upper=True),
                    "`DEBUG`, `INFO`, `WARNING`, `ERROR` or `CRITICAL`", helm="logLevel")
LIVENESS = Setting("SKILLOP_LIVENESS", "", endpoint,
                   "`http://HOST:PORT/PATH` of the liveness probe (`/metrics` on the same"
                   " port); unset: no health server")
LEADER_ELECTION = Setting("SKILLOP_LEADER_ELECTION", True, boolean,
                          "`false`: this process writes without a Lease (one replica only)",
                          helm="leaderElection.enabled")
LEASE_NAME = Setting("SKILLOP_LEASE_NAME", "skillop", text, "the Lease's name")
LEASE_NAMESPACE: Setting[str | None] = Setting("SKILLOP_LEASE_NAMESPACE", None, optional_text,
                                      "the Lease's namespace", shown="the pod's namespace")
LEASE_IDENTITY: Setting[str | None] = Setting("SKILLOP_LEASE_IDENTITY", None, optional_text,
                                     "the Lease's `holderIdentity`",
                                     shown="`$POD_NAME` (or the host name) + `_` + a random"
                                     " suffix")
LEASE_DURATION_SECONDS = Setting("SKILLOP_LEASE_DURATION_SECONDS", 15.0, seconds(),
                                 "a crashed leader's successor takes over after this; must be"
                                 " above the renew deadline",
                                 helm="leaderElection.leaseDurationSeconds")
LEASE_RENEW_DEADLINE_SECONDS = Setting("SKILLOP_LEASE_RENEW_DEADLINE_SECONDS", 10.0, seconds(),
                                       "a leader that cannot renew this long stops writing;"
                                       " must be above the retry period",
                                       helm="leaderElection.renewDeadlineSeconds")
LEASE_RETRY_SECONDS = Setting("SKILLOP_LEASE_RETRY_SECONDS", 1.0, seconds(),
                              "how often the leader renews and standbys look",
                              helm="leaderElection.retryPeriodSeconds")
SHARD_SELECTOR = Setting("SKILLOP_SHARD_SELECTOR", LabelSelector(), label_selector,
                         "the namespaces this installation writes (a label selector, e.g."
                         " `skillop.dev/shard=a`); it reads every namespace; unset: all",
                         shown="all namespaces", helm="shard.namespaceSelector")
SHARD_CLUSTER_OWNER = Setting("SKILLOP_SHARD_CLUSTER_OWNER", True, boolean,
                              "this installation writes the status of cluster-scoped objects"
                              " (exactly one shard may)", helm="shard.clusterOwner")
WEBHOOK = Setting("SKILLOP_WEBHOOK", False, boolean, "serve the validating admission webhook",
                  helm="webhook.enabled")
WEBHOOK_PORT = Setting("SKILLOP_WEBHOOK_PORT", 9443, whole(),
                       "the webhooks' HTTPS port (listens on `0.0.0.0`)", helm="webhook.port")
WEBHOOK_CERT: Setting[str | None] = Setting("SKILLOP_WEBHOOK_CERT", None, optional_text,
                                   "TLS certificate file; unset (with the key): self-signed")
WEBHOOK_KEY: Setting[str | None] = Setting("SKILLOP_WEBHOOK_KEY", None, optional_text,
                                  "TLS key file")
WEBHOOK_CA: Setting[str | None] = Setting("SKILLOP_WEBHOOK_CA", None, optional_text,
                                 "CA bundle for the managed configuration (default: the"
                                 " certificate)")
WEBHOOK_MANAGED = Setting("SKILLOP_WEBHOOK_MANAGED", False, boolean,
                          "let kopf create and patch the `ValidatingWebhookConfiguration`")
WEBHOOK_HOST: Setting[str | None] = Setting("SKILLOP_WEBHOOK_HOST", None, optional_text,
                                   "host name the API server uses to reach the webhook"
                                   " (managed mode)")
INJECTION = Setting("SKILLOP_INJECTION", False, boolean,
                    "serve the mutating webhook that injects the gateway into actor pods"
                    " (the chart's `injection.enabled` turns it on by default)")
INJECT_IMAGE: Setting[str | None] = Setting("SKILLOP_INJECT_IMAGE", None, optional_text,
                                   "the injected gateway's image",
                                   shown="`ghcr.io/skillop/skillop:<version>`")
INJECT_PULL_POLICY = Setting("SKILLOP_INJECT_PULL_POLICY", "IfNotPresent",
                             one_of(PULL_POLICIES), "the injected gateway's `imagePullPolicy`",
                             helm="injection.image.pullPolicy")
INJECT_PORT = Setting("SKILLOP_INJECT_PORT", GATEWAY_PORT, whole(),
                      "the injected gateway's loopback port", helm="injection.port")
INJECT_METRICS_PORT: Setting[int | None] = Setting(
    "SKILLOP_INJECT_METRICS_PORT", None, whole(),
    "the injected gateway's Prometheus metrics port, on the pod's IP (its"
    " `SKILLOP_GATEWAY_METRICS_LISTEN`, container port `skillop-metrics`, which the chart's"
    " PodMonitor scrapes; unset: no metrics)", helm="injection.metricsPort")
INJECT_RESOURCES: Setting[dict[str, Resources]] = Setting(
    "SKILLOP_INJECT_RESOURCES",
    {"requests": (("cpu", "50m"), ("memory", "64Mi")), "limits": (("memory", "512Mi"),)},
    resources,
    "the injected gateway's resources, JSON `{\"requests\": {...}, \"limits\": {...}}`;"
    " an absent part keeps its default", shown="requests 50m/64Mi, limits 512Mi",
    helm="injection.resources")
SECRETS_READABLE = Setting("SKILLOP_SECRETS_READABLE", False, boolean,
                           "the operator may `get` Secrets (the chart grants it with"
                           " `mcp.headersFromSecrets`): it then checks that the Secrets each"
                           " Actor's set names exist in its namespace (`CredentialsReady`)",
                           helm="mcp.headersFromSecrets")

# -- the gateway (`skillop gateway`; a flag overrides its variable) -------------------
TOOLSET_DIR = Setting("SKILLOP_TOOLSET_DIR", "/etc/skillop", text,
                      "the mounted Actor ConfigMap", reader="gateway", flag="--toolset-dir")
SECRETS_DIR = Setting("SKILLOP_SECRETS_DIR", "/var/run/skillop/secrets", text,
                      "mounted Secrets, one directory each, named after the Secret",
                      reader="gateway", flag="--secrets-dir")
CONFIGMAPS_DIR = Setting("SKILLOP_CONFIGMAPS_DIR", "/var/run/skillop/configmaps", text,
                         "mounted ConfigMaps holding servers' CA bundles"
                         " (`tls.caConfigMapRef`), one directory each", reader="gateway",
                         flag="--configmaps-dir")
API_DIR = Setting("SKILLOP_API_DIR", "/var/run/secrets/skillop.dev/api", text,
                  "the projected ServiceAccount token, `ca.crt` and `namespace` the gateway"
                  " asks for approvals with (ToolCallApproval)", reader="gateway",
                  flag="--api-dir")
GATEWAY_LISTEN = Setting("SKILLOP_GATEWAY_LISTEN", f"127.0.0.1:{GATEWAY_PORT}", text,
                         "streamable HTTP at `http://HOST:PORT/mcp` (port 0 picks one)",
                         reader="gateway", flag="--listen")
GATEWAY_POLL = Setting("SKILLOP_GATEWAY_POLL", 1.0, seconds(),
                       "how often, in seconds, to look for new mounts", reader="gateway",
                       flag="--poll")
GATEWAY_TIMEOUT = Setting("SKILLOP_GATEWAY_TIMEOUT", 60.0, seconds(),
                          "per-call limit in seconds for tools without `timeoutSeconds`",
                          reader="gateway", flag="--default-timeout")
GATEWAY_RELIST_INTERVAL = Setting(
    "SKILLOP_GATEWAY_RELIST_INTERVAL", 30.0, seconds(),
    "how often, in seconds, every upstream's tools are listed again at least (a definition"
    " changed without `list_changed` is refused within it)", reader="gateway",
    flag="--relist-interval")
GATEWAY_REQUEST_TIMEOUT = Setting(
    "SKILLOP_GATEWAY_REQUEST_TIMEOUT", 10.0, seconds(),
    "seconds an HTTP request has to arrive whole, headers and body (later: `408`, and"
    " its connection closed)", reader="gateway", flag="--request-timeout")
GATEWAY_METRICS_LISTEN: Setting[str | None] = Setting(
    "SKILLOP_GATEWAY_METRICS_LISTEN", None, optional_text,
    "Prometheus metrics at `http://HOST:PORT/metrics`, a port of their own (unset: no"
    " metrics; docs/operations.md)", reader="gateway", flag="--metrics-listen",
    shown="none")
SEARCH_CACHE_DIR = Setting(
    "SKILLOP_SEARCH_CACHE_DIR", "/tmp/skillop-search", text,
    "where `search_tools`' sentence vectors are cached by digest (an `emptyDir` keeps them"
    " across restarts of the gateway's container; not writable: kept in memory only)",
    reader="gateway", flag="--search-cache-dir")

#: Every setting, in the docs' order.
SETTINGS: Final[tuple[Setting[Any], ...]] = (
    NAMESPACES, MCP_DISCOVERY, MCP_ALLOW, MCP_CA_FILE, MCP_REFRESH_SECONDS, RESYNC_SECONDS,
    DEBOUNCE_SECONDS, WRITE_CONCURRENCY, STALE_PART_SECONDS,
    LOG_LEVEL, LIVENESS, LEADER_ELECTION, LEASE_NAME,
    LEASE_NAMESPACE, LEASE_IDENTITY, LEASE_DURATION_SECONDS, LEASE_RENEW_DEADLINE_SECONDS,
    LEASE_RETRY_SECONDS, SHARD_SELECTOR, SHARD_CLUSTER_OWNER, WEBHOOK, WEBHOOK_PORT,
    WEBHOOK_CERT, WEBHOOK_KEY, WEBHOOK_CA, WEBHOOK_MANAGED, WEBHOOK_HOST, INJECTION,
    INJECT_IMAGE, INJECT_PULL_POLICY, INJECT_PORT, INJECT_METRICS_PORT, INJECT_RESOURCES,
    SECRETS_READABLE,
    # The gateway's own, then the operator's that it reads too.
    TOOLSET_DIR, SECRETS_DIR, CONFIGMAPS_DIR, API_DIR, GATEWAY_LISTEN, GATEWAY_POLL,
    GATEWAY_TIMEOUT, GATEWAY_RELIST_INTERVAL, GATEWAY_REQUEST_TIMEOUT, SEARCH_CACHE_DIR,
    GATEWAY_METRICS_LISTEN,
)
#: The operator's settings that the gateway reads as well (its ``--allow`` and
#: ``--ca-file`` defaults).
GATEWAY_SHARED: Final[tuple[Setting[Any], ...]] = (MCP_CA_FILE, MCP_ALLOW)


def settings_table(reader: str) -> str:
    """The Markdown reference table of ``reader``'s settings (docs/install.md for
    the operator, docs/gateway.md for the gateway)."""
    if reader == "gateway":
        rows = [s for s in SETTINGS if s.reader == "gateway"] + list(GATEWAY_SHARED)
        lines = ["| flag | variable | default | meaning |", "|---|---|---|---|"]
        lines += [f"| {f'`{s.flag}`' if s.flag else ''} | `{s.env}` | {_shown(s)}"
                  f" | {s.description} |" for s in rows]
    else:
        lines = ["| variable | default | chart value | meaning |", "|---|---|---|---|"]
        lines += [f"| `{s.env}` | {_shown(s)} | {f'`{s.helm}`' if s.helm else ''}"
                  f" | {s.description} |" for s in SETTINGS if s.reader == reader]
    return "\n".join(lines) + "\n"


def _shown(setting: Setting[Any]) -> str:
    """The default, in code style when it is a literal value."""
    literal = setting.shown is None and setting.default not in (None, "")
    return f"`{setting.default_text}`" if literal else setting.default_text
