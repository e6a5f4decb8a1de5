"""The echo filter wraps a kopf internal (``watching.infinite_watch``, see
operator/echoes.py): the installed kopf is in the range pyproject.toml pins, its
watch stream has the shape the wrapper relies on, and once wrapped, kopf's own
watcher (``queueing.watcher``) hands its workers every event but the echo."""

from __future__ import annotations

import asyncio
import functools
import inspect
import typing
from collections.abc import AsyncIterator
from typing import Any

import kopf
import pytest
from kopf._cogs.clients import watching
from kopf._cogs.structs import bodies, references
from kopf._core.reactor import queueing
from test_echoes import configmap

from pinkit import installed_within_pin
from skillop.operator import echoes
from skillop.operator.echoes import EchoFilter, drop_echoes, kopf_fits_echo_filter, own_echo
from skillop.operator.store import Store

CONFIGMAPS = references.Resource(group="", version="v1", plural="configmaps")


def test_the_installed_kopf_is_the_one_the_filter_was_checked_against() -> None:
    installed_within_pin("kopf")


def test_the_watch_stream_is_an_async_generator_of_keyword_arguments() -> None:
    import skillop.operator  # noqa: F401  (wraps the stream, keeping kopf's as ``wrapped``)

    stream = getattr(watching.infinite_watch, "wrapped", watching.infinite_watch)
    assert inspect.isasyncgenfunction(stream)
    params = inspect.signature(stream).parameters
    assert {"settings", "resource", "namespace", "operator_paused"} <= set(params)
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    # The events the filter reads: a type and the object's body, as a dict.
    assert set(typing.get_type_hints(bodies.RawEvent)) == {"type", "object"}
    assert "MODIFIED" in typing.get_args(typing.get_type_hints(bodies.RawEvent)["type"])
    # kopf's watcher looks the stream up on the module when it starts, so the wrap counts.
    assert "watching.infinite_watch(" in inspect.getsource(queueing.watcher)
    assert {"group", "plural"} <= set(inspect.signature(references.Resource).parameters)


def test_an_unexpected_stream_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    async def positional(settings: Any, resource: Any) -> AsyncIterator[Any]:
        yield None

    monkeypatch.setattr(watching, "infinite_watch", positional)
    assert not kopf_fits_echo_filter()
    assert not drop_echoes()
    assert watching.infinite_watch is positional


def test_kopfs_watcher_drops_the_echo_and_passes_another_change(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store()
    store.record_configmap(configmap("a-tools", "10"))
    sent = [{"type": "MODIFIED", "object": configmap("a-tools", "10")},  # the write's echo
            {"type": "MODIFIED", "object": configmap("a-tools", "11", data="[]")},  # a hand edit
            {"type": "DELETED", "object": configmap("a-tools", "11", data="[]")}]
    asked: list[Any] = []

    async def api_stream(*, settings: Any, resource: Any, namespace: Any,
                         operator_paused: Any = None) -> AsyncIterator[Any]:
        asked.append(resource)
        yield watching.Bookmark.LISTED
        for event in sent:
            yield event

    filtered = EchoFilter()
    filtered.judge = functools.partial(own_echo, store)
    monkeypatch.setattr(echoes, "ECHOES", filtered)
    monkeypatch.setattr(watching, "infinite_watch", api_stream)
    assert drop_echoes()
    assert watching.infinite_watch is not api_stream

    handled: list[Any] = []

    async def processor(*, raw_event: Any, **_: Any) -> None:
        handled.append(raw_event)

    asyncio.run(queueing.watcher(namespace=None, settings=kopf.OperatorSettings(),
                                 resource=CONFIGMAPS, processor=processor))
    assert handled == sent[1:]
    assert filtered.dropped == 1
    assert asked == [CONFIGMAPS]
