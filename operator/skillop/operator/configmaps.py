"""The ConfigMaps skillop writes for an Actor: their bodies (labels, the hash
annotation, the Actor as controller owner), and what the operator keeps of one it
observes, enough to tell it from the one it would write."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from skillop.model.canonical import bytes_digest
from skillop.model.manifest import ActorResource
from skillop.model.names import ACTOR_LABEL, API_GROUP, GROUP_VERSION
from skillop.model.toolset import (
    INDEX_KEY,
    MAX_PARTS,
    PACKED_KEY,
    PackedIndex,
    chunk_key,
    part_configmap_name,
)
from skillop.resolve.layout import Stored
from skillop.resolve.toolset import StoredConfigMap

MANAGED_BY = {"app.kubernetes.io/managed-by": "skillop"}
HASH_ANNOTATION = "skillop.dev/tools-hash"


@dataclass(frozen=True, slots=True)
class ObservedConfigMap:
    """What the operator knows of a ConfigMap it manages."""

    name: str
    owner: str | None
    tools_hash: str | None
    data_digest: str
    #: The uid its Actor ownerReference names (None: none); a ConfigMap whose
    #: owner is not the Actor by uid is rewritten (the garbage collector follows
    #: the uid, and deletes a ConfigMap whose owner is gone).
    owner_uid: str | None = None
    #: Both labels (managed-by, and the Actor's name) are as written.
    labelled: bool = True
    #: The resourceVersion seen (a watch event's, or the answer to its own
    #: write): a rewrite asserts it, so a replica that lost the Lease while its
    #: write was on the way cannot overwrite what the new leader wrote since.
    #: Not part of what the ConfigMap says: an echo of its own write is no news.
    resource_version: str | None = field(default=None, compare=False)
    #: A packed set's chunks it holds: (key, sha256 of the bytes under it).
    chunks: frozenset[tuple[str, str]] = frozenset()
    #: The index it holds (the Actor's ConfigMap of a packed set): each chunk's
    #: (ConfigMap, sha256), in order.
    index: tuple[tuple[str, str], ...] = ()

    def needs_rewrite(self, actor: ActorResource, data: str, tools_hash: str) -> bool:
        """Whether the ConfigMap differs from the one ``actor`` should have."""
        return (self.data_digest != data or self.tools_hash != tools_hash
                or self.owner_uid != actor.meta.uid or not self.labelled)

    def holds(self, actor: ActorResource, part: StoredConfigMap) -> bool:
        """Whether this part is ``actor``'s and holds every chunk of ``part`` intact
        (beside it, chunks of an index no longer current are no harm)."""
        wanted = {(key, bytes_digest(value)) for key, value in part.binary.items()}
        return (self.owner_uid == actor.meta.uid and self.labelled
                and wanted <= self.chunks)


def is_managed(meta: Mapping[str, Any]) -> bool:
    """A ConfigMap skillop writes: its managed-by label, or an Actor as controller
    owner (a user may delete a label; the ownerReference is what ownership is)."""
    return _managed_label(meta.get("labels") or {}) or _actor_owner(meta) is not None


def _managed_label(labels: Mapping[str, Any]) -> bool:
    return all(labels.get(k) == v for k, v in MANAGED_BY.items())


def _actor_owner(meta: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((o for o in meta.get("ownerReferences") or []
                 if isinstance(o, Mapping) and o.get("kind") == "Actor"
                 and str(o.get("apiVersion", "")).startswith(f"{API_GROUP}/")), None)


@dataclass(frozen=True, slots=True)
class Written:
    """An Actor's ConfigMap as the operator writes it, with its data's digest
    (``data_digest``), which the store then need not compute again. Both come of
    one ``StoredConfigMap`` (``written_configmap``), so the digest is this body's."""

    body: dict[str, Any]
    digest: str

    def at(self, version: str | None) -> Written:
        """As the write's answer gave it: at ``version`` (metadata only: same digest)."""
        return Written(versioned(self.body, version), self.digest)


def written_configmap(actor: ActorResource, stored: StoredConfigMap, tools_hash: str,
                      observed: ObservedConfigMap | None) -> Written | None:
    """The Actor's ConfigMap of ``stored``, if it differs from the one ``observed``
    (its body made only then)."""
    digest = stored_digest(stored)
    if not differs(actor, digest, tools_hash, observed):
        return None
    return Written(configmap_body(actor, stored, tools_hash), digest)


def versioned(body: dict[str, Any], version: str | None) -> dict[str, Any]:
    """``body`` asserting ``version`` (None: as it is)."""
    if version is None:
        return body
    return {**body, "metadata": {**body["metadata"], "resourceVersion": version}}


