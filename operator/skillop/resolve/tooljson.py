"""One tool's entry in the ToolSet document, and its canonical JSON.

A ToolDef is shared by every actor that reaches it, so the JSON of everything
but an entry's per-actor keys is made once per ToolDef and declaring skill (a
template kept in the ToolDef's memo, ``TEMPLATES``) and the ToolSet text is
joined from those pieces (``resolve.toolset``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from typing import Any

from skillop.model.canonical import canonical_json
from skillop.model.memo import Slot
from skillop.model.names import ObjectRef
from skillop.model.tooldef import ToolDef
from skillop.model.toolset import ToolEntry, agent_skill_key
from skillop.resolve.entries import Entry
from skillop.resolve.tokens import token_bound, tool_tokens


@dataclass(frozen=True, slots=True)
class EffectiveTool:
    name: str
    binding_name: str
    entry: Entry
    path: tuple[ObjectRef, ...]
    #: Stands for ``tokens`` where only an upper bound is needed (``bounded``).
    stand_in: int | None = field(default=None, compare=False)

    @classmethod
    def of(cls, name: str, binding_name: str, entry: Entry,
           path: tuple[ObjectRef, ...]) -> EffectiveTool:
        return cls(name, binding_name, entry, path)

    @property
    def tokens(self) -> int:
        """What the model is sent for this tool, in tokens (``resolve.tokens``): counted
        when first read (the counts are memoized), so a run that reads none, such as a
        ``validate`` without a ``maxToolTokens``, never loads the tokenizer."""
        if self.stand_in is not None:
            return self.stand_in
        return tool_tokens(self.binding_name, self.entry.tool)

    def bounded(self) -> EffectiveTool:
        """This tool with an upper bound of its count for ``tokens``, which costs no
        tokenizer (``token_bound``): a ToolSet text made of these is at least as long
        as the real one."""
        return EffectiveTool(self.name, self.binding_name, self.entry, self.path,
                             token_bound(self.binding_name, self.entry.tool))

    @property
    def key(self) -> str | None:
        """The ConfigMap key of an Agent Skill's body."""
        if self.entry.tool.source != "agent_skill":
            return None
        return agent_skill_key(self.binding_name)


def _json_value(value: Any) -> str:
    """``canonical_json(value)``, with shortcuts for strings and lists of strings (the
    encoder json.dumps uses for strings, and its separators)."""
    if isinstance(value, str):
        return encode_basestring(value)
    if isinstance(value, list):
        try:
            return "[" + ",".join(map(encode_basestring, value)) + "]"
        except TypeError:  # not all strings
            pass
    return canonical_json(value)


#: Tool document keys whose values are the ToolDef's own fields, unchanged.
_DEFINITION_KEYS = frozenset({"source", "title", "description", "inputSchema", "outputSchema",
                              "capabilities", "runtime", "mcpServer", "execution"})
#: Tool document keys whose values depend on the actor. Every other key's value
#: must depend on the ToolDef and its declaring skill alone: its JSON is cached
#: per ToolDef (``tool_json``).
_PER_ACTOR_KEYS = frozenset({"name", "bindingName", "path", "tokens"})
Template = tuple[str, str, str, str, str]
#: A ToolDef's templates by declaring skill (``tool_json``): a registry Tool's
#: ToolDef is shared by every skill referencing it without overrides, so the
#: bound is above the skills that reference one Tool in a large catalog.
TEMPLATES: Slot[ObjectRef, Template] = Slot("toolset-template", bound=1024)


def tool_json(tool: EffectiveTool, path_json: str, *, tokens: int | None = None) -> str:
    """``canonical_json`` of ``tool_entry(tool)``, without building the entry;
    ``path_json`` is the JSON of the tool's path, ``tokens`` its ``tokens`` when
    the caller read them already.

    A ToolDef is shared by every actor that reaches it (and an MCP tool's is kept
    from one resolution to the next), so the JSON of all but the per-actor keys is
    built once per ToolDef and declaring skill, from the ToolDef's cached
    fragments; only the binding name and name are encoded here.
    """
    entry = tool.entry
    # ``TEMPLATES.get``, inline: this runs for every tool of every Actor.
    kept: Any = entry.tool.memo._tables.get(TEMPLATES)
    if type(kept) is tuple:  # one entry, as a slot keeps one: (key, value)
        # The same skill's ref is most often the very object kept: no ``__eq__``.
        template = kept[1] if kept[0] is entry.skill or kept[0] == entry.skill else None
    else:
        template = kept.get(entry.skill) if kept is not None else None
    if template is None:
        template = TEMPLATES.put(entry.tool.memo, entry.skill,
                                 _template(_entry_fields(tool), entry.tool))
    before_binding, before_name, before_path, before_tokens, end = template
    binding = encode_basestring(tool.binding_name)
    name = binding if tool.name == tool.binding_name else encode_basestring(tool.name)
    return (f"{before_binding}{binding}{before_name}{name}{before_path}{path_json}"
            f"{before_tokens}{tool.tokens if tokens is None else tokens}{end}")


