"""kopf handlers: thin. They feed the store and ask the Reconciler for work.

* ``@kopf.index`` on every watched kind fills the store during the initial
  listing; kopf runs no other handler until every index is populated, so the
  first write happens only after the whole cluster state is known. Each index
  update marks what changed (the store compares spec and labels).
* ``on.event`` records deletions (indices see no deletion) and opens the gate.
  An event from a listing (type None) asks for the store's membership check
  (``Reconciler.membership``): a re-list after a watch gap reports no deletion.
* No ``on.create/update/resume`` handlers: kopf would store its diff-base and
  progress in annotations on every object, a write per change by every replica
  (a standby included), while the index already sees every change. The slow
  resync is the Reconciler's own timer (``Reconciler.resync``), not
  ``kopf.timer``: kopf timers put a finalizer on every object, so Skills and
  Actors could not be deleted while the operator is down.
* ToolCallApprovals are followed by ``on.event`` alone (no index: nothing
  resolves with them) and handed to ``approval_keeper.ApprovalKeeper``.
* Leader election (``leader.Elector``, a Lease) decides which replica writes;
  every replica watches, and serves the webhook and ``/metrics`` (``health``).
* Sharding (``shard.Shard``): every installation watches the whole cluster and
  writes only the namespaces its selector matches; a Namespace whose labels move
  it into or out of this shard marks all of its objects.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable, Iterable
from typing import Any, cast

import kopf
from kopf._cogs.aiokits import aiotoggles
from kopf._core.reactor import orchestration, processing
from prometheus_client import CollectorRegistry

from skillop import __version__
from skillop.model.approval import PLURAL as APPROVALS
from skillop.model.names import ACTOR_LABEL, API_GROUP, API_VERSION
from skillop.operator.approval_keeper import ApprovalKeeper
from skillop.operator.credentials import CredentialChecker
from skillop.operator.echoes import ECHOES, drop_echoes, own_echo
from skillop.operator.events import EventRecorder
from skillop.operator.health import HealthServer
from skillop.operator.kube import Kube
from skillop.operator.leader import Elector, stop
from skillop.operator.metrics import Metrics
from skillop.operator.runtime import Reconciler
from skillop.operator.settings import OperatorConfig
from skillop.operator.shard import Shard
from skillop.operator.store import Store

TOOLS = (API_GROUP, API_VERSION, "tools")
SKILLS = (API_GROUP, API_VERSION, "skills")
ACTORS = (API_GROUP, API_VERSION, "actors")
SKILL_POLICIES = (API_GROUP, API_VERSION, "skillpolicies")
CLUSTER_SKILL_POLICIES = (API_GROUP, API_VERSION, "clusterskillpolicies")
CONFIGMAPS = ("", "v1", "configmaps")
NAMESPACES = ("", "v1", "namespaces")
KINDS = {TOOLS: "Tool", SKILLS: "Skill", ACTORS: "Actor", SKILL_POLICIES: "SkillPolicy",
         CLUSTER_SKILL_POLICIES: "ClusterSkillPolicy", CONFIGMAPS: "ConfigMap",
         NAMESPACES: "Namespace"}

log = logging.getLogger("skillop")
#: Objects per page of kopf's initial listing (as kubectl's pages).
LIST_CHUNK = 500


class SharedMemo(kopf.Memo):
    """The operator's memo, one object for every watched object.

    kopf keeps a record for each object it watches, with a shallow copy of the
    operator's memo (``copy.copy``) for that object's handlers: a dict of the 14
    values ``startup`` sets, about 490 bytes an object, 14 MiB at 30,000 objects
    (bench/kopf_memory.py). skillop's handlers only read it: the objects share it.
    """

    def __copy__(self) -> SharedMemo:
        return self


def register_webhook(config: OperatorConfig) -> None:
    """The validating admission handlers (docs/webhook.md) and the pod injector
    (docs/gateway.md, Injection), each when it is on; the approvals handler
    whenever either is."""
    if config.serves_webhooks:
        from skillop.operator import webhook

        webhook.register_approvals()  # approvals need it whenever the server runs
        if config.webhook:
            webhook.register()
        if config.injection:
            # kopf's managed configuration cannot select pods by their old labels.
            webhook.register_injection(pod_updates=not config.webhook_managed)
            _watch_pods()


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # The settings are read once, by ``skillop operator`` (main.run), and passed
    # down in the memo; under a bare ``kopf run -m skillop.operator`` they are
    # read here, at start (never at import), and the webhook registered with them.
    config = memo.get("config")
    if not isinstance(config, OperatorConfig):
        config = memo.config = OperatorConfig.from_env()
        register_webhook(config)
    configure(settings, config)
    memo.metrics = metrics = Metrics(CollectorRegistry())
    store = Store()
    writer = Kube(threads=config.write_concurrency,
                  user_agent=f"skillop/{__version__} ({config.lease.identity})")
    writer.metrics = metrics
    from skillop.operator.discovery import attach_discovery

    checker = (CredentialChecker(store, writer if config.secrets_readable else None)
               if config.injection else None)
    shard = Shard(config.shard_selector, cluster_owner=config.shard_cluster_owner,
                  labels=store.catalog.namespaces.get, reader=writer)
    reconciler = Reconciler(store, writer, debounce=config.debounce_seconds,
                            concurrency=config.write_concurrency, metrics=metrics,
                            credentials=checker, shard=shard,
                            stale_grace=config.stale_part_seconds,
                            events=EventRecorder(writer.create_event, outcome=metrics.event))
    memo.store, memo.writer, memo.reconciler = store, writer, reconciler
    ECHOES.judge = functools.partial(own_echo, store)  # before kopf's watches start
    memo.discovery = (attach_discovery(store, reconciler, writer, config)
                      if config.mcp_discovery else None)
    memo.health = await _health(config, metrics)
    memo.elector = _elector(config, writer, reconciler, metrics)
    memo.election = (asyncio.create_task(memo.elector.run(), name="skillop-election")
                     if memo.elector is not None else None)
    memo.worker = asyncio.create_task(reconciler.run(), name="skillop-reconciler")
    memo.events = asyncio.create_task(reconciler.events.run(), name="skillop-events")
    memo.resync = asyncio.create_task(reconciler.resync(config.resync_seconds),
                                      name="skillop-resync")
    memo.membership = asyncio.create_task(reconciler.membership(writer, config.namespaces),
                                          name="skillop-membership")
    memo.approvals = ApprovalKeeper(store, writer, metrics, shard=shard)
    memo.approval_sweep = asyncio.create_task(memo.approvals.sweep(),
                                              name="skillop-approval-sweep")


def _elector(config: OperatorConfig, writer: Kube, reconciler: Reconciler,
             metrics: Metrics) -> Elector | None:
    """Gate the reconciler and the API client on holding the Lease (if elected)."""
    if not config.lease.enabled:
        metrics.leading(True)
        return None

    def lead() -> None:
        metrics.leading(True)
        reconciler.lead()

    def follow() -> None:
        metrics.leading(False)
        reconciler.follow()

    def resume() -> None:
        metrics.leading(True)
        reconciler.resume()

    elector = Elector(writer, config.lease, on_lead=lead, on_follow=follow, on_resume=resume)
    writer.may_write = elector.may_write  # the renew deadline, checked at each write
    reconciler.follow()
    metrics.leading(False)
    return elector


async def _health(config: OperatorConfig, metrics: Metrics) -> HealthServer | None:
    """The liveness probe and /metrics (SKILLOP_LIVENESS), if asked for."""
    if not config.liveness:
        return None
    server = HealthServer(config.liveness, metrics.registry)
    await server.start()
    return server


def configure(settings: kopf.OperatorSettings, config: OperatorConfig) -> None:
    """kopf settings that keep skillop quiet on the API: no per-handler Events."""
    settings.posting.level = logging.WARNING
    settings.persistence.finalizer = "skillop.dev/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="skillop.dev")
    settings.persistence.diffbase_storage = StatuslessDiffBaseStorage(
        prefix="skillop.dev", key="last-handled-configuration",
        compares_bodies=compares_bodies(kopf.get_default_registry()))
    settings.watching.server_timeout = 300
    # The initial listing in pages: each page's objects are indexed (and their
    # bodies shed, ``shed``) while the next is fetched, where one list of every
    # object of a kind was parsed and held whole before any was indexed.
    settings.watching.chunk_size = LIST_CHUNK
    settings.queueing.error_delays = [1, 2, 5, 10, 30, 60]
    if config.serves_webhooks:
        from skillop.operator import webhook

        webhook.configure(settings, config)


def compares_bodies(registry: kopf.OperatorRegistry) -> bool:
    """Whether any handler reads kopf's diff of an object's old and new essence:
    only changing (on.create/update/...) and spawning (daemons, timers) ones do."""
    return bool(registry._changing.get_all_handlers() or registry._spawning.get_all_handlers())


class StatuslessDiffBaseStorage(kopf.AnnotationsDiffBaseStorage):
    """kopf's diff-base, without deep-copying what no handler compares.

    kopf builds a diff-base for every watch event, handlers or not, starting with a
    deep copy of the whole body (and another of that essence, without its progress
    annotations). With no changing or spawning handler (``compares_bodies`` false:
    skillop's index and event handlers never see the diff) the essence is empty: no
    copy at all. Otherwise the status is left out before the copy, as no handler is
    on status fields (``extra_fields`` is empty); an Actor's status (up to 256 tool
    items) is most of its body and every status write comes back as an event.
    """

    def __init__(self, *, prefix: str, key: str, compares_bodies: bool = True) -> None:
        super().__init__(prefix=prefix, key=key)
        self.compares_bodies = compares_bodies

    def build(self, *, body: kopf.Body,
              extra_fields: Iterable[kopf.FieldSpec] | None = None) -> kopf.BodyEssence:
        if not self.compares_bodies:
            return cast(kopf.BodyEssence, {})
        if extra_fields or "status" not in body:
            return super().build(body=body, extra_fields=extra_fields)
        lean = kopf.Body(cast(kopf.RawBody, {k: v for k, v in body.items() if k != "status"}))
        return super().build(body=lean, extra_fields=extra_fields)


class _WakeOnChange(asyncio.Condition):
    """A toggle set's condition whose ``notify_all`` wakes the waiters only when the
    set's state (on/off) changed since the last notification."""

    def __init__(self, toggles: aiotoggles.ToggleSet) -> None:
        super().__init__()
        self._toggles = toggles
        self._state: bool | None = None  # unknown before the first notification

    def notify_all(self) -> None:
        state = self._toggles.is_on()
        if state != self._state:
            self._state = state
            super().notify_all()


