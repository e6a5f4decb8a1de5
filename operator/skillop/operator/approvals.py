"""Approval requests, on the operator's side: the webhook's rules and the bookkeeping.

Pure. ``admit_request`` and ``admit_decision`` are what the mutating webhook
answers for a ToolCallApproval (``webhook``): on create, who asks
(``spec.requester``, from the API request's user, whatever the client wrote) and
the Actor as owner; on a status write, who decided and when, refusing a decision
by the requester, a second decision, and an approval after the request expired.
RBAC keeps the gateway from writing status at all; these rules hold for people
who have both roles.

``Tracker`` follows the requests the operator watches: the Events to post on the
Actor (one per request and one per decision), the pending gauge and the time to
decision, and which requests to mark Expired or delete (``due``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from skillop.model.approval import DECISIONS, KIND, ToolCallApprovalSpec, ToolCallApprovalStatus
from skillop.model.names import GROUP_VERSION, ObjectRef

#: Decided and expired requests are deleted this long after their decision.
KEEP_DECIDED = timedelta(hours=1)


class Refused(Exception):
    """The webhook refuses the request; ``str`` is the one-line reason."""


def parse_time(text: object) -> datetime | None:
    """An RFC 3339 time as the API server writes it, or None."""
    if not isinstance(text, str):
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _spec(body: Mapping[str, Any]) -> ToolCallApprovalSpec:
    try:
        return ToolCallApprovalSpec.model_validate(
            {**(body.get("spec") or {}), "requester": "-"})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise Refused(f"spec.{where}: {first['msg']}") from None


def admit_request(body: Mapping[str, Any], *, user: str,
                  actor_uid: str | None) -> dict[str, Any]:
    """The merge patch the webhook adds to a new request: its requester and owner."""
    spec = _spec(body)
    if not user:
        raise Refused("the API request carries no user to record as the requester")
    if actor_uid is None:
        namespace = (body.get("metadata") or {}).get("namespace", "")
        raise Refused(f"spec.actor: Actor {namespace}/{spec.actor} not found")
    owner = {"apiVersion": GROUP_VERSION, "kind": "Actor", "name": spec.actor,
             "uid": actor_uid, "controller": True, "blockOwnerDeletion": False}
    return {"spec": {"requester": user}, "metadata": {"ownerReferences": [owner]}}


def admit_decision(body: Mapping[str, Any], old: Mapping[str, Any] | None, *, user: str,
                   now: datetime) -> dict[str, Any]:
    """The merge patch the webhook adds to a status write (who decided, when), or
    ``Refused``. A write that changes nothing is admitted as it is."""
    new_status = dict(body.get("status") or {})
    old_status = dict((old or {}).get("status") or {})
    if new_status == old_status:
        return {}
    try:
        status = ToolCallApprovalStatus.model_validate(new_status)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise Refused(f"status.{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
                      ) from None
    before = old_status.get("state")
    spec = (body.get("spec") or {})
    if before == "Expired":
        raise Refused(f"the request expired at {spec.get('expiresAt')}; the call was not made")
    if before not in (None, "Pending"):
        by = old_status.get("decidedBy") or "someone"
        raise Refused(f"a decision is final: the request was already {before} by {by}")
    if status.state in (None, "Pending"):
        return {"status": {"decidedBy": None, "decidedAt": None}}
    expires = parse_time(spec.get("expiresAt"))
    if status.state == "Expired":
        if expires is not None and now < expires:
            raise Refused(f"the request does not expire until {spec.get('expiresAt')}")
    else:
        if user and user == spec.get("requester"):
            raise Refused(f"{user} asked for this call and may not decide it")
        if expires is not None and now >= expires:
            raise Refused(f"the request expired at {spec.get('expiresAt')}; the call was"
                          " not made")
    return {"status": {"decidedBy": user, "decidedAt": stamp(now)}}


# -- what the operator does with the requests it sees ------------------------------------


@dataclass(frozen=True, slots=True)
class Seen:
    """One request as last seen."""

    ref: ObjectRef
    actor: str
    tool: str
    created: datetime
    expires: datetime | None
    state: str
    decided_by: str | None
    decided_at: datetime | None


@dataclass(frozen=True, slots=True)
class Note:
    """An Event to post on the Actor."""

    actor: ObjectRef
    type: str
    reason: str
    message: str


def seen_of(body: Mapping[str, Any], now: datetime) -> Seen | None:
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    if body.get("kind") not in (None, KIND) or not meta.get("name"):
        return None
    tool = (spec.get("tool") or {}).get("bindingName")
    return Seen(ObjectRef(str(meta.get("namespace", "")), str(meta["name"])),
                str(spec.get("actor", "")), str(tool or ""),
                parse_time(meta.get("creationTimestamp")) or now,
                parse_time(spec.get("expiresAt")), str(status.get("state") or "Pending"),
                status.get("decidedBy") if isinstance(status.get("decidedBy"), str) else None,
                parse_time(status.get("decidedAt")))


@dataclass
class Tracker:
    """The requests the operator has seen, and what each change calls for."""

    requests: dict[ObjectRef, Seen] = field(default_factory=dict)

    def observe(self, body: Mapping[str, Any], now: datetime) -> tuple[list[Note], float | None]:
        """Record a request; the Events it calls for and, when it was just decided,
        the seconds from its creation to the decision (for the metric)."""
        seen = seen_of(body, now)
        if seen is None:
            return [], None
        before = self.requests.get(seen.ref)
        self.requests[seen.ref] = seen
        actor = ObjectRef(seen.ref.namespace, seen.actor)
        notes: list[Note] = []
        if before is None and seen.state == "Pending":
            notes.append(Note(actor, "Normal", "ApprovalRequested",
                              f"{seen.tool}: waiting for a decision (ToolCallApproval"
                              f" {seen.ref.name}, kubectl skillop approve {seen.ref.name}"
                              f" -n {seen.ref.namespace})"))
        waited: float | None = None
        if seen.state != "Pending" and _newly_decided(before, seen, now):
            notes.append(_decision_note(actor, seen))
            at = seen.decided_at or now
            waited = max(0.0, (at - seen.created).total_seconds())
        return notes, waited

    def forget(self, ref: ObjectRef) -> None:
        self.requests.pop(ref, None)

    def pending(self) -> int:
        return sum(1 for s in self.requests.values() if s.state == "Pending")

    def due(self, now: datetime) -> tuple[list[ObjectRef], list[ObjectRef]]:
        """(to mark Expired, to delete): pending past their expiry; decided or
        expired for longer than ``KEEP_DECIDED``."""
        expire = [s.ref for s in self.requests.values()
                  if s.state == "Pending" and s.expires is not None and now >= s.expires]
        delete = [s.ref for s in self.requests.values() if s.state != "Pending"
                  and now - (s.decided_at or s.expires or s.created) >= KEEP_DECIDED]
        return expire, delete


def _newly_decided(before: Seen | None, seen: Seen, now: datetime) -> bool:
    """Decided since last seen: a request first seen decided (an operator that
    started, or a standby that took over) counts only when decided a moment ago, so
    a restart posts no Event twice."""
    if before is not None:
        return before.state == "Pending"
    return seen.decided_at is None or now - seen.decided_at < timedelta(minutes=1)


def _decision_note(actor: ObjectRef, seen: Seen) -> Note:
    by = f" by {seen.decided_by}" if seen.decided_by else ""
    if seen.state in DECISIONS:
        kind = "Normal" if seen.state == "Approved" else "Warning"
        return Note(actor, kind, f"Approval{seen.state}",
                    f"{seen.tool}: {seen.state.lower()}{by} (ToolCallApproval {seen.ref.name})")
    return Note(actor, "Warning", "ApprovalExpired",
                f"{seen.tool}: no decision in time (ToolCallApproval {seen.ref.name})")


def expired_status(now: datetime) -> dict[str, Any]:
    """The status the operator writes on a request nobody decided in time."""
    return {"state": "Expired", "reason": "no decision before expiresAt",
            "decidedAt": stamp(now)}