#: ``ToolEntry``'s (document key, attribute) pairs in canonical (sorted) order.
_TOOL_KEYS = tuple(sorted((field.alias or name, name)
                          for name, field in ToolEntry.model_fields.items()))


def _template(fields: Mapping[str, Any], tool: ToolDef) -> Template:
    """The canonical JSON of the entry whose field values are ``fields``
    (``_entry_fields``) as the constant texts around its per-actor values, which
    sort as ``bindingName``, ``name``, ``path``, ``tokens``: ``texts[0] +
    json(bindingName) + texts[1] + json(name) + texts[2] + json(path) + texts[3] +
    json(tokens) + texts[4]``. Unset (None) fields are absent, as
    ``ToolSetDocument.canonical`` leaves them out."""
    fragments = tool.fragments()
    texts: list[str] = []
    text = "{"
    for key, attribute in _TOOL_KEYS:
        value = fields[attribute]  # a KeyError when ToolEntry gains a field _entry_fields lacks
        if value is None:
            continue
        text += ("" if text == "{" else ",") + encode_basestring(key) + ":"
        if key in _PER_ACTOR_KEYS:
            texts.append(text)
            text = ""
        else:
            text += fragments[key] if key in _DEFINITION_KEYS else _json_value(value)
    texts.append(text + "}")
    # Most pieces are equal between tools ('{"bindingName":', ',"path":', ...):
    # each is held once (a template is kept on every ToolDef, for every batch).
    before_binding, before_name, before_path, before_tokens, end = map(sys.intern, texts)
    return before_binding, before_name, before_path, before_tokens, end


def tool_entry(tool: EffectiveTool, path: Sequence[str] | None = None) -> ToolEntry:
    """One tool. Optional fields (``title``, ``outputSchema``, ``runtime``,
    ``mcpServer``, ``upstreamName``, ``execution``) are unset when they do not
    apply; ``digest`` pins the definition (see docs/decisions.md); an MCP tool's
    ``upstreamDigest`` is its definition as the server gave it, before overrides
    (docs/toolset.md). ``path`` is ``tool.path`` spelled out, when the caller has it.

    Built without validation: every value comes from models that were validated
    (``ToolSetDocument.parse`` checks what a reader gets)."""
    return ToolEntry.model_construct(**_entry_fields(tool, path))


def _entry_fields(tool: EffectiveTool, path: Sequence[str] | None = None) -> dict[str, Any]:
    """``tool_entry``'s field values by attribute name: what the ToolSet text's
    per-ToolDef template is made of too (``tool_json``), without building the
    model (pydantic's ``model_construct`` costs more than the rest of a template)."""
    t = tool.entry.tool
    return {
        "name": tool.name, "binding_name": tool.binding_name,
        "qualified_name": tool.entry.qualified_name, "source": t.source,
        "skill": tool.entry.skill.canonical, "title": t.title, "description": t.description,
        "input_schema": t.input_schema, "output_schema": t.output_schema,
        "capabilities": t.capabilities.to_dict(), "runtime": t.runtime,
        "mcp_server": t.mcp_server, "upstream_name": t.name if t.source == "mcp" else None,
        "execution": t.execution,
        "path": tuple(ref.canonical for ref in tool.path) if path is None else tuple(path),
        "digest": t.digest(), "tokens": tool.tokens, "upstream_digest": t.upstream_digest,
    }


def path_json(path: tuple[ObjectRef, ...], memo: dict[int, str]) -> str:
    """``path`` as JSON; memoized by identity like ``path_names``."""
    found = memo.get(id(path))
    if found is None:
        found = memo[id(path)] = _json_value([ref.canonical for ref in path])
    return found


def path_names(path: tuple[ObjectRef, ...], memo: dict[int, tuple[str, ...]],
                ) -> tuple[str, ...]:
    """``path`` as canonical names; memoized by identity, as the tools of one skill
    share one path tuple (``memo`` lives for one call, while the tuples are alive)."""
    found = memo.get(id(path))
    if found is None:
        found = memo[id(path)] = tuple(ref.canonical for ref in path)
    return found
