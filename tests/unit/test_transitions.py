"""Warning Events for conditions turning False: once per transition, never on a restart."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from runtimekit import run_batch
from skillkit import actor, skill
from test_operator_runtime import Recorder, _clock, _uid

from skillop.model import problems as P
from skillop.operator.deps import Key
from skillop.operator.outputs import EventSpec
from skillop.operator.runtime import Reconciler
from skillop.operator.store import Store
from skillop.operator.transitions import MAX_EVENT_MESSAGE, failing_transitions


def cond(type_: str, status: str, reason: str = "Why", message: str = "what") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


def status(*conditions: dict[str, Any]) -> dict[str, Any]:
    return {"conditions": list(conditions)}


@pytest.mark.parametrize("before", [
    status(),  # a first status
    status(cond("Ready", "True", "Resolved")),
    status(cond("Ready", "Unknown", "Pending")),
    status(cond("Ready", "False", "RefNotFound")),  # another reason
    {},
    {"conditions": "not a list"},  # a hand edit counts as absent
])
def test_a_condition_turning_false_is_one_warning(before: dict[str, Any]) -> None:
    after = status(cond("Ready", "False", P.CYCLE_DETECTED, "team-a/a -> team-a/b -> team-a/a"))
    assert failing_transitions(before, after) == (
        EventSpec("Warning", P.CYCLE_DETECTED, "team-a/a -> team-a/b -> team-a/a"),)


@pytest.mark.parametrize("before, after", [
    # Still False for the same reason, whatever the message now says.
    (status(cond("Ready", "False", "TooManyTools", "41 tools")),
     status(cond("Ready", "False", "TooManyTools", "42 tools"))),
    (status(cond("Ready", "False")), status(cond("Ready", "True", "Resolved"))),
    (status(), status(cond("CredentialsReady", "Unknown", "SecretsNotReadable"))),
    # Conditions that repeat Ready's failure get no Event of their own.
    (status(), status(cond("ResolvedRefs", "False", "RefNotFound"),
                      cond("Stalled", "True", "CycleDetected"))),
])
def test_no_warning_without_a_transition_into_failure(before: dict[str, Any],
                                                      after: dict[str, Any]) -> None:
    assert failing_transitions(before, after) == ()


def test_each_failing_condition_has_its_own_warning() -> None:
    before = status(cond("Ready", "False", "RefNotFound"), cond("Discovered", "True"))
    after = status(cond("Ready", "False", "RefNotFound"),
                   cond("CredentialsReady", "False", "SecretNotFound",
                        "missing in namespace team-a: Secret docker-auth"),
                   cond("Discovered", "False", "DiscoveryFailed", "jira: connection refused"),
                   cond("Pinned", "False", "PinViolation", "jira: ticket changed"))
    assert [(e.type, e.reason, e.message) for e in failing_transitions(before, after)] == [
        ("Warning", "SecretNotFound", "missing in namespace team-a: Secret docker-auth"),
        ("Warning", "DiscoveryFailed", "jira: connection refused"),
        ("Warning", "PinViolation", "jira: ticket changed")]


def test_the_message_is_bounded() -> None:
    (event,) = failing_transitions({}, status(cond("Ready", "False", message="x" * 5000)))
    assert len(event.message) == MAX_EVENT_MESSAGE and event.message.endswith("...")


conditions = st.lists(st.fixed_dictionaries({
    "type": st.sampled_from(["Ready", "CredentialsReady", "Discovered", "Pinned", "Stalled"]),
    "status": st.sampled_from(["True", "False", "Unknown"]),
    "reason": st.sampled_from(["A", "B"]), "message": st.text(max_size=20)}), max_size=5,
    unique_by=lambda c: c["type"])  # one condition of a type, as KEP-1623 has it


@given(conditions, conditions)
def test_an_unchanged_status_never_warns_and_a_warning_is_a_false_condition(
        old: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
    assert failing_transitions(status(*new), status(*new)) == ()
    falses = {(c["reason"], c["message"]) for c in new
              if c["status"] == "False" and c["type"] != "Stalled"}
    assert {(e.reason, e.message) for e in failing_transitions(status(*old), status(*new))
            } <= falses


# -- the Reconciler ---------------------------------------------------------------
def _docs() -> list[dict[str, Any]]:
    return [_uid(skill("a", includes=[{"skill": "b"}])),
            _uid(skill("b", includes=[{"skill": "a"}])),
            _uid(actor("lost", skills=["nowhere"]))]


def _loaded(docs: list[dict[str, Any]]) -> tuple[Store, Recorder, Reconciler, set[Key]]:
    store, writer = Store(), Recorder()
    changed: set[Key] = set()
    for doc in docs:
        changed |= store.upsert(doc)
    return store, writer, Reconciler(store, writer, clock=_clock()), changed


def _warnings(calls: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(c[1:] for c in calls if c[0] == "event")


def test_the_reconciler_warns_once_per_transition_and_not_after_a_restart(
        caplog: pytest.LogCaptureFixture) -> None:
    _, writer, rec, changed = _loaded(_docs())
    run_batch(rec, changed)
    calls = writer.take()
    assert _warnings(calls) == [
        ("Actor", "team-a/lost", "uid-lost", P.REF_NOT_FOUND),
        ("Skill", "team-a/a", "uid-a", P.CYCLE_DETECTED),
        ("Skill", "team-a/b", "uid-b", P.CYCLE_DETECTED)]
    # Reconciled again: nothing written, nothing posted.
    run_batch(rec, changed)
    assert writer.take() == []
    # Restarted over the statuses it wrote: it reads them back and posts nothing.
    written = {(c[1], c[2].split("/")[1]): c[3] for c in calls if c[0] == "status"}
    docs = _docs()
    for doc in docs:
        doc["status"] = copy.deepcopy(written[doc["kind"], doc["metadata"]["name"]])
    _, writer, rec, changed = _loaded(docs)
    with caplog.at_level(logging.INFO, logger="skillop.reconcile"):
        run_batch(rec, changed)
    assert writer.take() == []
    # The batch log says what was sent: nothing, though three objects were resolved.
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("batch")]
    assert "0 objects written (0 statuses, 0 ConfigMaps), 3 unchanged, 0 to retry" in line


def test_the_batch_log_counts_the_writes_sent(caplog: pytest.LogCaptureFixture) -> None:
    docs = [_uid(skill("tools", builtins=["git_operations"])),
            _uid(actor("dev", skills=["tools"]))]
    _, _, rec, changed = _loaded(docs)
    with caplog.at_level(logging.INFO, logger="skillop.reconcile"):
        run_batch(rec, changed)
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("batch")]
    assert "2 objects written (2 statuses, 1 ConfigMap), 0 unchanged, 0 to retry" in line


def test_a_reason_changing_warns_again() -> None:
    store, writer, rec, changed = _loaded(_docs())
    run_batch(rec, changed)
    writer.take()
    # The Actor now names the cycle: still Ready=False, for another reason.
    changed = store.upsert(_uid(actor("lost", skills=["a"]), n=2))
    run_batch(rec, changed)
    assert _warnings(writer.take()) == [
        ("Actor", "team-a/lost", "uid-lost", P.CYCLE_DETECTED)]
