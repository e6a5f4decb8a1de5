"""The warnings discovery adds to an Actor's status, in words: pure.

For every server of a Skill the Actor reaches: a failing listing (the last good
list is used meanwhile), definitions the last listing changed (only where the
server is not pinned: a pinned server's changes are withheld, and its Skill's
``Pinned`` condition says so), and tools listed under names that cannot be kept.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from skillop.model.names import ObjectRef
from skillop.model.serverkeys import ServerKey
from skillop.operator.serverwatch import ServerWatch


def actor_warnings(servers: Mapping[ServerKey, ServerWatch], reached: Collection[ObjectRef],
                   pinned: Collection[tuple[ObjectRef, str]]) -> list[str]:
    """``reached``: the Skills the Actor reaches; ``pinned``: the (Skill, server)
    pairs whose definitions are accepted by pin."""
    watches = list(servers.values())
    failing = [f"MCP server {name} of skill {skill}: {w.state.error}; using the last good"
               " tool list (or the declared tools before any success)"
               for w in watches if w.state.error
               for skill, name in sorted(w.users) if skill in reached]
    changed = [f"ToolDefinitionChanged: tool {tool} of MCP server {name} (skill {skill})"
               f" changed {', '.join(fields)}"
               for w in sorted(watches, key=lambda w: w.key.text)
               for skill, name in sorted(w.users)
               if skill in reached and (skill, name) not in pinned
               for tool, fields in w.state.changes]
    skipped = [f"MCP server {name} of skill {skill}: {line}"
               for w in watches
               for skill, name in sorted(w.users) if skill in reached
               for line in w.state.skipped]
    return failing + changed + skipped
