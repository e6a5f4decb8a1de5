"""Problems: one clear line each, naming the object, the field and the reason.

Every error a user can cause ends up as a ``Problem``; the CLI prints them one
per line and the operator turns them into conditions. ``reason`` is a stable
CamelCase code (``RefNotFound``, ``CycleDetected`` ...), ``message`` the prose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Longest field path and message a problem line shows: input can make either
#: as long as the input (a 1 MB key is a 1 MB field path), and one problem
#: must stay one readable line, in a terminal, a condition or a webhook reply.
MAX_FIELD = 256
MAX_MESSAGE = 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (control characters escaped), at most ``limit`` characters."""
    text = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
        parts = [one_line(self.origin, MAX_FIELD)] if self.origin else []
        parts += [one_line(str(self.subject), MAX_FIELD)]
        if self.field:
            parts.append(self.shown_field)
        parts += [self.reason, self.shown_message]
        return ": ".join(parts)

    def short(self) -> str:
        """Without the file: what a status condition's message carries."""
        where = f" {self.shown_field}" if self.field else ""
        return f"{one_line(str(self.subject), MAX_FIELD)}{where}: {self.shown_message}"

    @property
    def shown_field(self) -> str:
        return one_line(self.field, MAX_FIELD)

    @property
    def shown_message(self) -> str:
        return one_line(self.message, MAX_MESSAGE)


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
TOO_MANY_TOOL_TOKENS = "TooManyToolTokens"
TOO_LARGE = "TooLarge"
#: The API server refused to store a ConfigMap of the set for good (HTTP 400 or
#: 422: invalid, over its size limit); written once, not retried until it changes.
CONFIGMAP_REFUSED = "ConfigMapRefused"
DEPENDENCY_FAILED = "DependencyFailed"
CREDENTIAL_NOT_BOUND = "CredentialNotBound"
#: A server of another namespace's Skill would be sent tokens exchanged for the
#: Actor's callers at a host ``spec.callers.tokenExchange.hosts`` does not bind.
TOKEN_EXCHANGE_NOT_BOUND = "TokenExchangeNotBound"