def observe_configmap(configmap: Mapping[str, Any] | Written) -> ObservedConfigMap:
    """What the store keeps of a managed ConfigMap: enough to tell it from the one
    the operator would write. Its Actor: the ownerReference's, else the label's
    (an ownerless ConfigMap, after ``kubectl delete actor --cascade=orphan``).
    A ConfigMap just written (``Written``) brings its data's digest."""
    body, digest = ((configmap.body, configmap.digest) if isinstance(configmap, Written)
                    else (configmap, None))
    meta = body.get("metadata") or {}
    labels = meta.get("labels") or {}
    owner_ref = _actor_owner(meta)
    owner = (owner_ref.get("name") if owner_ref is not None else None) or \
        labels.get(ACTOR_LABEL) or None
    return ObservedConfigMap(
        name=str(meta.get("name", "")), owner=str(owner) if owner else None,
        tools_hash=(meta.get("annotations") or {}).get(HASH_ANNOTATION),
        data_digest=digest or data_digest(body.get("data") or {}, body.get("binaryData") or {}),
        owner_uid=str(owner_ref.get("uid")) if owner_ref is not None else None,
        labelled=(_managed_label(labels) and owner is not None
                  and labels.get(ACTOR_LABEL) == owner),
        resource_version=str(meta["resourceVersion"]) if meta.get("resourceVersion") else None,
        chunks=_chunks(body.get("binaryData") or {}),
        index=_index((body.get("data") or {}).get(INDEX_KEY)))


def _chunks(binary: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
    out = set()
    for key, value in binary.items():
        if key.startswith(f"{PACKED_KEY}."):
            try:
                out.add((key, bytes_digest(base64.b64decode(str(value), validate=True))))
            except (binascii.Error, ValueError):
                continue  # not intact: written again where the index needs it
    return frozenset(out)


def _index(raw: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, str):
        return ()
    try:
        index = PackedIndex.parse(raw)
    except ValidationError:
        return ()  # edited: the Actor's ConfigMap is written again whole
    return tuple((c.config_map, c.sha256) for c in index.chunks)


def stored_set(actor: ActorResource, name: str, observed: ObservedConfigMap | None,
               parts: Mapping[str, ObservedConfigMap]) -> Stored:
    """What the API server holds of ``actor``'s packed set (its ConfigMap ``name``):
    where the current index names each chunk, and the chunks each part of the
    Actor's holds intact under the key its slot gives them."""
    slots = {part_configmap_name(name, i): i for i in range(1, MAX_PARTS)}
    slots[name] = 0
    named = {sha: slots[cm] for cm, sha in (observed.index if observed else ())
             if cm in slots}
    held = {slots[n]: frozenset(sha for key, sha in seen.chunks
                                if key == chunk_key(slots[n], sha))
            for n, seen in parts.items()
            if n in slots and seen.owner_uid == actor.meta.uid}
    return Stored(named=named, held=held)


def data_digest(data: Mapping[str, str], binary: Mapping[str, str] | None = None) -> str:
    """sha256 of a ConfigMap's data (keys and values, NUL-separated: no re-encoding),
    then of its ``binaryData`` (base64, as the API serves it) when it has any."""
    digest = hashlib.sha256()
    for k in sorted(data):
        digest.update(k.encode())
        digest.update(b"\0")
        digest.update(str(data[k]).encode())
        digest.update(b"\0")
    for k in sorted(binary or {}):
        digest.update(b"\1" + k.encode() + b"\0" + str((binary or {})[k]).encode() + b"\0")
    return digest.hexdigest()


def base64_values(binary: Mapping[str, bytes]) -> dict[str, str]:
    return {k: base64.b64encode(v).decode() for k, v in binary.items()}


def stored_digest(stored: StoredConfigMap) -> str:
    """``data_digest`` of the ConfigMap ``configmap_body`` makes of ``stored``."""
    return data_digest(stored.data, base64_values(stored.binary))


def differs(actor: ActorResource, digest: str, tools_hash: str,
            observed: ObservedConfigMap | None) -> bool:
    """Whether the Actor's ConfigMap (its data's ``stored_digest``) is to be written."""
    return observed is None or observed.needs_rewrite(actor, digest, tools_hash)


def configmap_body(actor: ActorResource, stored: StoredConfigMap, tools_hash: str | None,
               ) -> dict[str, Any]:
    """One ConfigMap of the set. The Actor's carries the set's hash; a part none
    (``tools_hash`` None): it may hold chunks of several versions, and the index
    says which are whose."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": stored.name,
            "namespace": actor.meta.namespace,
            "labels": {**MANAGED_BY, ACTOR_LABEL: actor.meta.name},
            **({"annotations": {HASH_ANNOTATION: tools_hash}} if tools_hash else {}),
            "ownerReferences": [{
                "apiVersion": GROUP_VERSION, "kind": "Actor", "name": actor.meta.name,
                "uid": actor.meta.uid, "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "data": dict(stored.data),
    }
    if stored.binary:
        body["binaryData"] = base64_values(stored.binary)
    return body

