"""Capabilities: what a tool may do, in one vocabulary for every source.

Unset fields are absent, not false: a tool that says nothing about writing is
not known to be read-only. Three operations matter to the resolver:

* ``overlay`` applies an override field by field (nearer the actor wins);
* ``most_restrictive`` merges what several inclusion paths said of one tool;
* ``loosened_by`` lists the fields an override would loosen: overrides from
  outside the skill that declares a tool (``includes[]``, ``tools[]``) may only
  tighten, so an includer cannot erase a risk.

MCP tools get their capabilities from ``ToolAnnotations`` with the MCP spec's
defaults for absent hints (``mcp_capabilities``): a tool that says nothing is
treated as one that writes, may destroy and talks to the outside world.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property, lru_cache
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator
from pydantic.alias_generators import to_camel

Checkpoint = Literal["no", "file", "snapshot"]
ShortText = Annotated[str, StringConstraints(max_length=256)]

#: Boolean capabilities where ``True`` is the cautious value.
RISK_FLAGS = ("writes", "destructive", "openWorld", "sideEffects", "unsafe", "requiresApproval")
#: Boolean capabilities where ``True`` is a promise of safety.
SAFETY_FLAGS = ("readOnly", "idempotent")
BOOLEAN_CAPABILITIES = ("readOnly", *RISK_FLAGS[:2], "idempotent", *RISK_FLAGS[2:])
BooleanCapability = Literal[
    "readOnly", "writes", "destructive", "idempotent",
    "openWorld", "sideEffects", "unsafe", "requiresApproval",
]
_CHECKPOINT_ORDER = {"no": 0, "file": 1, "snapshot": 2}


class Capabilities(BaseModel):
    """What a tool may do, in one vocabulary for every source; an unset field is
    unknown, not false."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True,
        defer_build=True,  # built on first use, as the specs (model.specbase)
    )

    read_only: bool | None = None
    """Modifies nothing (MCP readOnlyHint)."""
    writes: bool | None = None
    """Modifies state."""
    destructive: bool | None = None
    """May destroy data (MCP destructiveHint)."""
    idempotent: bool | None = None
    """Repeating a call with the same arguments has no further effect (MCP
    idempotentHint)."""
    open_world: bool | None = None
    """Talks to the outside world (MCP openWorldHint)."""
    side_effects: bool | None = None
    """Has effects beyond its result."""
    unsafe: bool | None = None
    """Never to be run without a sandbox."""
    requires_approval: bool | None = None
    """A human approves each call."""
    checkpoint: Checkpoint | None = None
    """How a call can be rolled back: no, file or snapshot."""
    write_scope: tuple[ShortText, ...] | None = Field(default=None, max_length=64)
    """Where it may write, e.g. github:issues:org-only."""
    timeout_seconds: int | None = Field(default=None, ge=1, le=86400)
    """The longest a call may take, in seconds (1-86400)."""
    tags: tuple[ShortText, ...] | None = Field(default=None, max_length=64)
    """Free-form labels."""

    @cached_property
    def _set_fields(self) -> dict[str, Any]:
        # Computed once per (frozen) instance; never handed out, so never mutated.
        # A cached_property is not a field: equality, hashing and dumps ignore it.
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")

    @cached_property
    def true_flags(self) -> frozenset[str]:
        """The boolean capabilities declared true (camelCase): all that a rule on
        capabilities looks at, so verdicts can be shared by every tool with the
        same ones (``resolve.policy``)."""
        return frozenset(k for k, v in self._set_fields.items() if v is True)

    @cached_property
    def requiring_approval(self) -> Capabilities:
        """These capabilities with ``requiresApproval`` set: what a policy's
        ``requireApproval`` makes of them, once per (frozen) instance."""
        return self.overlay(_REQUIRES_APPROVAL)

    def model_copy(self, *, update: Mapping[str, Any] | None = None,
                   deep: bool = False) -> Self:
        copy = super().model_copy(update=update, deep=deep)
        for derived in _DERIVED:  # ``update`` may have changed fields
            copy.__dict__.pop(derived, None)
        return copy

    @field_validator("write_scope", "tags", mode="before")
    @classmethod
    def _json_lists(cls, value: Any) -> Any:
        # JSON has lists, not tuples; strict validation (as the API server
        # checks types) would refuse a list for the tuple these are kept in.
        return tuple(value) if isinstance(value, list) else value

    def to_dict(self) -> dict[str, Any]:
        """The set fields, camelCase, as they appear in documents (a fresh copy)."""
        fields = self._set_fields
        if self.write_scope is None and self.tags is None:  # no lists to copy
            return fields.copy()
        return {k: list(v) if isinstance(v, list) else v for k, v in fields.items()}

    def overlay(self, override: Capabilities) -> Capabilities:
        """This, with every field the override sets replaced."""
        if not override._set_fields:
            return self
        if not self._set_fields:
            return override
        merged = {**self._set_fields, **override._set_fields}
        return Capabilities.model_validate(merged)

    def most_restrictive(self, other: Capabilities) -> Capabilities:
        """What is safe to assume of a tool described as both ``self`` and ``other``."""
        a, b = self._set_fields, other._set_fields
        out: dict[str, Any] = {}
        for key in RISK_FLAGS:
            if key in a or key in b:
                out[key] = bool(a.get(key)) or bool(b.get(key))
        for key in SAFETY_FLAGS:
            if a.get(key) is False or b.get(key) is False:
                out[key] = False
            elif a.get(key) is True and b.get(key) is True:
                out[key] = True
        if "checkpoint" in a and "checkpoint" in b:
            out["checkpoint"] = min(a["checkpoint"], b["checkpoint"],
                                    key=lambda c: _CHECKPOINT_ORDER[c])
        if "timeoutSeconds" in a or "timeoutSeconds" in b:
            out["timeoutSeconds"] = min(v for v in (a.get("timeoutSeconds"),
                                                    b.get("timeoutSeconds")) if v is not None)
        if "writeScope" in a and "writeScope" in b:
            out["writeScope"] = [s for s in a["writeScope"] if s in b["writeScope"]]
        elif "writeScope" in a or "writeScope" in b:
            out["writeScope"] = a.get("writeScope", b.get("writeScope"))
        if "tags" in a or "tags" in b:
            out["tags"] = sorted({*a.get("tags", ()), *b.get("tags", ())})
        return Capabilities.model_validate(out)

    def loosened_by(self, override: Capabilities) -> list[str]:
        """Fields the override would loosen, relative to this tool's own metadata.

        Tightening means: a risk flag set true, a safety promise set false, or a
        shorter timeout; restating the tool's own value changes nothing. Everything
        else (checkpoint, writeScope, tags) is descriptive of the implementation
        and cannot be changed from outside.
        """
        current = self._set_fields
        loosened = []
        for key, value in override._set_fields.items():
            if value == current.get(key):
                continue
            if key in RISK_FLAGS:
                ok = value is True
            elif key in SAFETY_FLAGS:
                ok = value is False
            elif key == "timeoutSeconds":
                ok = value <= current.get("timeoutSeconds", value)
            else:
                ok = False  # descriptive of the implementation, and changed
            if not ok:
                loosened.append(key)
        return loosened


