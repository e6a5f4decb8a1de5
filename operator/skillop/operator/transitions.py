"""Warning Events for conditions that turn bad, derived from two statuses.

Level-based: the Warning is owed when the status written holds a failing
condition the observed status did not (absent, another status, or False for
another reason). The observed status is what the API server holds, so an
operator restarted over an unchanged cluster, which writes no status, posts
nothing; a status rewritten for another reason (a message, a count) posts
nothing either. The Event says what the condition says: its reason and its
message, which name Secrets and never hold their values.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from skillop.model.status import clip
from skillop.operator.outputs import EventSpec

#: The conditions whose ``False`` is a failure someone must act on. ``Ready``
#: carries every resolution problem (a cycle, a missing or invalid reference,
#: ``TooManyTools``, ``DependencyFailed``); ``ResolvedRefs`` and ``Stalled``
#: repeat part of it and get no Event of their own. Pods out of date have their
#: own Warning (``PodsOutOfDate``), posted when pods newly fall behind.
FAILING = ("Ready", "CredentialsReady", "Discovered", "Pinned")
#: What an Event's message may hold (the API server's own bound for events.k8s.io).
MAX_EVENT_MESSAGE = 1024


def failing_transitions(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[EventSpec, ...]:
    """One Warning per condition of ``new`` that is False and was not, in ``old``,
    False for the same reason."""
    before = dict(_failures(old))
    return tuple(EventSpec("Warning", reason, clip(message, MAX_EVENT_MESSAGE))
                 for type_, (reason, message) in _failures(new)
                 if before.get(type_, (None, ""))[0] != reason)


def _failures(status: Mapping[str, Any]) -> Iterator[tuple[str, tuple[str, str]]]:
    """(type, (reason, message)) of each failing condition; what does not parse
    (a hand edit) counts as absent."""
    conditions = status.get("conditions")
    for cond in conditions if isinstance(conditions, list) else ():
        if (isinstance(cond, Mapping) and cond.get("type") in FAILING
                and cond.get("status") == "False"):
            yield (str(cond["type"]),
                   (str(cond.get("reason") or "Failed"), str(cond.get("message") or "")))
