"""What a call to the Kubernetes API may fail with, and the API server's words for it."""

from __future__ import annotations

import json
from typing import Any

import urllib3

#: Network failures, all transient: OSError (refused, reset, timeout) and urllib3's
#: own, which are not OSErrors (MaxRetryError once its retries are spent with the
#: API server down, ProtocolError for a connection dropped mid-response).
TRANSIENT: tuple[type[Exception], ...] = (OSError, urllib3.exceptions.HTTPError)


class WriteFailed(Exception):
    """A write still failing after the retries; the caller re-queues the object."""


class Gone(WriteFailed):
    """A write to an object that no longer exists (HTTP 404), or into a namespace
    being deleted (HTTP 403, cause NamespaceTerminating): not retried."""


class Refused(WriteFailed):
    """A write the API server refused for good (HTTP 400 or 422: invalid, e.g. a
    ConfigMap over its size limit): the same body would be refused again, so it is
    not retried. ``message`` is the API server's own, on one line."""

    def __init__(self, what: str, status: int, message: str) -> None:
        super().__init__(f"{what}: HTTP {status}: {message}")
        self.status, self.message = status, message


#: What the API server answers for a body it will never accept.
REFUSED = frozenset({400, 422})


def api_message(err: Any) -> str:
    """The message of the API server's Status answer, on one line (its reason if none)."""
    try:
        message = json.loads(err.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    text = " ".join(str(message or err.reason or "invalid").split())
    return text if len(text) <= 400 else text[:397] + "..."


class NotLeader(WriteFailed):
    """A write refused by the gate: this replica is not the leader (nothing was sent)."""


class LeaseConflict(Exception):
    """The Lease changed since it was read (HTTP 409): another replica got there first."""


class LeaseUnavailable(Exception):
    """The Lease could not be read or written (API unreachable, an error status)."""


def network(err: Exception) -> str:
    """A network failure in one line: its type, and urllib3's reason (no URL)."""
    reason = getattr(err, "reason", None)
    return f"{type(err).__name__} ({type(reason).__name__})" if reason is not None \
        else type(err).__name__


def namespace_terminating(err: Any) -> bool:
    """Whether an API error is the refusal to create in a namespace being deleted."""
    if getattr(err, "status", None) != 403:
        return False
    try:
        details = json.loads(err.body or b"{}").get("details") or {}
    except (ValueError, TypeError, AttributeError):
        return False
    causes = details.get("causes") if isinstance(details, dict) else None
    return isinstance(causes, list) and any(
        isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in causes)
