"""A burst of changes on a real API server: the Events a user sees, and none failing.

One change to a Skill that 60 Actors include owes 60 ``ToolSetChanged`` Events,
the same news each time: the first ones are posted one an Actor, the rest as one
Event that says how many Actors it stands for. The same Skill then gone makes
each Actor's ``Ready`` turn ``False``: 60 Warnings, one each, never folded. Every
Event the operator posted was accepted (its audit record says 201).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest
from realkit import RealCluster, audit_now, operator_process, wait_quiet
from skillkit import actor, anon, skill

from clusterkit import wait_for
from skillop.operator.events import BURST

pytestmark = pytest.mark.realapi

NS = "realapi-events"
ACTORS = 60
ENV = {"SKILLOP_LEADER_ELECTION": "false", "SKILLOP_MCP_DISCOVERY": "false"}


def _shared(*tools: str) -> dict[str, Any]:
    return skill("shared", NS, anonymousTools=[anon(t) for t in tools])


def _events(real: RealCluster, reason: str) -> list[Any]:
    return [e for e in real.core.list_namespaced_event(NS).items if e.reason == reason]


def _hashes(real: RealCluster) -> dict[str, str | None]:
    return {a["metadata"]["name"]: (a.get("status") or {}).get("toolsHash")
            for a in real.list("Actor", NS)}


def _event_posts(real: RealCluster, since: str) -> Counter[int]:
    """The operator's Event creates since ``since``, by the API server's answer."""
    return Counter(int((w.get("responseStatus") or {}).get("code", 0))
                   for w in real.plane.writes(since=since)
                   if (w.get("objectRef") or {}).get("resource") == "events")


def test_a_burst_of_changes_posts_what_a_user_should_see_and_none_fails(
        real: RealCluster) -> None:
    real.namespace(NS)
    names = [f"agent-{i:02d}" for i in range(ACTORS)]
    try:
        with operator_process(real.plane, env=ENV, name="events-operator"):
            real.apply(_shared("one"))
            for name in names:
                real.apply(actor(name, NS, skills=["shared"]))
            first = wait_for(lambda: (h := _hashes(real)) and len(h) == ACTORS
                             and None not in h.values() and h, timeout=60, interval=0.2)
            wait_quiet(real.plane, quiet=1.0)
            since = audit_now()
            real.patch_spec("Skill", NS, "shared", _shared("one", "two")["spec"])
            wait_for(lambda: all(h != first[n] for n, h in _hashes(real).items()),
                     timeout=60, interval=0.2, message="every Actor's new tool set")
            changed = wait_for(lambda: (e := _events(real, "ToolSetChanged"))
                               and len(e) == BURST + 1 and e, timeout=60, interval=0.2,
                               message=f"{BURST} ToolSetChanged Events and one for the rest")
            own = [e for e in changed if not e.message.startswith("this one and")]
            (combined,) = [e for e in changed if e.message.startswith("this one and")]
            assert len({e.involved_object.name for e in own}) == BURST
            assert combined.involved_object.name not in {e.involved_object.name for e in own}
            assert re.match(rf"this one and {ACTORS - BURST - 1} other Actors of namespace"
                            rf" {NS}: 2 tools \(\+1 -0 ~0\)", combined.message), combined.message

            real.delete("Skill", NS, "shared")  # every Actor's Ready turns False
            wait_for(lambda: len([w for w in real.core.list_namespaced_event(NS).items
                                  if w.type == "Warning"]) >= ACTORS, timeout=60,
                     interval=0.2, message="a Warning on every Actor")
            wait_quiet(real.plane, quiet=1.0)
            warned = [w for w in real.core.list_namespaced_event(NS).items
                      if w.type == "Warning"]
            assert sorted(w.involved_object.name for w in warned) == names  # one each
            posts = _event_posts(real, since)
        assert posts == {201: BURST + 1 + ACTORS}, posts
    finally:
        real.delete_namespaces(NS)
