"""A large set's chunks (``resolve.packing``): pieces of ``tools.json`` cut at tool
boundaries chosen by content, each a gzip member; and the grace before a part no
index names is deleted (``operator.staleparts``)."""

from __future__ import annotations

import gzip
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from skillop.model.names import ObjectRef
from skillop.operator.configmaps import ObservedConfigMap
from skillop.operator.staleparts import StaleParts
from skillop.resolve.packing import MAX_PIECE, chunks, pieces

HEADER = b'{"actor":"team-a/dev","hash":"sha256:00","tools":['


def _document(tools: list[bytes], header: bytes = HEADER) -> bytes:
    return header + b",".join(tools) + b"]}\n"


def _tools(count: int, seed: int, size: int = 1200) -> list[bytes]:
    rng = random.Random(seed)
    return [b'{"name":"t%d","description":"%s"}' % (i, rng.randbytes(size).hex().encode())
            for i in range(count)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=2, max_size=200_000), max_size=40),
       st.binary(max_size=600_000))
def test_the_pieces_are_the_document_and_none_is_too_large(tools: list[bytes],
                                                           header: bytes) -> None:
    head = b'{"servers":"' + header + b'","tools":['
    document = _document(tools, head)
    cut = pieces(document, [len(t) for t in tools])
    assert b"".join(cut) == document
    assert all(0 < len(p) <= MAX_PIECE for p in cut)
    if tools:  # the header (which holds the hash) is a piece of its own, or several
        assert any(b"".join(cut[:i]) == head for i in range(1, len(cut)))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=5000), min_size=1, max_size=30))
def test_sizes_that_do_not_match_the_document_cut_it_by_size_alone(sizes: list[int]) -> None:
    document = b"x" * 1_300_000
    cut = pieces(document, sizes)
    assert b"".join(cut) == document and all(len(p) <= MAX_PIECE for p in cut)


def test_one_tool_changed_or_added_changes_the_pieces_around_it_only() -> None:
    tools = _tools(3000, seed=1)  # about 7 MiB
    before = pieces(_document(tools), [len(t) for t in tools])
    assert len(before) > 20
    changed = list(tools)
    changed[1500] = changed[1500].replace(b"t1500", b"T1500")
    after = pieces(_document(changed), [len(t) for t in changed])
    assert len(set(after) - set(before)) <= 2
    grown = [*tools[:1000], *_tools(5, seed=2), *tools[1000:]]
    after = pieces(_document(grown), [len(t) for t in grown])
    assert len(set(after) - set(before)) <= 3
    assert len(set(before) - set(after)) <= 3


def test_each_chunk_is_a_gzip_member_and_together_they_are_the_document() -> None:
    tools = _tools(400, seed=3)
    document = _document(tools)
    made = chunks(document, [len(t) for t in tools])
    assert [gzip.decompress(c.data) for c in made] == pieces(document,
                                                             [len(t) for t in tools])
    assert gzip.decompress(b"".join(c.data for c in made)) == document
    assert chunks(document, [len(t) for t in tools]) == made  # deterministic: no time, no name


def _part(name: str) -> ObservedConfigMap:
    return ObservedConfigMap(name=name, owner="dev", tools_hash=None, data_digest="")


def test_a_stale_part_is_due_after_the_grace_counted_from_when_it_was_first_seen() -> None:
    now = [100.0]
    parts = StaleParts(30.0, clock=lambda: now[0])
    dev, ops = ObjectRef("team-a", "dev"), ObjectRef("team-a", "ops")
    one, two = _part("dev-tools-part-1"), _part("dev-tools-part-2")
    assert parts.due(dev, [one]) == ((), 30.0)
    now[0] = 120.0
    assert parts.due(dev, [one, two]) == ((), 10.0)
    assert parts.due(ops, []) == ((), None)  # another Actor's: no effect on dev's
    now[0] = 130.0
    assert parts.due(dev, [one, two]) == ((one,), 20.0)
    # Written again meanwhile (no longer stale): its grace starts over next time.
    assert parts.due(dev, [two]) == ((), 20.0)
    assert parts.due(dev, [one, two]) == ((), 20.0)
    now[0] = 150.0
    assert parts.due(dev, [one, two]) == ((two,), 10.0)
    assert parts.due(dev, []) == ((), None)
