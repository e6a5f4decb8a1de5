"""A served set of Agent Skills with caller rules and rate limits, for the
per-caller tests: Agent Skills are answered by the gateway itself, so a call
needs no upstream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gatewaykit import Volume, toolset_files
from skillkit import actor, skill, skill_md

from skillop.gateway.served import ServedSet, load_served_set
from skillop.model.caller import Caller, caller_from_claims

ACTOR = "team-a/bot"
#: The tools: notes and plan (skill docs), wipe and deploy (skill ops).
DOCS = skill("docs", agentSkills=[{"inline": skill_md("notes", "keep notes")},
                                  {"inline": skill_md("plan", "plan a trip")}])
OPS = skill("ops", agentSkills=[{"inline": skill_md("wipe", "wipe the disk")},
                                {"inline": skill_md("deploy", "deploy the app")}])


def served_with(tmp_path: Path, *policies: Any, disclosure: dict[str, Any] | None = None,
                **spec: Any) -> ServedSet:
    """The set of an Actor using docs and ops, with ``spec`` (callerRules go under
    skillAccessPolicy) and ``policies`` beside it."""
    extra = {"disclosure": disclosure} if disclosure is not None else {}
    Volume(tmp_path).write(toolset_files(
        [DOCS, OPS, *policies, actor("bot", skills=["docs", "ops"], **spec, **extra)], ACTOR))
    return load_served_set(tmp_path)


def who(subject: str, *groups: str, **claims: Any) -> Caller:
    return caller_from_claims({"sub": subject, "groups": list(groups), **claims})
