"""The operator's in-memory view of the cluster, fed by watch events.

It holds the resolver's Catalog (parsed Tools, Skills, Actors, SKILL.md
ConfigMaps, namespace labels, discovered MCP tool lists), the last status seen
or written for each Skill and Actor, the ConfigMaps skillop manages, and the
dependency index. ``upsert`` and ``remove`` return the keys whose change must
cascade; pure Python, no I/O, so it is unit-tested without a cluster.

The ConfigMap watch sees every ConfigMap of the watched namespaces, but the
store keeps the data only of those some Skill references (``agentSkills[].
configMapRef``): of the others it keeps the name, and of the ones skillop writes
a digest. A Skill that starts referencing a ConfigMap known only by name puts it
in ``wanted``; the Reconciler reads it from the API before resolving that Skill.

Watches miss deletions: after a watch gap (an API server restart, a "410 Gone")
kopf lists again and delivers what exists, never a DELETED event for what
vanished meanwhile. So the store remembers, for every object it holds, the epoch
of the event that last brought it (``epochs``; ``checkpoint`` starts a new epoch
when a listing is asked for) and, for every object whose content it keeps, its
uid (``uids``); ``reconcile_members`` drops whatever a fresh listing no longer
has, or has under another uid (deleted and re-created: a new object). Objects an
event brought after the listing was asked for are left alone: the listing may
predate them. A ConfigMap known by name only has no uid there: the store holds
nothing of it a re-created one could contradict, so only its name must still be
listed. Epochs are shared ints (one per check, not one per event), so an
unrelated ConfigMap costs the check one dict slot (bench/configmaps.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from skillop.model.canonical import json_digest
from skillop.model.manifest import (
    CLUSTER_KINDS,
    POLICY_KINDS,
    ConfigMapData,
    NamespaceInfo,
    Resource,
    parse_object,
)
from skillop.model.names import ObjectRef
from skillop.model.problems import Problem
from skillop.model.serverkeys import ServerKey
from skillop.operator.configmaps import ObservedConfigMap, Written, is_managed, observe_configmap
from skillop.operator.deps import (
    DependencyIndex,
    Key,
    actor_dependencies,
    held_ref,
    key,
    ref_of,
    server_dep,
    skill_dependencies,
)
from skillop.operator.names_only import NameTable
from skillop.operator.outputs import remembered
from skillop.operator.shared_items import SharedItems
from skillop.operator.specshare import SpecShare
from skillop.resolve.catalog import Catalog
from skillop.resolve.inject import Credentials, actor_of, gateway_container, mounted_credentials
from skillop.sources.mcp_tools import McpToolInfo


@dataclass
class Store:
    catalog: Catalog = field(default_factory=Catalog)
    deps: DependencyIndex = field(default_factory=DependencyIndex)
    statuses: dict[Key, dict[str, Any]] = field(default_factory=dict)
    managed: dict[ObjectRef, ObservedConfigMap] = field(default_factory=dict)
    invalid: dict[Key, tuple[Problem, ...]] = field(default_factory=dict)
    generations: dict[Key, int] = field(default_factory=dict)
    #: ConfigMaps that exist but that no Skill references: known by name only,
    #: each with the epoch of its last event (kept here, not in ``epochs``).
    unreferenced: NameTable = field(default_factory=NameTable)
    #: Referenced ConfigMaps whose data the store lacks: to read from the API.
    wanted: set[ObjectRef] = field(default_factory=set)
    #: Running actor pods with the gateway (injection on): Actor -> pod -> what
    #: its gateway mounts; and each pod's Actor, for deletions.
    pods: dict[ObjectRef, dict[str, Credentials]] = field(default_factory=dict)
    pod_actors: dict[ObjectRef, ObjectRef] = field(default_factory=dict)
    #: Per kind, every object held but the ConfigMaps known by name only: the
    #: epoch of the event that last brought it (``reconcile_members``).
    epochs: dict[str, dict[ObjectRef, int]] = field(default_factory=dict)
    #: Per kind, the uid of every object held but the ConfigMaps known by name only.
    uids: dict[str, dict[ObjectRef, str]] = field(default_factory=dict)
    #: The current epoch (``checkpoint``).
    epoch: int = 0
    #: Actors whose managed ConfigMap was seen deleted: checked to exist before it
    #: is re-created (``Reconciler._exists``).
    lost: set[ObjectRef] = field(default_factory=set)
    #: The last statuses the operator wrote, per object: each one's digest and the
    #: resourceVersion its write made (None when the answer did not say).
    echoes: dict[Key, tuple[tuple[str, str | None], ...]] = field(default_factory=dict)
    #: The status list items equal between objects, held once.
    items: SharedItems = field(default_factory=SharedItems, compare=False, repr=False)
    #: The parts of the specs held that are equal between objects, held once.
    specs: SpecShare = field(default_factory=SpecShare, compare=False, repr=False)

    # -- events -------------------------------------------------------------------
    def upsert(self, body: Mapping[str, Any]) -> set[Key]:
        """Record an object's current state; return the keys that changed."""
        kind = body.get("kind")
        meta = body.get("metadata") or {}
        ref = ObjectRef(meta.get("namespace", ""), meta.get("name", ""))  # held_ref if kept
        managed = kind == "ConfigMap" and is_managed(meta)
        if kind == "ConfigMap" and not managed and (
                ref in self.managed or not self.deps.has_users(key("ConfigMap", ref))):
            self.epochs.get("ConfigMap", {}).pop(ref, None)
            self.uids.get("ConfigMap", {}).pop(ref, None)
            return self._name_only(ref)
        ref = held_ref(ref.namespace, ref.name)
        self.epochs.setdefault(str(kind), {})[ref] = self.epoch
        self.uids.setdefault(str(kind), {})[ref] = str(meta.get("uid") or "")
        if managed:
            self.unreferenced.discard(ref)
            return self._managed_configmap(body)
        result = parse_object(body)
        obj = result.obj
        if kind in ("Tool", "Skill", "Actor", *POLICY_KINDS):
            if kind in CLUSTER_KINDS:
                ref = ObjectRef("", ref.name)
            k = key(str(kind), ref)
            version = meta.get("resourceVersion")
            foreign = self._status_seen(k, remembered(str(kind), body.get("status") or {}),
                                        str(version) if version else None)
            generation = meta.get("generation")
            return self._resource(k, obj, result.problems,
                                  generation if isinstance(generation, int) else 0) | foreign
        if isinstance(obj, ConfigMapData):
            old = self.catalog.configmaps.get(obj.meta.ref)
            self.catalog.configmaps[obj.meta.ref] = obj
            self.unreferenced.discard(obj.meta.ref)
            self.wanted.discard(obj.meta.ref)
            changed = old is None or old.data != obj.data
            return {key("ConfigMap", obj.meta.ref)} if changed else set()
        if isinstance(obj, NamespaceInfo):
            old_labels = self.catalog.namespaces.get(obj.name)
            self.catalog.namespaces[obj.name] = obj.labels
            return self._namespace_members(obj.name) if old_labels != obj.labels else set()
        return set()

    def remove(self, kind: str, namespace: str, name: str) -> set[Key]:
        ref = ObjectRef(namespace, name)
        self.epochs.get(kind, {}).pop(ref, None)
        self.uids.get(kind, {}).pop(ref, None)
        if kind == "ConfigMap":
            managed = self.managed.pop(ref, None)
            if managed is not None and managed.owner:
                self.lost.add(ObjectRef(namespace, managed.owner))
                return {key("Actor", ObjectRef(namespace, managed.owner))}
            self.unreferenced.discard(ref)
            self.wanted.discard(ref)
            return {key("ConfigMap", ref)} if self.catalog.configmaps.pop(ref, None) else set()
        if kind == "Namespace":
            self.catalog.namespaces.pop(name, None)
            return set()
        if kind in CLUSTER_KINDS:
            ref = ObjectRef("", name)
        k = key(kind, ref)
        table = self._table(kind)
        governed = self._governed(kind, ref) if kind in POLICY_KINDS else set()
        self.catalog.invalid.pop((kind, ref), None)
        existed = table.pop(ref, None) is not None or self.invalid.pop(k, None) is not None
        self.statuses.pop(k, None)
        self.echoes.pop(k, None)
        self.generations.pop(k, None)
        if kind == "Actor":
            self.lost.discard(ref)
        if kind in ("Skill", "Actor"):
            self._depend(k, set())
            self.deps.remove(k)
        if kind == "Skill":
            self.catalog.tool_defs.forget(ref)
        if kind in ("Tool", "Skill"):
            self.catalog.defs.forget((kind, ref))
        return ({k} | governed) if existed else set()

    def checkpoint(self) -> int:
        """Mark the moment a listing is asked for, and return it (``since`` for
        ``reconcile_members``): what an event brings from now on is in a later epoch."""
        since = self.epoch
        self.epoch += 1
        return since

    def reconcile_members(self, kind: str, listed: Mapping[ObjectRef, str], *,
                          since: int) -> set[Key]:
        """Drop each object of ``kind`` that a listing asked for at ``checkpoint``
        ``since`` does not hold (under the same uid, where the store keeps one);
        return the keys that changed.

        The listing is what the API server holds; an object whose last event came
        after ``since`` is newer than the listing may know, and stays.
        """
        uids = self.uids.get(kind, {})

        def gone(ref: ObjectRef) -> bool:
            uid = uids.get(ref)
            return ref not in listed or (uid is not None and listed[ref] != uid)

        held = [*self.epochs.get(kind, {}).items(),
                *(self.unreferenced.items() if kind == "ConfigMap" else ())]
        gone_refs = [ref for ref, epoch in held if epoch <= since and gone(ref)]
        changed: set[Key] = set()
        for ref in gone_refs:
            changed |= self.remove(kind, ref.namespace, ref.name)
        return changed

    def set_discovered(self, server: ServerKey, tools: tuple[McpToolInfo, ...]) -> set[Key]:
        if self.catalog.discovered.get(server) == tools:
            return set()
        self.catalog.discovered[server] = tools
        return {server_dep(server)}

    def set_accepted(self, skill: ObjectRef, server: str,
                     tools: tuple[McpToolInfo, ...] | None) -> set[Key]:
        """Record what a pinned server's skill has accepted (None: nothing yet)."""
        slot = (skill, server)
        if self.catalog.accepted.get(slot) == tools:
            return set()
        if tools is None:
            self.catalog.accepted.pop(slot, None)
        else:
            self.catalog.accepted[slot] = tools
        return {key("Skill", skill)}

    def upsert_pod(self, body: Mapping[str, Any]) -> set[Key]:
        """Record what a labelled pod's gateway mounts; the Actor's key when that
        changes (its status names the pods that are out of date)."""
        meta = body.get("metadata") or {}
        pod = ObjectRef(str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        actor = actor_of(body)
        phase = (body.get("status") or {}).get("phase")
        running = (actor is not None and not meta.get("deletionTimestamp")
                   and phase not in ("Succeeded", "Failed") and gateway_container(body))
        if not running or actor is None:
            return self.remove_pod(pod.namespace, pod.name)
        owner = ObjectRef(pod.namespace, actor)
        changed = self.remove_pod(pod.namespace, pod.name) if \
            self.pod_actors.get(pod, owner) != owner else set()
        mounted = mounted_credentials(body)
        table = self.pods.setdefault(owner, {})
        if table.get(pod.name) == mounted:
            return changed
        table[pod.name] = mounted
        self.pod_actors[pod] = owner
        return changed | {key("Actor", owner)}

    def remove_pod(self, namespace: str, name: str) -> set[Key]:
        owner = self.pod_actors.pop(ObjectRef(namespace, name), None)
        if owner is None:
            return set()
        table = self.pods.get(owner, {})
        table.pop(name, None)
        if not table:
            self.pods.pop(owner, None)
        return {key("Actor", owner)}

    def outdated_pods(self, actor: ObjectRef, needed: Credentials) -> tuple[str, ...]:
        """The Actor's pods whose gateway lacks something ``needed`` names, sorted."""
        return tuple(sorted(name for name, mounted in self.pods.get(actor, {}).items()
                            if needed.not_in(mounted)))

    def has_configmap(self, ref: ObjectRef) -> bool:
        """Whether a ConfigMap exists (the watch sees every one, by name at least)."""
        return ref in self.catalog.configmaps or ref in self.unreferenced or ref in self.managed

    def record_status(self, kind: str, ref: ObjectRef, status: Mapping[str, Any], *,
                      version: str | None = None) -> None:
        """Remember a status just written (``version``: the resourceVersion the write
        made), so an echo of it is no news."""
        k = key(kind, ref)
        self.statuses[k] = kept = self.items.share(remembered(kind, status))
        self.items.prune(self.statuses.values())
        self.echoes[k] = (*self.echoes.get(k, ())[-(ECHOES - 1):],
                          (_status_digest(kept), version))

    def _status_seen(self, k: Key, status: dict[str, Any], version: str | None) -> set[Key]:
        """Record a status a watch event carries; ``{k}`` if someone else wrote it.

        The status the operator wrote last is no news, nor is an event older than
        that write (the echo of an older write of its own, an annotation patch
        made before it: ``_superseded``); neither replaces the newer status. The
        same older status put back later by another writer (a former leader
        still writing, a restored backup) is newer than the operator's write and
        is repaired like any other change (a hand-written status, a tool from a
        former version): at once, not at the resync, as status must say what the
        ConfigMap holds (docs/operations.md, Faults).
        """
        old = self.statuses.get(k)
        if old == status:
            return set()
        if self._superseded(k, status, version):
            return set()
        self.statuses[k] = self.items.share(status)
        return {k} if old is not None else set()

    def _superseded(self, k: Key, status: dict[str, Any], version: str | None) -> bool:
        """Whether an event at ``version`` predates the operator's latest status write
        or is the echo of one of its recent writes. Told by resourceVersion, not
        content: a status equal to an older write of its own, put back later,
        carries a newer resourceVersion than any write the operator made."""
        writes = self.echoes.get(k, ())
        if writes and _older(version, writes[-1][1]):
            return True
        digest = _status_digest(status)
        # A write whose answer gave no resourceVersion is known by content only.
        return any(d == digest and (v is None or v == version) for d, v in writes)

    def record_configmap(self, configmap: Mapping[str, Any] | Written) -> None:
        self._managed_configmap(configmap)

    def forget_configmap(self, ref: ObjectRef) -> None:
        """A managed ConfigMap the operator deleted: its deletion's watch event is
        no news (no Actor to check, none to requeue)."""
        self.managed.pop(ref, None)

    # -- internals ----------------------------------------------------------------
    def _table(self, kind: str) -> dict[ObjectRef, Any]:
        return self.catalog.table(kind)

    def _governed(self, kind: str, ref: ObjectRef) -> set[Key]:
        """The Actors a policy governs as the store holds it now: those of the
        namespaces it applies to or, while it is invalid, of every namespace it may
        apply to (they are DependencyFailed meanwhile)."""
        policy = self.catalog.policies.get(ref)
        if policy is not None:
            return {key("Actor", r) for r in self.catalog.actors
                    if self.catalog.governs(policy, r.namespace)}
        if (kind, ref) in self.catalog.invalid:
            return {key("Actor", r) for r in self.catalog.actors
                    if ref.namespace in ("", r.namespace)}
        return set()

    def _resource(self, k: Key, obj: object, problems: tuple[Problem, ...],
                  generation: int) -> set[Key]:
        kind, ref = k[0], ref_of(k)
        if kind in POLICY_KINDS:
            # A policy's change reaches the Actors it governed and those it governs now.
            before, was = self._governed(kind, ref), self.invalid.get(k)
            changed = self._stored(k, obj, problems, generation)
            if not changed or (was is not None and was == self.invalid.get(k)):
                return changed  # a status echo: the Actors' inputs are the same
            return changed | before | self._governed(kind, ref)
        return self._stored(k, obj, problems, generation)

    def _stored(self, k: Key, obj: object, problems: tuple[Problem, ...],
                generation: int) -> set[Key]:
        kind, ref = k[0], ref_of(k)
        table = self._table(kind)
        old = table.get(ref)
        if not isinstance(obj, Resource):
            # Keep nothing half-parsed: the object is invalid and says why in status.
            self.invalid[k] = problems
            self.catalog.invalid[(kind, ref)] = problems[0].short() if problems else "invalid"
            self.generations[k] = generation  # the status's observedGeneration
            table.pop(ref, None)
            return {k}
        self.invalid.pop(k, None)
        self.catalog.invalid.pop((kind, ref), None)
        self.generations[k] = obj.meta.generation
        if old is not None and old.spec == obj.spec:
            # Keep the spec object a status echo would replace with an equal one:
            # what was derived from it stays valid (``Catalog.tool_defs``).
            obj = replace(obj, spec=old.spec)
        else:
            self.specs.share(obj.spec)
        table[ref] = obj
        self.specs.prune(self.catalog.specs())
        if kind == "Skill":
            self._depend(k, skill_dependencies(obj))
        elif kind == "Actor":
            self.deps.update(k, actor_dependencies(obj))
        # A new uid is a new object (deleted and re-created while no event came):
        # it has no status yet, whatever its spec.
        unchanged = (old is not None and old.meta.uid == obj.meta.uid
                     and old.spec == obj.spec and old.meta.labels == obj.meta.labels)
        return set() if unchanged else {k}

    def _depend(self, skill: Key, deps: set[Key]) -> None:
        """Record a Skill's dependencies, keeping the data of exactly the referenced
        ConfigMaps: newly referenced ones known by name only become wanted, ones no
        longer referenced by any Skill drop their data."""
        before = {d for d in self.deps.dependencies_of(skill) if d[0] == "ConfigMap"}
        self.deps.update(skill, deps)
        for dep in (d for d in deps - before if d[0] == "ConfigMap"):
            if ref_of(dep) in self.unreferenced:
                self.wanted.add(ref_of(dep))
        for dep in before - deps:
            if not self.deps.has_users(dep):
                ref = ref_of(dep)
                self.wanted.discard(ref)
                if self.catalog.configmaps.pop(ref, None) is not None:
                    # By name only now: no uid, and its epoch moves to the name table.
                    epoch = self.epochs.get("ConfigMap", {}).pop(ref, self.epoch)
                    self.unreferenced.add(ref, epoch)
                    self.uids.get("ConfigMap", {}).pop(ref, None)

    def take_wanted(self) -> set[ObjectRef]:
        """The referenced ConfigMaps to read from the API (each handed out once)."""
        out, self.wanted = self.wanted, set()
        return out

    def _managed_configmap(self, cm: Mapping[str, Any] | Written) -> set[Key]:
        meta = (cm.body if isinstance(cm, Written) else cm).get("metadata") or {}
        ref = ObjectRef(meta.get("namespace", ""), meta.get("name", ""))
        observed = observe_configmap(cm)
        old = self.managed.get(ref)
        self.managed[ref] = observed
        if old == observed or observed.owner is None:
            return set()
        return {key("Actor", ObjectRef(ref.namespace, observed.owner))}

    def _name_only(self, ref: ObjectRef) -> set[Key]:
        """A ConfigMap neither managed nor referenced: the store keeps its name."""
        old = self.managed.pop(ref, None)
        self.unreferenced.add(ref, self.epoch)  # not even parsed: nothing resolves with it
        if old is None or not old.owner:
            return set()
        # Its labels and owner were removed by hand: still the Actor's ConfigMap by
        # name, which the Actor's next write takes back.
        return {key("Actor", ObjectRef(ref.namespace, old.owner))}

    def _namespace_members(self, namespace: str) -> set[Key]:
        return ({key("Skill", r) for r in self.catalog.skills if r.namespace == namespace}
                | {key("Actor", r) for r in self.catalog.actors if r.namespace == namespace})

    def observed_configmap(self, ref: ObjectRef) -> ObservedConfigMap | None:
        return self.managed.get(ref)


#: Own writes per object whose echoes are recognised (a burst of writes to one
#: object is coalesced by the batch, so a few suffice).
ECHOES = 4


def _older(version: str | None, than: str | None) -> bool:
    """Whether resourceVersion ``version`` is older than ``than``. An API server on
    etcd gives the store's revision, an integer that grows with every write; any
    other form (or none) is not compared: not older."""
    if version is None or than is None or not (version.isdigit() and than.isdigit()):
        return False
    return int(version) < int(than)


def _status_digest(status: Mapping[str, Any]) -> str:
    """A status as the API server keeps it (a merge patch's nulls are absences)."""
    return json_digest({k: v for k, v in status.items() if v is not None})
