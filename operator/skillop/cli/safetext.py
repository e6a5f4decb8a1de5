"""Text from input, made safe to print on a person's terminal.

Names, arguments, descriptions, reasons and messages come from manifests, the
cluster and MCP servers: anyone who can write one can put an escape sequence in it
(move the cursor, erase the line above, retitle the window) or a bidi override
that reorders what follows. Every line the CLI prints that carries such text goes
through here, and here only through ``model.visible.visible``: what a person
approves in ``skillop approvals`` is escaped as the gateway escapes the request
itself (docs/security.md, Text shown to a person).
"""

from __future__ import annotations

from skillop.model.visible import visible


def shown(value: object) -> str:
    """``value`` as one line: a line break in it is escaped too (a table cell, a name)."""
    return visible(str(value))


def shown_lines(text: str) -> str:
    """``text`` whose own line breaks are kept (a tree, an explanation, several
    problem lines) and every other hidden character escaped."""
    return "\n".join(visible(line) for line in text.split("\n"))
