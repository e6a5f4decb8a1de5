"""Human output: tables that fit a 100-column terminal, the include tree, explanations."""

from __future__ import annotations

from collections.abc import Sequence

from skillop.cli.safetext import shown
from skillop.model.names import ObjectRef
from skillop.model.wording import count
from skillop.resolve.explain import applied_lines
from skillop.resolve.resolver import Resolution, Resolver
from skillop.resolve.tokens import ENCODING
from skillop.resolve.toolset import EffectiveTool

WIDTH = 100
CAP_ABBREV = {
    "readOnly": "ro", "writes": "w", "destructive": "destr", "idempotent": "idem",
    "openWorld": "net", "sideEffects": "fx", "unsafe": "unsafe", "requiresApproval": "approve",
}


def capability_summary(caps: dict[str, object]) -> str:
    flags = [CAP_ABBREV[k] for k in CAP_ABBREV if caps.get(k) is True]
    return ",".join(flags) or "-"


def table(rows: Sequence[Sequence[str]], header: Sequence[str], *, width: int = WIDTH) -> str:
    """Columns sized to content, cut with '…' to fit ``width``: the last column first
    (it holds prose), then the widest. Cells are escaped first (``safetext``): they
    come from manifests and MCP servers."""
    cols = len(header)
    rows = [[shown(cell) for cell in row] for row in rows]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(cols)]
    gap = 2
    excess = sum(widths) + gap * (cols - 1) - width
    if excess > 0:
        cut = min(excess, max(widths[-1] - 16, 0))
        widths[-1] -= cut
        excess -= cut
    while excess > 0:
        widest = max(range(cols), key=lambda i: widths[i])
        if widths[widest] <= 8:
            break
        widths[widest] -= 1
        excess -= 1
    lines = []
    for row in [header, *rows]:
        cells = [_fit(cell, widths[i]) for i, cell in enumerate(row)]
        lines.append((" " * gap).join(c.ljust(widths[i]) for i, c in enumerate(cells)).rstrip())
    return "\n".join(lines)


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def tools_table(resolution: Resolution) -> str:
    rows = [
        (t.name, t.entry.tool.source, t.entry.skill.canonical,
         capability_summary(t.entry.tool.capabilities.to_dict()), str(t.tokens),
         t.entry.tool.description.splitlines()[0] if t.entry.tool.description else "")
        for t in resolution.tools
    ]
    header = ("NAME", "SOURCE", "SKILL", "CAPABILITIES", "TOKENS", "DESCRIPTION")
    summary = (f"{count(len(resolution.tools), 'tool')} from"
               f" {count(len(resolution.skills), 'skill')},"
               f" {resolution.tokens} tokens ({ENCODING})")
    return "\n".join([table(rows, header), *map(shown, policy_lines(resolution)), summary])


def policy_lines(resolution: Resolution) -> list[str]:
    """The policies in force and everything pruned or dropped, each with its reason:
    a policy's and the Actor's own ``skillAccessPolicy``'s alike (docs/api.md,
    Semantics 6: everything pruned is reported)."""
    lines = applied_lines(resolution)
    for p in resolution.pruned:
        of = f" ({p.skill})" if p.skill else ""
        lines.append(f"pruned {p.kind} {p.name}{of}: {p.reason}")
    return lines


def tree(resolver: Resolver, resolution: Resolution, roots: Sequence[ObjectRef]) -> str:
    """The include hierarchy, each skill's own tools with their source."""
    effective = {t.entry.tool.identity: t for t in resolution.tools}
    dropped = {e.tool.identity: why for e, why in resolution.dropped}
    pruned = {p.name: p.reason for p in resolution.pruned if p.kind == "Skill"}
    lines = [f"{resolution.subject}"]
    seen: set[ObjectRef] = set()
    # (ref, prefix, is_last), walked with an explicit stack: include chains can be deep.
    stack = [(ref, "", i == len(roots) - 1) for i, ref in reversed(list(enumerate(roots)))]
    while stack:
        ref, prefix, last = stack.pop()
        branch, child_prefix = ("└── ", prefix + "    ") if last else ("├── ", prefix + "│   ")
        if ref.canonical in pruned:
            lines.append(f"{prefix}{branch}{ref} [pruned: {pruned[ref.canonical]}]")
            continue
        if ref in seen:
            lines.append(f"{prefix}{branch}{ref} (already shown above)")
            continue
        seen.add(ref)
        view = resolver.view(ref)
        lines.append(f"{prefix}{branch}{ref}" + ("" if view else " [not found]"))
        if view is None:
            continue
        children = [e.target for e in resolver.flattener.edges(view)]
        items = [_tool_line(e.tool.identity, e.tool.name, e.tool.source, effective, dropped)
                 for e in view.own]
        total = len(items) + len(children)
        for i, item in enumerate(items):
            lines.append(f"{child_prefix}{'└── ' if i == total - 1 else '├── '}{item}")
        for j, child in reversed(list(enumerate(children))):
            stack.append((child, child_prefix, len(items) + j == total - 1))
    return "\n".join(map(shown, lines))


def _tool_line(identity: str, name: str, source: str, effective: dict[str, EffectiveTool],
               dropped: dict[str, str]) -> str:
    line = f"[{source}] {name}"
    tool = effective.get(identity)
    if tool is not None and tool.name != name:
        line += f" (as {tool.name})"
    if identity in dropped:
        line += f" [dropped: {dropped[identity]}]"
    return line
