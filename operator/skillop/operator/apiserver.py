"""Which API server this process talks to, and whether it answers: one line either way.

``skillop operator`` and the CLI's ``--cluster`` call ``reach`` before anything
else. Without it, a missing kubeconfig or an unreachable server was a chain of
tracebacks and a retry every minute for ever (kopf's login activity), or the
client's own retries dumped as ``MaxRetryError``. ``reach`` tries once, with a
short timeout and no retries, and says what it tried (in-cluster, or which
kubeconfig, context and server) and why that failed.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from typing import Any

from skillop.sources.mcp_discovery import one_line

#: The exit status of a command that could not use the cluster (``skillop operator``,
#: ``--cluster``, approvals): an outage, never a problem of the input (docs/api.md).
EXIT_UNREACHABLE = 3
#: How long the start-up probe waits for the API server's answer.
PROBE_TIMEOUT_SECONDS = 5.0


class Unreachable(Exception):
    """The cluster cannot be used; ``str`` is one line: what was tried, and why not."""


@dataclass(frozen=True)
class Target:
    """The API server a loaded configuration points at, said for people."""

    source: str  # "in-cluster" or "kubeconfig PATH, context NAME"
    server: str
    #: The context's namespace, which kubectl takes for names without one.
    namespace: str = "default"

    def __str__(self) -> str:
        return f"{self.source}, server {self.server}" if self.server else self.source


def load(*, kubeconfig: str | None = None, context: str | None = None) -> Target:
    """Load the client's configuration as the operator does (in-cluster first, then
    the kubeconfig; a kubeconfig or context named as kubectl's flags are only that)
    and say which it is; raises ``Unreachable`` when there is none."""
    import kubernetes  # only the modules that talk to the cluster load the client

    config: Any = kubernetes.config
    in_cluster = ""
    if kubeconfig is None and context is None:  # as ``Kube``: in-cluster first
        try:
            config.load_incluster_config()
        except config.ConfigException as err:
            unset = "host/port is not set" in str(err)
            in_cluster = ("not in a pod (KUBERNETES_SERVICE_HOST is unset)" if unset
                          else f"in-cluster: {one_line(str(err))}")
        else:
            return Target("in-cluster", _host())
    path = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    try:
        config.load_kube_config(config_file=kubeconfig, context=context)
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    except (config.ConfigException, OSError, ValueError, TypeError, KeyError) as err:
        tried = f"{in_cluster}; " if in_cluster else ""
        raise Unreachable(f"no cluster configuration: {tried}kubeconfig {path}:"
                          f" {_config_reason(err)}") from None
    chosen = (next((c for c in contexts or [] if c.get("name") == context), None)
              if context else active) or {}
    name = str(chosen.get("name") or "")
    source = f"kubeconfig {path}" + (f", context {name}" if name else "")
    namespace = str((chosen.get("context") or {}).get("namespace") or "default")
    return Target(source, _host(), namespace)


def reach(*, kubeconfig: str | None = None, context: str | None = None,
          timeout: float = PROBE_TIMEOUT_SECONDS) -> Target:
    """``load``, then ask the API server its version once (no retries); the target,
    or ``Unreachable`` naming it and the reason: no answer, or credentials refused."""
    import kubernetes

    target = load(kubeconfig=kubeconfig, context=context)
    configuration = kubernetes.client.Configuration.get_default_copy()
    configuration.retries = 0  # one attempt: the answer is for a person, now
    api: Any = kubernetes.client.ApiClient(configuration)
    try:
        kubernetes.client.VersionApi(api).get_code(_request_timeout=timeout)
    except kubernetes.client.ApiException as err:
        # An answer: the server is there. Only refused credentials stop the start
        # (another status, 404 from a server without /version, is for later calls).
        if err.status in (401, 403):
            raise Unreachable(f"{target}: {reason(err, timeout=timeout)}") from None
    except Exception as err:  # refused, timed out, TLS: said the same way
        raise Unreachable(f"{target}: {reason(err, timeout=timeout)}") from None
    finally:
        api.close()
    return target


def _host() -> str:
    import kubernetes

    return str(kubernetes.client.Configuration.get_default_copy().host or "")


def _config_reason(err: BaseException) -> str:
    text = one_line(str(err))
    if "No configuration found" in text or isinstance(err, FileNotFoundError):
        return "not found or empty"
    return text or type(err).__name__


def reason(err: BaseException, *, timeout: float = PROBE_TIMEOUT_SECONDS) -> str:
    """Why a request to the API server failed, in a few words: the innermost cause
    (connection refused, a name that does not resolve, a certificate), or the
    server's own status; never urllib3's wrapper text."""
    status = getattr(err, "status", None)
    if isinstance(status, int) and status:
        return f"the API server answered {status} {getattr(err, 'reason', '') or ''}".rstrip()
    for cause in _causes(err):
        if isinstance(cause, ssl.SSLError):
            return f"TLS: {one_line(getattr(cause, 'reason', None) or str(cause))}"
        if isinstance(cause, TimeoutError) and "timed out" in str(cause).lower():
            return f"no answer within {timeout:g} s"
        strerror = getattr(cause, "strerror", None)
        if isinstance(cause, OSError) and strerror:
            return str(strerror).lower()
    return one_line(f"{type(err).__name__}: {err}")


def _causes(err: BaseException) -> list[BaseException]:
    """``err`` and what it wraps (urllib3's ``reason``, ``__cause__``, ``__context__``),
    innermost first."""
    seen: list[BaseException] = []
    todo: list[BaseException] = [err]
    while todo:
        current = todo.pop()
        if any(current is s for s in seen):
            continue
        seen.append(current)
        todo += [e for e in (getattr(current, "reason", None), current.__cause__,
                             current.__context__) if isinstance(e, BaseException)]
    return seen[::-1]
