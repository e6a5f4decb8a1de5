"""Memo slots (``model.memo``): typed, bounded, and keyed by every field a value
depends on."""

from __future__ import annotations

import dataclasses
import gc
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillop.model.memo import (
    NOT_IN_KEY,
    Cell,
    Memo,
    Slot,
    key_fields,
    key_of,
    live_keys,
    memo_key,
)
from skillop.resolve.namespace_rules import Fix, HostRules, NamespaceRules
from skillop.resolve.policy import EffectivePolicy

#: A value other than the default for every field of NamespaceRules that a tool's
#: verdict depends on. A field added to NamespaceRules must come here (or be
#: marked NOT_IN_KEY, and be added to LEFT_OUT, if no verdict reads it).
VERDICT_FIELDS: dict[str, Any] = {
    "deny_capabilities": (("writes", "p"),),
    "require_capabilities": (("readOnly", "p"),),
    "deny_sources": (("mcp", "p"),),
    "server_hosts": (HostRules("p", ("*.svc",)),),
    "approval": (("openWorld", "p"),),
    "fixes": (Fix("p", 0, ("*",), ("*",), (("readOnly", True),)),),
}
#: The fields no tool verdict reads (skill globs, budgets, the policies' names).
LEFT_OUT = {"globs", "max_tools", "max_tool_tokens", "applied"}


def test_every_rule_field_of_namespace_rules_enters_the_verdict_key() -> None:
    assert set(key_fields(NamespaceRules)) == set(VERDICT_FIELDS)
    compared = {f.name for f in dataclasses.fields(NamespaceRules) if f.compare}
    assert compared - set(VERDICT_FIELDS) == LEFT_OUT
    base = NamespaceRules()
    keys = {name: NamespaceRules(**{name: value}).key for name, value in VERDICT_FIELDS.items()}
    assert base.key not in keys.values()
    assert len(set(keys.values())) == len(VERDICT_FIELDS)
    # Equal rules: the same key object, so verdicts outlive the rules object.
    assert all(NamespaceRules(**{name: value}).key is keys[name]
               for name, value in VERDICT_FIELDS.items())


def test_a_field_added_to_the_rules_enters_the_key_unless_declared_out() -> None:
    """What a hand-listed key would miss: a new field changes the key by itself."""
    added = dataclasses.make_dataclass(
        "WithNewRule", [("new_rule", tuple[str, ...], dataclasses.field(default=()))],
        bases=(NamespaceRules,), frozen=True, slots=True)
    assert added(new_rule=("a",)).key is not added(new_rule=("b",)).key
    assert added(new_rule=("a",)).key is added(new_rule=("a",)).key
    declared_out = dataclasses.make_dataclass(
        "WithNote", [("note", str, dataclasses.field(default="", metadata=NOT_IN_KEY))],
        bases=(NamespaceRules,), frozen=True, slots=True)
    assert declared_out(note="a").key is declared_out(note="b").key


def test_the_fields_left_out_of_the_rules_key_share_verdicts() -> None:
    one = NamespaceRules(deny_sources=(("mcp", "p"),), max_tools=None)
    other = NamespaceRules(deny_sources=(("mcp", "p"),), globs=(), applied=())
    assert one.key is other.key


def test_an_actors_own_refusal_key_is_its_own_capability_rules() -> None:
    assert key_fields(EffectivePolicy) == ("own_deny", "own_require")


def test_rule_set_keys_are_one_object_while_in_use_and_dropped_after() -> None:
    rules = ("only-this-test", 1)
    key = memo_key("test", rules)
    assert memo_key("test", rules) is key
    assert memo_key("other", rules) is not key
    before = live_keys()
    number = key.number
    del key
    gc.collect()
    assert live_keys() < before  # the table keeps no key nobody holds
    again = memo_key("test", rules)
    assert again.number != number  # a new key: nothing kept under the old one is served


def test_key_of_reads_every_compared_field() -> None:
    @dataclasses.dataclass(frozen=True)
    class Rules:
        a: int
        b: int = dataclasses.field(default=0, metadata=NOT_IN_KEY)
        cache: dict[str, int] = dataclasses.field(default_factory=dict, compare=False)

    assert key_fields(Rules) == ("a",)
    assert key_of(Rules(1), "k") is key_of(Rules(1, b=2), "k")
    assert key_of(Rules(1), "k") is not key_of(Rules(2), "k")


def test_a_slot_keeps_the_latest_entries_up_to_its_bound() -> None:
    slot: Slot[str, int] = Slot("test-latest", bound=2)
    memo = Memo()
    assert slot.get(memo, "a") is None
    assert slot.put(memo, "a", 1) == 1
    slot.put(memo, "b", 2)
    slot.put(memo, "a", 3)  # written again: now the latest
    slot.put(memo, "c", 4)  # over the bound: the oldest (b) goes
    assert dict(slot.entries(memo)) == {"a": 3, "c": 4}
    assert slot.evictions == 1
    assert len(memo) == 2


def test_slots_and_cells_do_not_share_entries() -> None:
    first: Slot[str, int] = Slot("test-first", bound=4)
    second: Slot[str, str] = Slot("test-second", bound=4)
    cell: Cell[int] = Cell("test-cell")
    memo = Memo()
    first.put(memo, "k", 1)
    second.put(memo, "k", "one")
    assert cell.get(memo) is None
    cell.put(memo, 7)
    assert (first.get(memo, "k"), second.get(memo, "k"), cell.get(memo)) == (1, "one", 7)
    assert len(memo) == 3


def test_a_slot_needs_room_for_one_entry() -> None:
    with pytest.raises(ValueError, match="memo slot empty: bound must be at least 1, not 0"):
        Slot("empty", bound=0)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 3), st.lists(st.tuples(st.booleans(), st.sampled_from("abcd"),
                                             st.integers(0, 9)), max_size=30))
def test_a_slot_is_the_latest_entries_written_up_to_its_bound(
        bound: int, steps: list[tuple[bool, str, int]]) -> None:
    """One entry or many, a slot keeps what a dict of the latest writes would."""
    slot: Slot[str, int] = Slot("test-model", bound=bound)
    memo, model = Memo(), dict[str, int]()
    for write, key, value in steps:
        if write:
            slot.put(memo, key, value)
            model.pop(key, None)
            model[key] = value
            if len(model) > bound:
                del model[next(iter(model))]
        assert slot.get(memo, key) == model.get(key)
    assert dict(slot.entries(memo)) == model
    assert len(memo) == len(model)


def test_an_object_with_one_entry_in_a_slot_keeps_no_table_for_it() -> None:
    """Most ToolDefs keep one entry per slot (one template, for the skill that
    declares them): a dict of one in the memo's table was 472 bytes an object
    with its key, a pair about 300."""
    slot: Slot[int, str] = Slot("test-one", bound=4)
    memos = [Memo() for _ in range(2000)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i, memo in enumerate(memos):
            slot.put(memo, i, "x")
        per_object = (tracemalloc.get_traced_memory()[0] - before) / len(memos)
    finally:
        tracemalloc.stop()
    assert per_object < 360, f"{per_object:.0f} bytes per object for one entry"
