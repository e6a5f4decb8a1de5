"""SKILL.md (the Agent Skills standard): YAML frontmatter, then a Markdown body.

Frontmatter is validated per the standard: ``name`` is 1-64 lowercase letters,
digits and hyphens with no leading, trailing or doubled hyphen; ``description``
is 1-1024 characters; the only other fields are ``license``, ``compatibility``
(at most 500 characters), ``metadata`` (string map) and ``allowed-tools``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from skillop.model import yamlread
from skillop.model.jsonvalue import json_type, quote_hint
from skillop.model.wording import count

NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
OPTIONAL_FIELDS = {"license", "compatibility", "metadata", "allowed-tools"}


class AgentSkillError(ValueError):
    """SKILL.md that does not follow the standard; the message says where."""


@dataclass(frozen=True, slots=True)
class AgentSkillDoc:
    name: str
    description: str
    body: str
    text: str


def parse_skill_md(text: str) -> AgentSkillDoc:
    """Split and validate a SKILL.md document."""
    front, body = _split(text)
    try:
        meta = yamlread.load_one(front)  # as kubectl reads YAML, aliases bounded
    except yaml.YAMLError as err:
        raise AgentSkillError(f"frontmatter is not valid YAML: {_first_line(err)}") from None
    if not isinstance(meta, dict):
        raise AgentSkillError("frontmatter must be a YAML mapping")
    _check_fields(meta)
    return AgentSkillDoc(meta["name"], meta["description"], body, text)


def _split(text: str) -> tuple[str, str]:
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise AgentSkillError("SKILL.md must start with a '---' frontmatter line")
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1:]).lstrip("\n")
    raise AgentSkillError("frontmatter is not closed by a '---' line")


def _check_fields(meta: dict[str, Any]) -> None:
    unknown = sorted(str(k) for k in meta if k not in {"name", "description", *OPTIONAL_FIELDS})
    if unknown:
        raise AgentSkillError(f"frontmatter has unknown field(s): {', '.join(unknown)}")
    name = _text(meta, "name")
    if len(name) > 64 or not NAME_RE.fullmatch(name):
        raise AgentSkillError(
            f"frontmatter name {name[:80]!r} must be 1-64 lowercase letters, digits and"
            " hyphens, with no leading, trailing or double hyphen"
        )
    desc = _text(meta, "description")
    if len(desc) > 1024:
        raise AgentSkillError(f"frontmatter description is {count(len(desc), 'character')};"
                              " at most 1024")
    compat = meta.get("compatibility")
    if compat is not None and (not isinstance(compat, str) or len(compat) > 500):
        raise AgentSkillError(
            "frontmatter compatibility must be a string of at most 500 characters")
    extra = meta.get("metadata")
    if extra is not None and (
        not isinstance(extra, dict) or not all(isinstance(v, str) for v in extra.values())
    ):
        raise AgentSkillError("frontmatter metadata must map strings to strings")


def _text(meta: dict[str, Any], field: str) -> str:
    """A required text field: absent (or empty) is missing, anything else that is not
    a string is said as what was given (``description: yes`` is a YAML boolean)."""
    value = meta.get(field)
    if value is not None and not isinstance(value, str):
        raise AgentSkillError(f"frontmatter field {field!r} must be a string, not"
                              f" {json_type(value)}{quote_hint(value)}")
    if not value or not value.strip():
        raise AgentSkillError(f"frontmatter field {field!r} is required")
    return value


def _first_line(err: Exception) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__
