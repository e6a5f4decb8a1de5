"""An Actor's access policy: which skills it may reach, which tools it may keep.

Skill globs match canonical names (``namespace/name``); deny wins over allow.
Capability rules look only at what a tool declares: a tool that says nothing is
neither read-only nor writing, so ``requireCapabilities: [readOnly]`` drops it.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from skillop.model.names import ObjectRef
from skillop.model.specs import AccessPolicy
from skillop.model.tooldef import ToolDef


@dataclass(frozen=True, slots=True)
class SkillGate:
    allow: tuple[str, ...]
    deny: tuple[str, ...]

    @classmethod
    def of(cls, policy: AccessPolicy) -> SkillGate:
        return cls(tuple(policy.allow), tuple(policy.deny))

    @property
    def admits_all(self) -> bool:
        return not self.deny and ("*" in self.allow or "*/*" in self.allow)

    def refusal(self, ref: ObjectRef) -> str | None:
        """Why the skill is pruned, or None when it is allowed."""
        name = ref.canonical
        for glob in self.deny:
            if fnmatch.fnmatchcase(name, glob):
                return f"denied by skillAccessPolicy.deny {glob!r}"
        if not any(fnmatch.fnmatchcase(name, glob) for glob in self.allow):
            return "not matched by skillAccessPolicy.allow"
        return None


def capability_refusal(tool: ToolDef, policy: AccessPolicy) -> str | None:
    """Why the tool is dropped by the capability rules, or None to keep it."""
    if not policy.deny_capabilities and not policy.require_capabilities:
        return None
    caps = tool.capabilities.to_dict()
    for cap in policy.deny_capabilities:
        if caps.get(cap) is True:
            return f"has denied capability {cap}"
    for cap in policy.require_capabilities:
        if caps.get(cap) is not True:
            return f"lacks required capability {cap}"
    return None
