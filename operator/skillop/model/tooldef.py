"""ToolDef: one tool as the resolver sees it, whatever its source.

Every source (registry Tool, MCP server, SKILL.md, built-in group, inline tool)
becomes a ``ToolDef``; the resolver only ever overlays description, title and
capabilities on it. ``identity`` decides what counts as "the same tool".
Schemas are plain JSON objects and are never mutated after construction.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from skillop.model.canonical import canonical_fragment, sha256_digest
from skillop.model.capabilities import Capabilities, Origins
from skillop.model.memo import Memo, Slot
from skillop.model.specs import Override

Source = Literal["builtin", "tool", "mcp", "anonymous", "agent_skill"]


@dataclass(frozen=True, slots=True)
class ToolDef:
    identity: str
    name: str
    source: Source
    description: str
    input_schema: dict[str, Any]
    capabilities: Capabilities
    title: str | None = None
    output_schema: dict[str, Any] | None = None
    runtime: dict[str, Any] | None = None
    mcp_server: str | None = None
    #: An Agent Skill's Markdown body: content for the pod, not part of the definition.
    body: str | None = None
    #: An MCP tool's definition as its server gives it, before any override
    #: (``mcp_tools.info_digest``): what ``skillop gateway`` compares with the live
    #: listing at call time. Overrides keep it; None for other sources.
    upstream_digest: str | None = None
    #: MCP ``Tool.execution`` (task support), as the server states it.
    execution: dict[str, Any] | None = None
    #: Where each capability came from at the source (``explain`` shows it; an
    #: empty tuple means the source declared them all). Provenance, not part of
    #: the definition: comparisons, digests and documents ignore it.
    origins: Origins = field(default=(), compare=False, repr=False)
    #: ``fragments()`` and ``digest()``, computed on first use. Not part of the
    #: definition: left out of init, comparisons and repr; ``replace`` starts afresh.
    _fragments: dict[str, str] = field(default_factory=dict, init=False, repr=False,
                                       compare=False)
    _digest: str | None = field(default=None, init=False, repr=False, compare=False)
    #: Values derived from this definition (and a key) alone, each kind in a slot
    #: of its user (``model.memo``): ToolDefs ``derived`` from it, its token
    #: count, ToolSet JSON templates, policy verdicts, status items. A ToolDef is
    #: shared by every actor reaching it; an MCP tool's is kept from one
    #: resolution to the next.
    memo: Memo = field(default_factory=Memo, init=False, repr=False, compare=False)

    def with_override(self, override: Override) -> ToolDef:
        """This tool as an includer sees it (the source object is untouched); the
        same ToolDef for the same override object (``derived``)."""
        return self.derived(_OVERRIDDEN, override, lambda: self._overridden(override))

    def _overridden(self, override: Override) -> ToolDef:
        caps = self.capabilities
        if override.capabilities is not None:
            caps = caps.overlay(override.capabilities)
        description = self.description if override.description is None else override.description
        return self.overlaid(description=description,
                             title=self.title if override.title is None else override.title,
                             capabilities=caps)

    def merged_with(self, other: ToolDef) -> ToolDef:
        """This tool, reached by a second path as ``other``: the most restrictive
        capabilities of the two, this one's description and title (``derived``)."""
        return self.derived(_MERGED, other, lambda: self.overlaid(
            description=self.description, title=self.title,
            capabilities=self.capabilities.most_restrictive(other.capabilities)))

    def derived(self, kind: Slot[int, tuple[object, ToolDef]], made_from: object,
                build: Callable[[], ToolDef]) -> ToolDef:
        """``build()``, a ToolDef made from this one and ``made_from`` alone, kept
        on this one in the ``kind`` slot while ``made_from`` is the very same
        object (at most the slot's bound of each kind, the latest).

        A kept ToolDef (a registry Tool's, an MCP server's: ``model.identitymemo``) and an
        unchanged spec's override object then give the same overridden ToolDef
        from one resolution to the next, and with it everything memoized on it:
        canonical JSON, token counts, a policy's verdicts.
        """
        found = kind.get(self.memo, id(made_from))
        if found is not None and found[0] is made_from:  # the object itself: never stale
            return found[1]
        # Kept with the object, so its id is not reused while the entry lives; an
        # id reused after it went replaces the entry (and goes to the end).
        return kind.put(self.memo, id(made_from), (made_from, build()))[1]

    def overlaid(self, *, description: str, title: str | None,
                 capabilities: Capabilities) -> ToolDef:
        """This tool with the three fields an override may change. The canonical
        JSON of every field left as it is comes along: the schemas' is the
        costly part of a definition's ToolSet JSON and of its token count."""
        out = replace(self, description=description, title=title, capabilities=capabilities)
        if self._fragments:
            out._fragments.update(self._fragments)
            for key, before, after in (("description", self.description, description),
                                       ("title", self.title, title),
                                       ("capabilities", self.capabilities, capabilities)):
                if after is not before:
                    out._fragments.pop(key, None)
        return out

    def fragments(self) -> Mapping[str, str]:
        """Canonical JSON (sorted keys, no spaces) of each definition field, by its
        camelCase document key; computed once, as a ToolDef is shared by every
        actor that reaches it and its schemas are never mutated. Interned: equal
        tools of many skills and namespaces (a name, a schema, ``"anon"``) keep
        one text, as they are kept with every ToolDef."""
        cached = self._fragments
        if len(cached) < len(_FIELDS):  # none yet, or some not carried by ``overlaid``
            for key, attribute in _FIELDS:
                if key not in cached:
                    value = getattr(self, attribute)
                    cached[key] = sys.intern(canonical_fragment(
                        value.to_dict() if key == "capabilities" else value))
        return cached

    def digest(self) -> str:
        """sha256 of what a model is shown: name, description, schemas and capabilities."""
        if self._digest is None:
            fragments = self.fragments()
            # The body as json.dumps(body, sort_keys=True, separators=(",", ":")) spells it.
            keys = _DIGESTED if self.execution is None else _DIGESTED_WITH_EXECUTION
            raw = "{" + ",".join(f'"{key}":{fragments[key]}' for key in keys) + "}"
            object.__setattr__(self, "_digest", sha256_digest(raw))
        assert self._digest is not None
        return self._digest


#: Derived ToolDefs kept per kind on one ToolDef: a registry Tool's lives as long
#: as its spec, across every edit of the skills that override it meanwhile.
_KEPT_DERIVED = 32
#: The ToolDefs ``derived`` from one, by the id of the other object they are made from.
_OVERRIDDEN: Slot[int, tuple[object, ToolDef]] = Slot("derived:override", bound=_KEPT_DERIVED)
_MERGED: Slot[int, tuple[object, ToolDef]] = Slot("derived:merged", bound=_KEPT_DERIVED)

#: Each definition field's document key and attribute, in ``fragments()``.
_FIELDS = (
    ("name", "name"), ("title", "title"), ("description", "description"),
    ("inputSchema", "input_schema"), ("outputSchema", "output_schema"),
    ("capabilities", "capabilities"), ("runtime", "runtime"), ("source", "source"),
    ("mcpServer", "mcp_server"), ("execution", "execution"),
)
#: The fields ``digest`` covers, in sorted order.
_DIGESTED = ("capabilities", "description", "inputSchema", "name", "outputSchema", "title")
#: With ``execution``, only when a tool has it, so that digests of tools without
#: it stay what they were.
_DIGESTED_WITH_EXECUTION = tuple(sorted((*_DIGESTED, "execution")))