class WakeOnChangeToggleSet(aiotoggles.ToggleSet):
    """kopf's toggle set, whose waiters are woken when the state they wait for comes.

    kopf gates handling on the initial listing with one toggle per listed object
    in a set: each object's worker drops its toggle, then waits for the set to be
    on. Every drop woke every waiting worker to re-check, N^2 wake-ups for N
    objects (most of a restart's start-up at 1,000 Actors). The set's state only
    changes when the last toggle goes, so the waiters are woken then. Correct as
    long as every change of a toggle or of the set notifies under the condition,
    and nothing waits on a single toggle of a set: ``kopf_fits_wake_on_change``.
    """

    def __init__(self, fn: Callable[[Iterable[bool]], bool]) -> None:
        super().__init__(fn)
        self._condition = _WakeOnChange(self)


def kopf_fits_wake_on_change() -> bool:
    """Whether kopf's toggles are as ``WakeOnChangeToggleSet`` expects (kopf 1.45)."""
    notifying = (aiotoggles.ToggleSet.make_toggle, aiotoggles.ToggleSet.drop_toggle,
                 aiotoggles.ToggleSet.drop_toggles, aiotoggles.Toggle.turn_to)
    waiting = inspect.getsource(aiotoggles.ToggleSet.wait_for)
    return (all("self._condition.notify_all()" in inspect.getsource(f) for f in notifying)
            and "self._condition.wait_for(" in waiting
            and "aiotoggles.ToggleSet(all)" in inspect.getsource(orchestration)
            and "operator_indexed.wait_for(True)" in inspect.getsource(processing))


