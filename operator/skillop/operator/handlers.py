"""kopf handlers: thin. They feed the store and ask the Reconciler for work.

* ``@kopf.index`` on every watched kind fills the store during the initial
  listing; kopf runs no other handler until every index is populated, so the
  first write happens only after the whole cluster state is known.
* ``on.event`` records deletions (indices see no deletion) and opens the gate.
* ``on.create/update/resume`` request the one idempotent reconcile of each
  Skill and Actor; the slow resync is the Reconciler's own timer
  (``Reconciler.resync``), not ``kopf.timer``: kopf timers put a finalizer on
  every object, so Skills and Actors could not be deleted while the operator is
  down, and each object would cost one more write.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from skillop.model.names import API_GROUP, API_VERSION
from skillop.operator.kube import Kube
from skillop.operator.runtime import Reconciler
from skillop.operator.settings import OperatorConfig, SettingsError
from skillop.operator.store import Store


def _import_config() -> OperatorConfig:
    """The settings the handlers are registered with (the webhook's, at import).

    A value that does not parse is reported by ``skillop operator`` before kopf
    starts (``main.run``), and raised by ``startup`` under ``kopf run``: never
    here, where it would be an import traceback.
    """
    try:
        return OperatorConfig.from_env()
    except SettingsError:
        return OperatorConfig()


CONFIG = _import_config()
TOOLS = (API_GROUP, API_VERSION, "tools")
SKILLS = (API_GROUP, API_VERSION, "skills")
ACTORS = (API_GROUP, API_VERSION, "actors")
CONFIGMAPS = ("", "v1", "configmaps")
NAMESPACES = ("", "v1", "namespaces")
KINDS = {TOOLS: "Tool", SKILLS: "Skill", ACTORS: "Actor", CONFIGMAPS: "ConfigMap",
         NAMESPACES: "Namespace"}

if CONFIG.webhook:  # the validating admission webhook (docs/webhook.md); off by default
    from skillop.operator import webhook as _webhook

    _webhook.register()


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    configure(settings)
    store = Store()
    writer = Kube(threads=CONFIG.write_concurrency)
    from skillop.operator.discovery import attach_discovery

    reconciler = Reconciler(store, writer, debounce=CONFIG.debounce_seconds,
                            concurrency=CONFIG.write_concurrency)
    memo.store, memo.writer, memo.reconciler = store, writer, reconciler
    # Read at start (not import) time, like a restart with new settings would.
    config = OperatorConfig.from_env()
    memo.discovery = (attach_discovery(store, reconciler, writer, config)
                      if config.mcp_discovery else None)
    memo.worker = asyncio.create_task(reconciler.run(), name="skillop-reconciler")
    memo.resync = asyncio.create_task(reconciler.resync(CONFIG.resync_seconds),
                                      name="skillop-resync")


def configure(settings: kopf.OperatorSettings) -> None:
    """kopf settings that keep skillop quiet on the API: no per-handler Events."""
    settings.posting.level = logging.WARNING
    settings.persistence.finalizer = "skillop.dev/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="skillop.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="skillop.dev", key="last-handled-configuration")
    settings.watching.server_timeout = 300
    settings.queueing.error_delays = [1, 2, 5, 10, 30, 60]
    if CONFIG.webhook:
        from skillop.operator import webhook

        webhook.configure(settings, CONFIG)


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    for task in (getattr(memo, "worker", None), getattr(memo, "resync", None)):
        if task is not None:
            task.cancel()
    discovery = getattr(memo, "discovery", None)
    if discovery is not None:
        await discovery.stop()
    writer = getattr(memo, "writer", None)
    if writer is not None:
        writer.close()


def _watch(resource: tuple[str, str, str]) -> None:
    """The store's feed for one kind: an index (all but deletions) and deletions."""
    kind = KINDS[resource]

    @kopf.index(*resource, id=f"{kind.lower()}-index")
    async def index(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
        memo.reconciler.mark(memo.store.upsert(body))
        discovery = getattr(memo, "discovery", None)
        if discovery is not None and kind == "Skill":
            discovery.skill_changed(body)

    @kopf.on.event(*resource, id=f"{kind.lower()}-event")
    async def event(type: str, name: str, namespace: str | None, memo: kopf.Memo,
                    **_: Any) -> None:
        memo.reconciler.loaded.set()  # kopf runs no handler before every index is full
        if type == "DELETED":
            memo.reconciler.mark(memo.store.remove(kind, namespace or "", name))
            discovery = getattr(memo, "discovery", None)
            if discovery is not None and kind == "Skill":
                discovery.skill_deleted(namespace or "", name)


for _resource in KINDS:
    _watch(_resource)


@kopf.on.resume(*SKILLS)
@kopf.on.create(*SKILLS)
@kopf.on.update(*SKILLS)  # type: ignore[arg-type]  # kopf types fn as ChangingFn
async def reconcile_skill(name: str, namespace: str, memo: kopf.Memo, **_: Any) -> None:
    memo.reconciler.loaded.set()
    memo.reconciler.request("Skill", namespace, name)


@kopf.on.resume(*ACTORS)
@kopf.on.create(*ACTORS)
@kopf.on.update(*ACTORS)  # type: ignore[arg-type]
async def reconcile_actor(name: str, namespace: str, memo: kopf.Memo, **_: Any) -> None:
    memo.reconciler.loaded.set()
    memo.reconciler.request("Actor", namespace, name)
