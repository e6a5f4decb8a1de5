"""How an Actor's ToolSet is stored: one ConfigMap holding ``tools.json`` when it
fits, else the set gzip-packed into the Actor's ConfigMap and its parts
(docs/toolset.md); a set too large even so is ``TooLarge``, naming its largest
contributors.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from skillop.model.manifest import ActorResource
from skillop.model.toolset import (
    INDEX_KEY,
    MAX_CONFIGMAP_BYTES,
    MAX_DOCUMENT_BYTES,
    MAX_PARTS,
    TOOLS_KEY,
    PackedChunk,
    PackedIndex,
    chunk_key,
    default_configmap_name,
    part_configmap_name,
)
from skillop.resolve.packing import Chunk, chunks
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


#: How many of the largest contributors a TooLarge reason names.
SIZE_CONTRIBUTORS = 5


@dataclass(frozen=True, slots=True)
class Stored:
    """What the API server holds of an Actor's packed set, as the operator last saw
    it: the slot (0: the Actor's ConfigMap, ``i``: part ``i``) where the index names
    each chunk, by sha256, and the chunks each ConfigMap holds intact."""

    named: Mapping[str, int]
    held: Mapping[int, frozenset[str]]


def configmap_layout(name: str, text: str, digest: str,
                     tools: Sequence[EffectiveTool], *, stored: Stored | None = None) -> Layout:
    """The ConfigMaps that store the set whose canonical JSON is ``text`` (hash
    ``digest``) for the Actor whose ConfigMap is ``name``.

    A set that fits is exactly ``configmap_data`` (the same key, bytes and hash
    as ever). A larger one is packed (``resolve.packing``): its chunks placed
    where ``stored`` already holds them, the new ones in the Actor's ConfigMap
    beside the index, so a change writes that one ConfigMap; when it cannot hold
    them (or with nothing ``stored``), laid out afresh: the chunks fill the parts
    in order and the Actor's ConfigMap keeps the index, the Agent Skill bodies
    and the header, room for the changes to come."""
    data = configmap_data(text, tools)
    document_bytes = len(data[TOOLS_KEY].encode())
    if data_size(data) <= MAX_CONFIGMAP_BYTES:
        return Layout((StoredConfigMap(name, data, {}),), document_bytes)
    bodies = {k: v for k, v in data.items() if k != TOOLS_KEY}
    fixed = data_size(bodies) + len(INDEX_KEY) + _INDEX_ROOM
    if fixed > MAX_CONFIGMAP_BYTES // 2:
        return Layout((), document_bytes, problem=_bodies_too_large(bodies))
    packed = _chunks(data[TOOLS_KEY], digest, tools)
    compressed = sum(len(c.data) for c in packed)
    slots = None
    if stored is not None and document_bytes <= MAX_DOCUMENT_BYTES:
        slots = _kept(packed, stored, fixed)
    if slots is None and document_bytes <= MAX_DOCUMENT_BYTES:
        slots = _afresh(packed, fixed)
    if slots is None:
        return Layout((), document_bytes, compressed,
                      problem=_too_large(document_bytes, compressed, tools, bodies))
    return _laid_out(name, digest, document_bytes, packed, slots, bodies)


#: Room kept in the Actor's ConfigMap for a packed set's index: each chunk's
#: entry (its key, ConfigMap, sha256 and size) is at most this many bytes.
_ENTRY_ROOM = 400
_INDEX_ROOM = 1024


def _cost(chunk: Chunk) -> int:
    """What a chunk costs its ConfigMap (its key and bytes) and the index."""
    return len(chunk_key(0, chunk.sha256)) + len(chunk.data) + _ENTRY_ROOM


def _kept(chunks: Sequence[Chunk], stored: Stored, fixed: int) -> list[int] | None:
    """Each chunk's slot when the index names it in a part, or a part holds it
    intact; the others in the Actor's ConfigMap. None: they do not fit there."""
    slots = []
    for chunk in chunks:
        slot = stored.named.get(chunk.sha256, 0)
        if slot == 0:
            slot = next((s for s, held in sorted(stored.held.items())
                         if s and chunk.sha256 in held), 0)
        slots.append(slot)
    main = fixed + sum(_cost(c) if s == 0 else _ENTRY_ROOM for c, s in zip(chunks, slots,
                                                                          strict=True))
    return slots if main <= MAX_CONFIGMAP_BYTES else None


def _afresh(chunks: Sequence[Chunk], fixed: int) -> list[int] | None:
    """Each chunk's slot laid out afresh: all in the Actor's ConfigMap when they fit;
    else the header there, the rest filling the parts in order, what the parts
    cannot hold back in the Actor's ConfigMap. None: too large."""
    if fixed + sum(_cost(c) for c in chunks) <= MAX_CONFIGMAP_BYTES:
        return [0] * len(chunks)
    slots, part, used = [0], 1, 0
    main = fixed + _cost(chunks[0])
    for chunk in chunks[1:]:
        cost = _cost(chunk) - _ENTRY_ROOM
        if part < MAX_PARTS and used + cost > MAX_CONFIGMAP_BYTES:
            part, used = part + 1, 0
        if part < MAX_PARTS:
            slots.append(part)
            used += cost
        else:
            slots.append(0)
            main += cost
        main += _ENTRY_ROOM
    return slots if main <= MAX_CONFIGMAP_BYTES else None


def _laid_out(name: str, digest: str, size: int, chunks: Sequence[Chunk],
              slots: Sequence[int], bodies: Mapping[str, str]) -> Layout:
    names = [name, *(part_configmap_name(name, i) for i in range(1, MAX_PARTS))]
    entries = tuple(PackedChunk(key=chunk_key(s, c.sha256), config_map=names[s],
                                sha256=c.sha256, size=len(c.data))
                    for c, s in zip(chunks, slots, strict=True))
    index = PackedIndex(hash=digest, size=size, chunks=entries)
    binary: dict[int, dict[str, bytes]] = {s: {} for s in sorted({0, *slots})}
    for chunk, slot, entry in zip(chunks, slots, entries, strict=True):
        binary[slot][entry.key] = chunk.data
    main = StoredConfigMap(name, {INDEX_KEY: index.text(), **bodies}, binary.pop(0))
    return Layout((main, *(StoredConfigMap(names[s], {}, b) for s, b in binary.items())),
                  size, sum(len(c.data) for c in chunks))


#: The last few sets' chunks, by hash: an Actor's set is compared with its
#: ConfigMaps on every pass.
_PACKED: dict[str, tuple[Chunk, ...]] = {}
_PACKED_KEPT = 8


def _chunks(document: str, digest: str, tools: Sequence[EffectiveTool]) -> tuple[Chunk, ...]:
    found = _PACKED.get(digest)
    if found is None:
        paths: dict[int, str] = {}
        sizes = [len(tool_json(t, path_json(t.path, paths)).encode()) for t in tools]
        found = chunks(document.encode(), sizes)
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
