"""Canonical JSON and its sha256: the one spelling behind every digest and hash.

A tool's ``digest``, the ToolSet's ``hash``, an MCP server's tool-list digest and
the store's digest of a Skill's tool list must all agree across processes and
versions (the CLI's hash equals the operator's; a pinned digest survives a
restart), so they are all computed here: sorted keys, no spaces, UTF-8 as is
(docs/toolset.md, "The hash").
"""

from __future__ import annotations

import hashlib
import json
from json.encoder import encode_basestring
from typing import Any


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON: sorted keys, no spaces, non-ASCII kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_fragment(value: Any) -> str:
    """``canonical_json(value)``, with shortcuts for strings and nulls (the same
    string encoder), which are most of a tool's fields."""
    if isinstance(value, str):
        return encode_basestring(value)
    if value is None:
        return "null"
    return canonical_json(value)


def sha256_digest(text: str) -> str:
    """``sha256:<hex>`` of ``text`` encoded as UTF-8."""
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def bytes_digest(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def json_digest(value: Any) -> str:
    """``sha256_digest`` of ``value``'s canonical JSON."""
    return sha256_digest(canonical_json(value))
