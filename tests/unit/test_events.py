"""The Event recorder: a burst folded, Warnings each posted, retries that make no
second Event, and every loss counted."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

import pytest

from skillop.model.names import ObjectRef
from skillop.operator import events as ev
from skillop.operator.events import Event, EventRecorder
from skillop.operator.kube.errors import NotLeader, WriteFailed
from skillop.operator.outputs import EventSpec

CHANGED = EventSpec("Normal", "ToolSetChanged", "12 tools (+1 -0 ~0), hash sha256:abc")
BROKEN = EventSpec("Warning", "DependencyFailed", "skill team-a/base is not Ready")


class Api:
    """Posts by name, as the API server keeps them: a name made twice is one Event.
    ``down`` makes that many posts fail first (after, maybe, making the Event)."""

    def __init__(self, *, down: int = 0, made_anyway: bool = False) -> None:
        self.kept: dict[str, Event] = {}
        self.attempts = 0
        self.down = down
        self.made_anyway = made_anyway

    async def post(self, event: Event) -> None:
        self.attempts += 1
        await asyncio.sleep(0)
        if self.down:
            self.down -= 1
            if self.made_anyway:  # made, and the answer lost
                self.kept[event.name] = event
            raise WriteFailed("post event: ProtocolError")
        self.kept.setdefault(event.name, event)


def _burst(n: int, spec: EventSpec = CHANGED,
           namespace: str = "team-a") -> list[tuple[str, ObjectRef, str, EventSpec]]:
    return [("Actor", ObjectRef(namespace, f"a{i:05d}"), f"uid-{i}", spec) for i in range(n)]


def _recorder(api: Api, tally: Counter[str], **kw: float) -> EventRecorder:
    return EventRecorder(api.post, outcome=lambda o, n: tally.update({o: n}), **kw)  # type: ignore[arg-type]


def _posted(recorder: EventRecorder, *batches: list[tuple[str, ObjectRef, str, EventSpec]],
            ) -> None:
    async def run() -> None:
        for batch in batches:
            recorder.submit(batch)
        await recorder.drain()

    asyncio.run(run())


def test_a_burst_of_10000_changes_posts_the_first_ones_and_one_for_the_rest() -> None:
    api, tally = Api(), Counter[str]()
    _posted(_recorder(api, tally), _burst(10_000))
    assert len(api.kept) == ev.BURST + 1
    combined = [e for e in api.kept.values() if e.spec.message.startswith("this one and")]
    assert len(combined) == 1
    assert combined[0].spec.reason == "ToolSetChanged"
    assert combined[0].ref == ObjectRef("team-a", f"a{ev.BURST:05d}")  # the first folded
    assert combined[0].spec.message.startswith(
        f"this one and {10_000 - ev.BURST - 1} other Actors of namespace team-a: 12 tools")
    assert tally == {"posted": ev.BURST + 1, "combined": 10_000 - ev.BURST}


def test_each_namespace_has_its_own_burst_and_a_new_window_its_own() -> None:
    api, tally = Api(), Counter[str]()
    now = [0.0]
    recorder = _recorder(api, tally, clock=lambda: now[0])  # type: ignore[arg-type]
    _posted(recorder, _burst(30, namespace="a"), _burst(3, namespace="b"))
    assert tally["posted"] == 25 + 1 + 3
    now[0] = ev.WINDOW_SECONDS  # the next window: a burst of its own
    _posted(recorder, _burst(10, namespace="a"))
    assert tally["posted"] == 25 + 1 + 3 + 10


def test_warnings_are_never_folded_and_go_first() -> None:
    api, tally = Api(), Counter[str]()
    recorder = _recorder(api, tally)
    _posted(recorder, [*_burst(100), *_burst(300, BROKEN)])
    warnings = [e for e in api.kept.values() if e.spec.type == "Warning"]
    assert sorted(e.ref.name for e in warnings) == [f"a{i:05d}" for i in range(300)]
    order = list(api.kept.values())
    assert all(e.spec.type == "Warning" for e in order[:300])
    assert tally == {"posted": 300 + 26, "combined": 75}


def test_a_post_whose_answer_was_lost_is_sent_again_under_its_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ev, "RETRY_DELAYS", (0.0,))
    api, tally = Api(down=3, made_anyway=True), Counter[str]()
    _posted(_recorder(api, tally), _burst(5, BROKEN))
    assert len(api.kept) == 5  # each once, though three were made and retried
    assert api.attempts == 8
    assert tally == {"posted": 5}


def test_the_api_server_down_for_a_while_loses_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ev, "RETRY_DELAYS", (0.0,))
    api, tally = Api(down=200), Counter[str]()
    _posted(_recorder(api, tally), _burst(20, BROKEN))
    assert sorted(e.ref.name for e in api.kept.values()) == [f"a{i:05d}" for i in range(20)]
    assert tally == {"posted": 20}


def test_what_cannot_be_posted_in_time_is_counted_and_logged_once(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(ev, "RETRY_DELAYS", (0.0,))
    now = [0.0]

    class Down(Api):
        async def post(self, event: Event) -> None:
            now[0] += 1.0  # every attempt takes a second of the clock
            await super().post(event)

    api, tally = Down(down=10**6), Counter[str]()
    recorder = _recorder(api, tally, clock=lambda: now[0], max_age=30.0)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, "skillop.events"):
        _posted(recorder, _burst(4, BROKEN))
    assert api.kept == {}
    assert tally == {"failed": 4}
    assert len(caplog.records) == 1
    assert "skillop_events_total{outcome='failed'}" in caplog.records[0].getMessage()


def test_a_full_queue_drops_normal_events_first_and_counts_them() -> None:
    api, tally = Api(), Counter[str]()
    recorder = _recorder(api, tally, capacity=10, burst=1000)
    _posted(recorder, [*_burst(8, BROKEN), *_burst(8, CHANGED, namespace="b")])
    kept = Counter(e.spec.type for e in api.kept.values())
    assert kept == {"Warning": 8, "Normal": 2}
    assert tally == {"posted": 10, "dropped": 6}


def test_a_replica_that_stops_leading_drops_what_it_had_and_counts_it() -> None:
    tally: Counter[str] = Counter()

    async def refused(event: Event) -> None:
        raise NotLeader("post event: not the leader")

    recorder = EventRecorder(refused, outcome=lambda o, n: tally.update({o: n}))
    _posted(recorder, _burst(3, BROKEN))
    assert tally == {"dropped": 3}


def test_names_are_unique_and_valid_for_long_object_names() -> None:
    recorder = EventRecorder(Api().post)
    long = ObjectRef("team-a", "x" * 253)
    recorder.submit([("Actor", long, "u", BROKEN)] * 50)
    names = [e.name for e in recorder._warnings]
    assert len(set(names)) == 50
    assert all(len(n) <= 253 and n.startswith("xxx") for n in names)


def test_spent_windows_of_many_namespaces_are_let_go() -> None:
    now = [0.0]
    recorder = EventRecorder(Api().post, clock=lambda: now[0])
    for i in range(1100):
        recorder.submit(_burst(1, namespace=f"ns-{i}"))
    now[0] = ev.WINDOW_SECONDS + 1
    recorder.submit(_burst(1, namespace="fresh"))
    assert list(recorder._windows) == [("fresh", "Actor", "Normal", "ToolSetChanged")]
