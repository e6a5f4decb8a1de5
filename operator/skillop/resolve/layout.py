"""How an Actor's ToolSet is stored: one ConfigMap holding ``tools.json`` when it
fits, else the set gzip-packed into the Actor's ConfigMap and its parts
(docs/toolset.md); a set too large even so is ``TooLarge``, naming its largest
contributors.
"""

from __future__ import annotations

import gzip
import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from skillop.model.canonical import bytes_digest
from skillop.model.manifest import ActorResource
from skillop.model.toolset import (
    INDEX_KEY,
    MAX_CONFIGMAP_BYTES,
    MAX_DOCUMENT_BYTES,
    MAX_PARTS,
    PACKED_KEY,
    TOOLS_KEY,
    PackedChunk,
    PackedIndex,
    chunk_key,
    default_configmap_name,
    part_configmap_name,
)
from skillop.resolve.tooljson import EffectiveTool, path_json, tool_json


def tools_json(text: str) -> str:
    """The bytes of ``tools.json``: the canonical text and a newline. The ConfigMap
    holds them and ``skillop tools -o json`` prints them, so the two compare equal
    with ``diff`` (docs/api.md, Reading manifests: byte-identical)."""
    return text + "\n"


def data_size(data: dict[str, str]) -> int:
    """A ConfigMap's data size as the API server counts it: UTF-8 bytes."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in data.items())


def configmap_data(text: str, tools: Sequence[EffectiveTool]) -> dict[str, str]:
    """The ConfigMap's data: ``tools.json``, the document's canonical JSON (sorted
    keys, no spaces: compact, and exactly the bytes that were hashed, plus the
    hash; ``toolset_text``) and one key per Agent Skill body."""
    data = {TOOLS_KEY: tools_json(text)}
    for tool in tools:
        if tool.key is not None and tool.entry.tool.body is not None:
            data[tool.key] = tool.entry.tool.body
    return data


@dataclass(frozen=True, slots=True)
class StoredConfigMap:
    """One ConfigMap of an Actor's set: its name, ``data`` and ``binaryData``."""

    name: str
    data: Mapping[str, str]
    binary: Mapping[str, bytes]

    def size(self) -> int:
        """What the API server counts against its limit: keys and values, in bytes."""
        return data_size(dict(self.data)) + sum(len(k) + len(v) for k, v in self.binary.items())


@dataclass(frozen=True, slots=True)
class Layout:
    """How an Actor's set is stored (docs/toolset.md): one ConfigMap holding
    ``tools.json`` when it fits, else the set packed into the Actor's ConfigMap and
    its parts. ``problem`` says why it cannot be stored at all (``TooLarge``)."""

    #: The Actor's own ConfigMap first, then its parts in order.
    configmaps: tuple[StoredConfigMap, ...]
    #: The bytes of ``tools.json``, and (packed) of its gzip.
    document_bytes: int
    compressed_bytes: int | None = None
    problem: str | None = None

    @property
    def main(self) -> StoredConfigMap:
        return self.configmaps[0]

    @property
    def parts(self) -> tuple[StoredConfigMap, ...]:
        return self.configmaps[1:]


#: Room kept in the Actor's ConfigMap for the index of a packed set.
_INDEX_ROOM = 4096
#: How many of the largest contributors a TooLarge reason names.
SIZE_CONTRIBUTORS = 5


