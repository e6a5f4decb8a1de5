"""Problems: one clear line each, naming the object, the field and the reason.

Every error a user can cause ends up as a ``Problem``; the CLI prints them one
per line and the operator turns them into conditions. ``reason`` is a stable
CamelCase code (``RefNotFound``, ``CycleDetected`` ...), ``message`` the prose.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True, slots=True)
class Subject:
    """The object a problem is about."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.kind} {self.namespace}/{self.name}"
        return f"{self.kind} {self.name}" if self.name else self.kind


@dataclass(frozen=True, order=True, slots=True)
class Problem:
    subject: Subject
    field: str
    reason: str
    message: str
    origin: str | None = None

    def line(self) -> str:
        """``file: Kind ns/name: field: Reason: message``."""
        parts = [self.origin] if self.origin else []
        parts += [str(self.subject)]
        if self.field:
            parts.append(self.field)
        parts += [self.reason, self.message]
        return ": ".join(parts)

    def short(self) -> str:
        """Without the file: what a status condition's message carries."""
        where = f" {self.field}" if self.field else ""
        return f"{self.subject}{where}: {self.message}"


# Reasons, shared by the CLI, conditions and docs.
INVALID_SPEC = "InvalidSpec"
INVALID_REF = "InvalidRef"
REF_NOT_FOUND = "RefNotFound"
REF_NOT_PERMITTED = "RefNotPermitted"
CYCLE_DETECTED = "CycleDetected"
FORBIDDEN_OVERRIDE = "ForbiddenOverride"
UNKNOWN_OVERRIDE_TARGET = "UnknownOverrideTarget"
DUPLICATE_TOOL_NAME = "DuplicateToolName"
UNKNOWN_BUILTIN = "UnknownBuiltin"
INVALID_AGENT_SKILL = "InvalidAgentSkill"
TOO_MANY_TOOLS = "TooManyTools"
DEPENDENCY_FAILED = "DependencyFailed"
