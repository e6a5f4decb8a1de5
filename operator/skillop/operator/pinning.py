"""Tool-definition pinning: a pinned MCP server's changed tools are not taken.

Pure functions over tool lists. The accepted list of a pinned (skill, server)
is what the resolver uses; a live list that differs from it is a violation,
reported with both digests until someone accepts it: by listing the new
digests in the Skill's ``skillop.dev/accept-digests`` annotation, or by
re-applying the Skill (a new generation accepts the server's current list).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from skillop.sources.mcp_tools import McpToolInfo, changed_fields, info_digest

ACCEPT_ANNOTATION = "skillop.dev/accept-digests"


@dataclass(frozen=True, slots=True)
class Violation:
    tool: str
    accepted: str | None  # None: the server added the tool
    served: str | None  # None: the server removed it

    def message(self) -> str:
        if self.accepted is None:
            return f"{self.tool}: new tool {self.served} not accepted"
        if self.served is None:
            return f"{self.tool}: removed by the server; still serving {self.accepted}"
        return f"{self.tool}: accepted {self.accepted}, server now defines {self.served}"


def violations(accepted: tuple[McpToolInfo, ...], live: tuple[McpToolInfo, ...],
               ) -> list[Violation]:
    old = {t.name: info_digest(t) for t in accepted}
    new = {t.name: info_digest(t) for t in live}
    return [Violation(name, old.get(name), new.get(name))
            for name in sorted(old.keys() | new.keys()) if old.get(name) != new.get(name)]


@dataclass(frozen=True, slots=True)
class PinState:
    """A pinned server of one Skill, as its status reports it."""

    #: The accepted definition digest of each tool, by tool name.
    digests: Mapping[str, str]
    #: What the server now serves that is not accepted, one line each.
    violations: tuple[str, ...] = ()


def pin_state(accepted: tuple[McpToolInfo, ...], live: tuple[McpToolInfo, ...]) -> PinState:
    return PinState({t.name: info_digest(t) for t in accepted},
                    tuple(v.message() for v in violations(accepted, live)))


def first_accepted(live: tuple[McpToolInfo, ...], recorded: Mapping[str, str] | None,
                   ) -> tuple[McpToolInfo, ...]:
    """What a pinned server's first listing since start accepts.

    Nothing recorded (a new Skill): all it serves. After a restart nothing is
    accepted in memory; the digests the Skill's status recorded are the contract
    then: matching tools are accepted, the others withheld (reported as
    violations) until accepted again.
    """
    if recorded is None:
        return live
    return tuple(t for t in live if recorded.get(t.name) == info_digest(t))


def accept(accepted: tuple[McpToolInfo, ...], live: tuple[McpToolInfo, ...],
           digests: Collection[str]) -> tuple[McpToolInfo, ...]:
    """``accepted`` with the live definitions whose digest is listed taken over.

    A listed digest of a new tool adds it; a removed tool goes once the digest
    it was accepted with is listed (acknowledging its removal).
    """
    live_by_name = {t.name: t for t in live}
    out = []
    for tool in accepted:
        fresh = live_by_name.get(tool.name)
        if fresh is None:
            if info_digest(tool) not in digests:
                out.append(tool)
        elif info_digest(fresh) in digests:
            out.append(fresh)
        else:
            out.append(tool)
    known = {t.name for t in accepted}
    out += [t for t in live if t.name not in known and info_digest(t) in digests]
    return tuple(out)


def parse_accepted(annotation: str | None) -> frozenset[str]:
    if not annotation:
        return frozenset()
    return frozenset(part.strip() for part in annotation.replace("\n", ",").split(",")
                     if part.strip())


def definition_changes(old: tuple[McpToolInfo, ...], new: tuple[McpToolInfo, ...],
                       ) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(tool, changed fields) for every tool present in both lists that changed."""
    before = {t.name: t for t in old}
    out = []
    for tool in new:
        prior = before.get(tool.name)
        if prior is not None and prior != tool:
            out.append((tool.name, tuple(changed_fields(prior, tool))))
    return tuple(out)