# Built without validation (values known good): validating here would build the
# model's validator at import, which every run pays for (defer_build).
_REQUIRES_APPROVAL = Capabilities.model_construct(requires_approval=True)
#: The cached properties derived from the fields (dropped by ``model_copy``).
_DERIVED = ("_set_fields", "true_flags", "requiring_approval")

#: What MCP 2025-11-25 ``ToolAnnotations`` assumes when a hint is absent: a tool
#: that says nothing may write, destroy and reach the outside world.
MCP_DEFAULT_HINTS = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}

#: Where one capability's value came from (``explain`` prints these).
Origins = tuple[tuple[str, str], ...]


def mcp_capabilities(annotations: Mapping[str, Any], *, declared: Capabilities | None = None,
                     read_only_claim: bool | None = None,
                     claimed_by: str = "declared") -> tuple[Capabilities, Origins]:
    """An MCP tool's capabilities, and where each came from.

    Hints map as the MCP spec defines them, absent ones taking its defaults:
    ``readOnly`` = readOnlyHint; a tool that is not read-only ``writes`` and has
    ``destructive`` = destructiveHint, ``idempotent`` = idempotentHint (the spec
    gives those two meaning only then); ``openWorld`` = openWorldHint.

    ``declared`` (the declaring skill's ``capabilities``) applies on top, field
    by field. Its ``readOnly``, or ``read_only_claim`` (the declaring skill's
    server override, nearer still), is read as the readOnlyHint, so a tool the
    declaring skill calls read-only does not get the defaults of a writing tool;
    ``claimed_by`` says who made that claim.
    """
    if read_only_claim is None and declared is not None:
        read_only_claim = declared.read_only
    hints = tuple(value if isinstance(value := annotations.get(name), bool) else None
                  for name in MCP_DEFAULT_HINTS)
    claim = None if read_only_claim is None else (read_only_claim, claimed_by)
    caps, origins = _from_hints(hints, claim)
    if declared is None or not declared.to_dict():
        return caps, origins
    where = dict(origins)
    where.update(dict.fromkeys(declared.to_dict(), "declared"))
    caps = caps.overlay(declared)
    return caps, tuple((key, where[key]) for key in caps.to_dict() if key in where)


@lru_cache(maxsize=1024)
def _from_hints(hints: tuple[bool | None, bool | None, bool | None, bool | None],
                claim: tuple[bool, str] | None) -> tuple[Capabilities, Origins]:
    """The capabilities four hints (None: absent) give; few combinations exist,
    so each is built once: a catalog of MCP tools repeats them endlessly."""
    origins: dict[str, str] = {}
    given = dict(zip(MCP_DEFAULT_HINTS, hints, strict=True))

    def hint(name: str) -> bool:
        value = given[name]
        if value is not None:
            origins[name] = f"annotation {name}={str(value).lower()}"
            return value
        origins[name] = f"MCP default: no {name}"
        return MCP_DEFAULT_HINTS[name]

    if claim is not None:
        read_only = claim[0]
        origins["readOnlyHint"] = f"{claim[1]} readOnly={str(read_only).lower()}"
    else:
        read_only = hint("readOnlyHint")
    fields: dict[str, Any] = {"readOnly": read_only}
    where = {"readOnly": origins["readOnlyHint"]}
    if not read_only:
        fields.update(writes=True, destructive=hint("destructiveHint"),
                      idempotent=hint("idempotentHint"))
        where.update(writes=f"{origins['readOnlyHint']}, so not read-only",
                     destructive=origins["destructiveHint"],
                     idempotent=origins["idempotentHint"])
    fields["openWorld"] = hint("openWorldHint")
    where["openWorld"] = origins["openWorldHint"]
    caps = Capabilities.model_validate(fields)
    return caps, tuple((key, where[key]) for key in caps.to_dict())


EMPTY = Capabilities.model_construct()  # not validated at import, as _REQUIRES_APPROVAL