def wake_on_change() -> bool:
    """Make kopf's toggle sets ``WakeOnChangeToggleSet``s, if kopf is as expected;
    otherwise leave kopf as it is (correct, only slower to start) and say so."""
    if aiotoggles.ToggleSet is WakeOnChangeToggleSet:
        return True
    if not kopf_fits_wake_on_change():
        log.warning("kopf %s: its toggles are not as expected; the start-up gate "
                    "wakes every waiter on each object", _kopf_version())
        return False
    aiotoggles.ToggleSet = WakeOnChangeToggleSet  # type: ignore[misc]
    return True


def _kopf_version() -> str:
    from importlib.metadata import version

    return version("kopf")


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    ECHOES.judge = None
    await stop(getattr(memo, "election", None))
    elector = getattr(memo, "elector", None)
    if elector is not None:
        await elector.release()  # stops writing first; a standby takes over at once
    for task in (getattr(memo, "worker", None), getattr(memo, "resync", None),
                 getattr(memo, "membership", None), getattr(memo, "approval_sweep", None),
                 getattr(memo, "events", None)):
        if task is not None:
            task.cancel()
    discovery = getattr(memo, "discovery", None)
    if discovery is not None:
        await discovery.stop()
    health = getattr(memo, "health", None)
    if health is not None:
        await health.stop()
    writer = getattr(memo, "writer", None)
    if writer is not None:
        writer.close()


