"""Watch events that only echo the operator's own writes, dropped before kopf.

Every ConfigMap and status the operator writes comes back on its watches as a
MODIFIED event with the resourceVersion the write's answer gave. The store
already holds exactly that version (``Store.record_configmap``,
``Store.record_status``), so the event says nothing new; yet kopf would start a
worker for it, build its bodies and run the index and event handlers, and the
index would parse the object again (an Actor's spec, a ConfigMap's digest): per
changed Actor, two such events, each costing more than the write that caused it.

``EchoFilter`` wraps kopf's watch stream (``infinite_watch``) and lets through
every event but a MODIFIED Actor or ConfigMap that the store names as the echo
of its latest write (``Store.own_echo``: same object, same resourceVersion). A
change by anyone else, an older event, a deletion, a listing: all go on to kopf
as before. kopf needs no event it is not shown: skillop has no changing or
spawning handler, so kopf keeps no diff-base or progress for these objects.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import Any, cast

from kopf._cogs.clients import watching
from kopf._core.reactor import queueing

from skillop.model.names import ObjectRef
from skillop.operator.deps import key
from skillop.operator.store import Store

log = logging.getLogger("skillop")

#: The watched resources whose echoes are dropped: (group, plural) -> kind.
KINDS = {("skillop.dev", "actors"): "Actor", ("", "configmaps"): "ConfigMap"}

Judge = Callable[[str, Mapping[str, Any]], bool]


class EchoFilter:
    """Drops the echoes of the operator's writes from kopf's watch streams, once
    ``judge`` is set (the store's ``own_echo``, at start-up); counts them."""

    def __init__(self) -> None:
        self.judge: Judge | None = None
        self.dropped = 0

    def keeps(self, kind: str | None, raw: Any) -> bool:
        """Whether a raw watch event goes on to kopf."""
        judge = self.judge
        if judge is None or kind is None or not isinstance(raw, dict):
            return True
        if raw.get("type") != "MODIFIED":
            return True
        body = raw.get("object")
        if not isinstance(body, dict) or not judge(kind, body):
            return True
        self.dropped += 1
        return False

    def wrap(self, stream: Callable[..., AsyncIterator[Any]],
             ) -> Callable[..., AsyncIterator[Any]]:
        """``infinite_watch`` with the echoes of its resource left out."""
        async def filtered(*, resource: Any, **kwargs: Any) -> AsyncIterator[Any]:
            kind = KINDS.get((str(getattr(resource, "group", "")),
                              str(getattr(resource, "plural", ""))))
            events = cast(AsyncGenerator[Any, None], stream(resource=resource, **kwargs))
            async with contextlib.aclosing(events):
                async for raw in events:
                    if self.keeps(kind, raw):
                        yield raw

        filtered.wrapped = stream  # type: ignore[attr-defined]
        return filtered


ECHOES = EchoFilter()


def own_echo(store: Store, kind: str, body: Mapping[str, Any]) -> bool:
    """Whether ``body`` (an Actor's or a managed ConfigMap's, from a watch event) is
    the version the operator's latest write to it made: the resourceVersion its
    answer gave, which the store recorded with what was written. Such an event
    still counts as the object's latest sighting (its epoch, ``Store.epochs``)."""
    meta = body.get("metadata")
    if not isinstance(meta, Mapping):
        return False
    version = meta.get("resourceVersion")
    ref = ObjectRef(str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    if not version:
        return False
    if kind == "ConfigMap":
        seen = store.managed.get(ref)
        mine = seen is not None and seen.resource_version == str(version)
    elif kind == "Actor":
        writes = store.echoes.get(key("Actor", ref), ())
        mine = bool(writes) and writes[-1][1] == str(version)
    else:
        return False
    epochs = store.epochs.get(kind, {})
    if mine and ref in epochs:
        epochs[ref] = store.epoch
    return mine


def kopf_fits_echo_filter() -> bool:
    """Whether kopf's watcher reads its stream as ``EchoFilter.wrap`` expects (kopf
    1.45): by the module attribute, with keyword arguments, resource among them."""
    source = inspect.getsource(queueing.watcher)
    params = inspect.signature(getattr(watching.infinite_watch, "wrapped",
                                       watching.infinite_watch)).parameters
    return ("watching.infinite_watch(" in source and "resource" in params
            and all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values()))


def drop_echoes() -> bool:
    """Put ``ECHOES`` in kopf's watch stream, if kopf is as expected; otherwise
    leave kopf as it is (correct, only busier) and say so."""
    if hasattr(watching.infinite_watch, "wrapped"):
        return True
    if not kopf_fits_echo_filter():
        log.warning("kopf's watch stream is not as expected: the echoes of the "
                    "operator's own writes go through kopf's handlers")
        return False
    watching.infinite_watch = ECHOES.wrap(watching.infinite_watch)
    return True
