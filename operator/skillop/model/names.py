"""Names and references.

A reference to a Skill or Tool is ``name`` (same namespace as the referrer) or
``namespace/name``. The seed design's ``[[server:]namespace/]name`` grammar is
accepted for familiarity, but a ``server:`` part is refused: in-cluster there are
no remote registries, and silently ignoring one would resolve the wrong object.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

API_GROUP = "skillop.dev"
API_VERSION = "v1alpha1"
GROUP_VERSION = f"{API_GROUP}/{API_VERSION}"
#: The label naming an object's Actor: on the ConfigMaps skillop writes, and on
#: the pods that ask for the gateway (docs/gateway.md, Injection).
ACTOR_LABEL = f"{API_GROUP}/actor"

# Every pattern here is matched against the whole string (``fullmatch``): in
# Python's ``re``, ``$`` also matches before a trailing newline, so ``match``
# would accept "notes\n". The patterns keep ``^...$`` because they also go into
# the CRDs, whose (RE2) ``$`` is the end of the text.

#: MCP tool names: 1-128 characters of letters, digits, ``_``, ``.`` and ``-``.
TOOL_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,128}$"
TOOL_NAME_RE = re.compile(TOOL_NAME_PATTERN)

#: Kubernetes object names (DNS-1123 subdomain) and namespaces (DNS-1123 label).
OBJECT_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
NAMESPACE_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
OBJECT_NAME_RE = re.compile(OBJECT_NAME_PATTERN)
NAMESPACE_RE = re.compile(NAMESPACE_PATTERN)

MAX_REF_LENGTH = 317  # namespace (63) + "/" + name (253)


class RefError(ValueError):
    """A reference that cannot be parsed; the message says why."""


@dataclass(frozen=True, order=True, slots=True)
class ObjectRef:
    """A namespaced object's identity: what ``namespace/name`` spells."""

    namespace: str
    name: str

    @property
    def canonical(self) -> str:
        return f"{self.namespace}/{self.name}"

    def __str__(self) -> str:
        return self.canonical


def parse_ref(text: str, *, namespace: str) -> ObjectRef:
    """Parse ``name``, ``namespace/name`` or the seed's ``server:namespace/name``.

    ``namespace`` is the referrer's namespace, used when the reference has none.
    """
    if not isinstance(text, str) or not text:
        raise RefError("reference is empty")
    if len(text) > MAX_REF_LENGTH:
        raise RefError(f"reference is longer than {MAX_REF_LENGTH} characters")
    if ":" in text:
        server = text.split(":", 1)[0]
        raise RefError(
            f"reference {text!r} names a registry server {server!r}; remote registries are"
            " not supported in-cluster, use 'namespace/name'"
        )
    parts = text.split("/")
    if len(parts) > 2:
        raise RefError(f"reference {text!r} has more than one '/'; use 'name' or 'namespace/name'")
    ns, name = (parts[0], parts[1]) if len(parts) == 2 else (namespace, parts[0])
    if not NAMESPACE_RE.fullmatch(ns):
        raise RefError(f"reference {text!r}: {ns!r} is not a valid namespace name")
    if not OBJECT_NAME_RE.fullmatch(name):
        raise RefError(
            f"reference {text!r}: {name!r} is not a valid object name"
            " (lowercase letters, digits, '-' and '.')"
        )
    return ObjectRef(ns, name)


#: Names an MCP server may send that skillop keeps (docs/api.md, Names): 1-128
#: characters, none of them whitespace or control characters. Wider than
#: ``TOOL_NAME_PATTERN`` (unicode, ``/``): such a tool gets a sanitised bindingName.
#: The Unicode spaces are spelled out: Go's ``\s`` (the API server's regexp) is
#: ASCII only, Rust's (pydantic's) is not; both read ``\x{...}``.
SERVER_TOOL_NAME_PATTERN = (r"^[^\s\x00-\x1f\x7f-\x9f\x{a0}\x{1680}\x{2000}-\x{200a}"
                            r"\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]{1,128}$")
MAX_TOOL_NAME_LENGTH = 128


def server_tool_name_problem(name: str) -> str | None:
    """Why a tool name sent by an MCP server cannot be kept, or None when it can."""
    if not name:
        return "the name is empty"
    if len(name) > MAX_TOOL_NAME_LENGTH:
        return f"the name is longer than {MAX_TOOL_NAME_LENGTH} characters"
    if any(ch.isspace() or unicodedata.category(ch) == "Cc" for ch in name):
        return "the name contains whitespace or control characters"
    return None


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'a' or 'b'?"`` with the names closest to ``name`` (a typo's
    likely target), or ``""`` when none is close; appended to "not found" messages."""
    scored = sorted((-difflib.SequenceMatcher(None, name, c).ratio(), c)
                     for c in set(candidates) - {name})
    # Close to the best one only: names sharing a long suffix ("_operations") are
    # all similar, and listing every one of them points nowhere.
    close = [c for score, c in scored[:3] if -score >= max(0.6, -scored[0][0] - 0.1)]
    if not close:
        return ""
    quoted = [repr(c) for c in close]
    listed = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return f"; did you mean {listed}?"