def _watch(resource: tuple[str, str, str]) -> None:
    """The store's feed for one kind: an index (all but deletions) and deletions."""
    kind = KINDS[resource]

    @kopf.index(*resource, id=f"{kind.lower()}-index")
    async def index(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
        name = str((body.get("metadata") or {}).get("name") or "")
        owned = kind == "Namespace" and memo.reconciler.shard.owns(name)
        changed = memo.store.upsert(body)
        if kind == "Namespace" and memo.reconciler.shard.owns(name) != owned:
            changed = changed | memo.reconciler.of_namespace(name)  # moved between shards
        memo.reconciler.mark(changed)
        discovery = getattr(memo, "discovery", None)
        if discovery is not None and kind == "Skill":
            discovery.skill_changed(body)
        elif discovery is not None and kind == "ConfigMap" and changed:
            meta = body.get("metadata") or {}
            discovery.configmap_changed(meta.get("namespace") or "", meta.get("name") or "")
        shed(body)

    @kopf.on.event(*resource, id=f"{kind.lower()}-event")
    async def event(type: str | None, name: str, namespace: str | None, memo: kopf.Memo,
                    **_: Any) -> None:
        memo.reconciler.loaded.set()  # kopf runs no handler before every index is full
        if type is None:  # a listing: after a watch gap, deletions went unreported
            memo.reconciler.relisted(kind)
        elif type == "DELETED":
            memo.reconciler.mark(memo.store.remove(kind, namespace or "", name))
            discovery = getattr(memo, "discovery", None)
            if discovery is not None and kind == "Skill":
                discovery.skill_deleted(namespace or "", name)


#: What of a watched object only its index reads: the store has taken what it keeps.
_SHED = ("spec", "status", "data", "binaryData")


def shed(body: kopf.Body) -> None:
    """Drop from kopf's copy of an object what only the index handler reads.

    During the initial listing kopf holds each object's body in its worker until
    every object of every kind is indexed (its start-up gate), then runs the event
    handlers: a restart held every Actor (with its status) and every ConfigMap
    (with its tool set) at once, where a first start meets them a few at a time
    (34 MiB of a restart's 282 at 2,000 Actors, docs/benchmarks.md). Past the
    index, kopf reads the metadata only (skillop has no changing handler and an
    empty diff-base, ``StatuslessDiffBaseStorage``) and skillop's event handlers
    read names; so the parts are dropped from the parsed body, which nothing
    else refers to (the store keeps its own values).
    """
    raw = body._src  # kopf.Body is a view over the parsed event's object
    if isinstance(raw, dict):
        for part in _SHED:
            raw.pop(part, None)


def _watch_pods() -> None:
    """Actor pods (label skillop.dev/actor), for the Actors' outdatedPods: what each
    pod's gateway mounts, and deletions. Only with injection on (its RBAC too)."""
    pods = ("", "v1", "pods")
    labelled = {ACTOR_LABEL: kopf.PRESENT}

    @kopf.index(*pods, labels=labelled, id="pod-index")
    async def index(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
        memo.reconciler.mark(memo.store.upsert_pod(body))
        shed(body)

    @kopf.on.event(*pods, labels=labelled, id="pod-event")
    async def event(type: str, name: str, namespace: str | None, memo: kopf.Memo,
                    **_: Any) -> None:
        if type == "DELETED":
            memo.reconciler.mark(memo.store.remove_pod(namespace or "", name))


for _resource in KINDS:
    _watch(_resource)
wake_on_change()
drop_echoes()


@kopf.on.event(API_GROUP, API_VERSION, APPROVALS, id="toolcallapproval-event")
async def approval_event(type: str, body: kopf.Body, name: str, namespace: str | None,
                         memo: kopf.Memo, **_: Any) -> None:
    keeper: ApprovalKeeper | None = getattr(memo, "approvals", None)
    if keeper is None:
        return
    if not memo.reconciler.shard.owns(namespace or ""):
        return  # another shard's: its keeper marks, expires and cleans it up
    if type == "DELETED":
        keeper.deleted(namespace or "", name)
    else:
        await keeper.observed(body)