def configmap_layout(name: str, text: str, digest: str,
                     tools: Sequence[EffectiveTool]) -> Layout:
    """The ConfigMaps that store the set whose canonical JSON is ``text`` (hash
    ``digest``) for the Actor whose ConfigMap is ``name``.

    A set that fits is exactly ``configmap_data`` (the same key, bytes and hash
    as ever). A larger one is packed: ``tools.json``'s bytes gzip-compressed
    (deterministic: no time, no name), cut into chunks that each fill a
    ConfigMap, the first in the Actor's ConfigMap with the index and the Agent
    Skill bodies."""
    data = configmap_data(text, tools)
    document_bytes = len(data[TOOLS_KEY].encode())
    if data_size(data) <= MAX_CONFIGMAP_BYTES:
        return Layout((StoredConfigMap(name, data, {}),), document_bytes)
    bodies = {k: v for k, v in data.items() if k != TOOLS_KEY}
    room = MAX_CONFIGMAP_BYTES - data_size(bodies) - _INDEX_ROOM - len(INDEX_KEY)
    if room < MAX_CONFIGMAP_BYTES // 2:
        return Layout((), document_bytes, problem=_bodies_too_large(bodies))
    packed = _gzip(data[TOOLS_KEY], digest)
    chunks = [packed[:room]]
    rest = packed[room:]
    while rest:
        take = MAX_CONFIGMAP_BYTES - len(chunk_key(len(chunks)))
        chunks.append(rest[:take])
        rest = rest[take:]
    if len(chunks) > MAX_PARTS or document_bytes > MAX_DOCUMENT_BYTES:
        return Layout((), document_bytes, len(packed),
                      problem=_too_large(document_bytes, len(packed), tools, bodies))
    names = [name, *(part_configmap_name(name, i) for i in range(1, len(chunks)))]
    index = PackedIndex(hash=digest, size=document_bytes, chunks=tuple(
        PackedChunk(key=chunk_key(i), config_map=names[i], sha256=bytes_digest(chunk),
                    size=len(chunk)) for i, chunk in enumerate(chunks)))
    main = StoredConfigMap(name, {INDEX_KEY: index.text(), **bodies}, {PACKED_KEY: chunks[0]})
    return Layout((main, *(StoredConfigMap(names[i], {}, {chunk_key(i): chunk})
                           for i, chunk in enumerate(chunks) if i)),
                  document_bytes, len(packed))


#: The last few sets packed, by hash: an Actor's set is compared with its
#: ConfigMaps on every pass, and compressing 10 MiB again each time would cost
#: the operator a fifth of a second per large Actor.
_PACKED: dict[str, bytes] = {}
_PACKED_KEPT = 8


def _gzip(tools_json_text: str, digest: str) -> bytes:
    found = _PACKED.get(digest)
    if found is None:
        found = gzip.compress(tools_json_text.encode(), compresslevel=6, mtime=0)
        if len(_PACKED) >= _PACKED_KEPT:
            del _PACKED[next(iter(_PACKED))]
        _PACKED[digest] = found
    return found


def _kib(size: int) -> str:
    return f"{size / 1024:,.0f} KiB" if size < 10 * 1024 * 1024 else f"{size / 2**20:,.1f} MiB"


def _too_large(document: int, compressed: int, tools: Sequence[EffectiveTool],
               bodies: Mapping[str, str]) -> str:
    capacity = MAX_PARTS * MAX_CONFIGMAP_BYTES
    paths: dict[int, str] = {}
    sizes = [(len(tool_json(t, path_json(t.path, paths)).encode()), t.binding_name)
             for t in tools]
    sizes += [(len(v.encode()), k) for k, v in bodies.items()]
    largest = ", ".join(f"{name} ({_kib(size)})"
                        for size, name in heapq.nlargest(SIZE_CONTRIBUTORS, sizes))
    return (f"the ToolSet is {_kib(document)} ({_kib(compressed)} compressed); an Actor's set"
            f" is stored in at most {MAX_PARTS} ConfigMaps of {MAX_CONFIGMAP_BYTES // 1024} KiB"
            f" ({_kib(capacity)} compressed); the largest:"
            f" {largest}")


def _bodies_too_large(bodies: Mapping[str, str]) -> str:
    sizes = sorted(((len(v.encode()), k) for k, v in bodies.items()), reverse=True)
    largest = ", ".join(f"{k} ({_kib(n)})" for n, k in sizes[:SIZE_CONTRIBUTORS])
    return (f"the Agent Skill bodies are {_kib(sum(n for n, _ in sizes))}; the Actor's ConfigMap"
            f" holds them with the tools in at most {MAX_CONFIGMAP_BYTES // 1024} KiB;"
            f" the largest: {largest}")


def configmap_name(actor: ActorResource) -> str:
    """The Actor's ConfigMap: ``spec.configMapName``, default ``<actor>-tools``."""
    return actor.spec.config_map_name or default_configmap_name(actor.meta.name)
