"""Approvals, the pure parts: the request document, bounded arguments, the webhook's
rules, the operator's bookkeeping, and the gateway's wait (over a real HTTP server
speaking the API server's watch protocol)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillop.gateway.approval import Approved
from skillop.gateway.approval import Refused as Denied
from skillop.gateway.approval_request import (
    ApiAccess,
    Decided,
    PendingCall,
    Requests,
    decision_of,
    request_document,
)
from skillop.gateway.served import ServedTool
from skillop.model.approval import (
    MAX_ARGUMENT_CHARS,
    MAX_ARGUMENTS,
    ToolCallApprovalSpec,
    bounded_arguments,
)
from skillop.model.visible import visible
from skillop.operator.approvals import (
    KEEP_DECIDED,
    Refused,
    Tracker,
    admit_decision,
    admit_request,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TOOL = ServedTool(binding_name="deploy_prod", source="mcp", digest="sha256:abc",
                  definition=None,  # type: ignore[arg-type]  (not read here)
                  upstream_name="deploy", upstream_digest="sha256:up", requires_approval=True)


def call(arguments: dict[str, Any]) -> PendingCall:
    return PendingCall("team-a/dev", TOOL, "ops", arguments)


# -- the request document ------------------------------------------------------------------


def test_the_request_names_actor_tool_pod_expiry_and_every_argument() -> None:
    doc = request_document(call({"b": 1, "a": "x" * 5000}), expires_at=NOW,
                           pod=("dev-0", "team-a"))
    assert doc["metadata"] == {"generateName": "dev-deploy-prod-", "namespace": "team-a"}
    spec = doc["spec"]
    assert spec["actor"] == "dev" and spec["expiresAt"] == "2026-12-01T12:00:00Z"
    assert spec["tool"] == {"bindingName": "deploy_prod", "digest": "sha256:abc",
                            "upstream": "ops", "upstreamTool": "deploy"}
    assert spec["pod"] == {"name": "dev-0", "namespace": "team-a"}
    assert [a["name"] for a in spec["arguments"]] == ["a", "b"]
    assert spec["arguments"][0]["truncated"] and spec["arguments"][0]["size"] == 5002
    assert spec["arguments"][1] == {"name": "b", "value": "1", "truncated": False, "size": 1}
    assert "requester" not in spec  # the webhook's to fill
    # What the gateway sends is what the CRD's model accepts.
    ToolCallApprovalSpec.model_validate({**spec, "requester": "x"})


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=400), st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3000),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                  max_size=4),
    max_leaves=20), max_size=20))
def test_bounded_arguments_keep_every_key_and_mark_what_is_cut(args: dict[str, Any]) -> None:
    shown = bounded_arguments(args)
    assert len(shown) == len(args)
    for argument, key in zip(shown, sorted(args), strict=True):
        whole = visible(json.dumps(args[key], ensure_ascii=False, sort_keys=True))
        assert argument.size == len(whole)
        assert len(argument.value) <= MAX_ARGUMENT_CHARS + 3
        if argument.truncated:
            assert argument.value.endswith("...") or argument.name.endswith("...")
        else:
            assert argument.value == whole and argument.name == visible(key)


def test_more_keys_than_a_request_holds_are_refused_not_shown_in_part() -> None:
    with pytest.raises(ValueError, match=f"shows at most {MAX_ARGUMENTS}"):
        bounded_arguments({f"k{i}": i for i in range(MAX_ARGUMENTS + 1)})


def test_characters_that_hide_text_are_escaped_in_a_request() -> None:
    (shown,) = bounded_arguments({"cmd\u202e": "rm -rf /\u202etxt.gnp"})
    assert shown.name == "cmd\\u202e" and shown.value == '"rm -rf /\\u202etxt.gnp"'


def test_a_value_nested_too_deep_is_shown_as_such() -> None:
    deep: Any = []
    for _ in range(100000):
        deep = [deep]
    (shown,) = bounded_arguments({"deep": deep})
    assert shown.value == '"(a value nested too deep to show)"'


def test_decision_of_an_object() -> None:
    meta = {"namespace": "team-a", "name": "r1"}
    assert decision_of({"metadata": meta}) is None
    assert decision_of({"metadata": meta, "status": {"state": "Pending"}}) is None
    approved = decision_of({"metadata": meta, "status": {"state": "Approved",
                                                         "decidedBy": "alice"}})
    assert approved == Approved("team-a/r1", "alice")
    denied = decision_of({"metadata": meta, "status": {"state": "Denied", "decidedBy": "bob",
                                                       "reason": "no"}})
    assert denied == Denied("denied by bob (ToolCallApproval team-a/r1): no", "team-a/r1", "bob")
    expired = decision_of({"metadata": meta, "status": {"state": "Expired"}})
    assert isinstance(expired, Denied) and "expired" in expired.reason


# -- the webhook's rules -------------------------------------------------------------------


def body(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "team-a", "name": "r1"},
            "spec": {"actor": "dev", "tool": {"bindingName": "x", "digest": "d"},
                     "expiresAt": "2026-12-01T12:05:00Z", "requester": "gw", **spec},
            **({"status": status} if status is not None else {})}


def test_a_new_request_gets_its_requester_and_owner_whatever_it_claims() -> None:
    patch = admit_request(body(requester="someone-else"), user="gw", actor_uid="u-1")
    assert patch["spec"] == {"requester": "gw"}
    (owner,) = patch["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Actor", "dev", "u-1")
    with pytest.raises(Refused, match="Actor team-a/dev not found"):
        admit_request(body(), user="gw", actor_uid=None)
    with pytest.raises(Refused, match=r"spec\.tool"):
        admit_request({"metadata": {}, "spec": {"actor": "dev", "expiresAt": "x"}},
                      user="gw", actor_uid="u")


def test_a_decision_records_who_and_when_and_refuses_the_requester() -> None:
    patch = admit_decision(body({"state": "Approved", "decidedBy": "forged"}), body(),
                           user="alice", now=NOW)
    assert patch == {"status": {"decidedBy": "alice", "decidedAt": "2026-12-01T12:00:00Z"}}
    with pytest.raises(Refused, match="gw asked for this call and may not decide it"):
        admit_decision(body({"state": "Approved"}), body(), user="gw", now=NOW)


def test_a_decision_is_final_and_late_approvals_are_refused() -> None:
    done = body({"state": "Denied", "decidedBy": "bob"})
    with pytest.raises(Refused, match="already Denied by bob"):
        admit_decision(body({"state": "Approved"}), done, user="alice", now=NOW)
    assert admit_decision(done, done, user="alice", now=NOW) == {}  # no change
    late = NOW + timedelta(minutes=6)
    with pytest.raises(Refused, match="expired at 2026-12-01T12:05:00Z"):
        admit_decision(body({"state": "Approved"}), body(), user="alice", now=late)
    with pytest.raises(Refused, match="does not expire until"):
        admit_decision(body({"state": "Expired"}), body(), user="op", now=NOW)
    assert admit_decision(body({"state": "Expired"}), body(), user="op", now=late)[
        "status"]["decidedBy"] == "op"
    expired = body({"state": "Expired"})
    with pytest.raises(Refused, match="the call was not made"):
        admit_decision(body({"state": "Approved"}), expired, user="alice", now=late)


# -- the operator's bookkeeping ------------------------------------------------------------


def seen(state: str | None, *, decided: datetime | None = None) -> dict[str, Any]:
    doc = body({"state": state} if state else None)
    doc["metadata"]["creationTimestamp"] = "2026-12-01T12:00:00Z"
    if decided is not None:
        doc["status"]["decidedAt"] = decided.strftime("%Y-%m-%dT%H:%M:%SZ")
        doc["status"]["decidedBy"] = "alice"
    return doc


def test_one_event_per_request_and_per_decision_and_the_time_to_decide() -> None:
    tracker = Tracker()
    notes, waited = tracker.observe(seen(None), NOW)
    assert [n.reason for n in notes] == ["ApprovalRequested"] and waited is None
    assert tracker.pending() == 1
    assert tracker.observe(seen("Pending"), NOW) == ([], None)  # the operator's own write
    decided = NOW + timedelta(seconds=42)
    notes, waited = tracker.observe(seen("Approved", decided=decided), decided)
    assert [n.reason for n in notes] == ["ApprovalApproved"] and waited == 42.0
    assert "alice" in notes[0].message and tracker.pending() == 0
    assert tracker.observe(seen("Approved", decided=decided), decided) == ([], None)


def test_a_restarted_operator_does_not_report_old_decisions_again() -> None:
    old = NOW - timedelta(hours=2)
    assert Tracker().observe(seen("Approved", decided=old), NOW) == ([], None)


def test_expired_requests_are_marked_and_decided_ones_deleted_later() -> None:
    tracker = Tracker()
    tracker.observe(seen(None), NOW)
    assert tracker.due(NOW) == ([], [])
    expire, _ = tracker.due(NOW + timedelta(minutes=5))
    assert [r.name for r in expire] == ["r1"]
    tracker.observe(seen("Expired", decided=NOW + timedelta(minutes=5)), NOW)
    assert tracker.due(NOW + timedelta(minutes=6)) == ([], [])
    _, delete = tracker.due(NOW + timedelta(minutes=5) + KEEP_DECIDED)
    assert [r.name for r in delete] == ["r1"]


# -- the wait --------------------------------------------------------------------------


class FakeApi(BaseHTTPRequestHandler):
    """The API server's side of one request's life: create, then a watch that ends
    without a decision (as a watch may at any time), a get, then a watch that brings
    the decision. Served over real HTTP (https is the real-API tier's)."""

    script: list[str] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, payload: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        self.script.append("create")
        created = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert self.headers["Authorization"] == "Bearer t0ken"
        created["metadata"].update(name="r1", resourceVersion="10", uid="u1")
        self._send(201, json.dumps(created).encode())

    #: The uid of the object named r1 after the first watch (the gateway's is u1),
    #: at the get and in the second watch's event.
    later_uid = "u1"
    event_uid = "u1"

    def do_GET(self) -> None:
        meta = {"namespace": "team-a", "name": "r1", "resourceVersion": "11",
                "uid": self.later_uid}
        if "watch=1" not in self.path:
            self.script.append("get")
            self._send(200, json.dumps({"metadata": meta, "status": {"state": "Pending"}}
                                       ).encode())
            return
        watches = self.script.count("watch")
        self.script.append("watch")
        if watches == 0:
            assert "resourceVersion=10" in self.path
            self._send(200, b"")  # ended early, nothing decided
            return
        event = {"type": "MODIFIED", "object": {"metadata": {**meta, "uid": self.event_uid},
                                                "status": {"state": "Approved",
                                                           "decidedBy": "alice"}}}
        self._send(200, json.dumps(event).encode() + b"\n")


@pytest.fixture
def fake_api() -> Iterator[str]:
    FakeApi.script = []
    FakeApi.later_uid = FakeApi.event_uid = "u1"
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _decided_by_fake_api(api: str, tmp_path: Any) -> Decided:
    """The gateway's wait for a decision on a ``prod`` call, against ``api``."""
    (tmp_path / "token").write_text("t0ken\n")
    approver = Requests(ApiAccess(api, tmp_path))

    async def decide() -> Decided:
        try:
            return await approver.decide(call({"target": "prod"}), timeout=10)
        finally:
            await approver.close()

    return anyio.run(decide)


def test_the_wait_resumes_a_watch_that_ended_and_returns_the_decision(
        fake_api: str, tmp_path: Any) -> None:
    decision = _decided_by_fake_api(fake_api, tmp_path)
    assert decision == Approved("team-a/r1", "alice")
    assert FakeApi.script == ["create", "watch", "get", "watch"]


def test_an_approval_of_a_request_replaced_in_a_watch_gap_is_refused(
        fake_api: str, tmp_path: Any) -> None:
    """Deleted and re-created under the same name while no watch was open (with other
    arguments, by whoever may create requests): the approval found is the new
    object's, not the request this gateway made."""
    FakeApi.later_uid = "u2"
    decision = _decided_by_fake_api(fake_api, tmp_path)
    assert isinstance(decision, Denied) and decision.request == "team-a/r1"
    assert decision.reason.startswith("the approval request team-a/r1 was deleted and"
                                      " replaced by another object of the same name (uid u2")
    # Refused at the read after the gap, before any decision on the new object.
    assert FakeApi.script == ["create", "watch", "get"]


def test_an_approval_on_a_watch_event_of_another_object_is_refused(
        fake_api: str, tmp_path: Any) -> None:
    """The same, seen on the watch: an event about the name with another uid."""
    FakeApi.event_uid = "u2"
    decision = _decided_by_fake_api(fake_api, tmp_path)
    assert isinstance(decision, Denied) and "replaced by another object" in decision.reason
    assert FakeApi.script == ["create", "watch", "get", "watch"]


def test_the_wait_is_bounded(tmp_path: Any) -> None:
    class Silent(FakeApi):
        def do_GET(self) -> None:
            threading.Event().wait(5)  # a watch that says nothing

    (tmp_path / "token").write_text("t0ken")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Silent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    approver = Requests(ApiAccess(f"http://127.0.0.1:{server.server_address[1]}",
                                  tmp_path))

    async def decide() -> Decided:
        try:
            return await approver.decide(call({}), timeout=0.5)
        finally:
            await approver.close()

    decision = anyio.run(decide)
    server.shutdown()
    assert isinstance(decision, Denied)
    assert decision.reason == ("no decision within 0.5 s: the approval request expired"
                               " (ToolCallApproval team-a/r1)")


# -- the Actor's choice, carried to the gateway -----------------------------------------


def test_spec_approval_reaches_the_gateway_and_is_absent_when_unset() -> None:
    from skillkit import actor, resolve_actor, skill

    from skillop.gateway.served import parse_served_set
    from skillop.model.specs import ApprovalSettings

    server = {"name": "up", "url": "http://127.0.0.1:1/mcp", "tools": [
        {"name": "x", "inputSchema": {"type": "object"},
         "capabilities": {"requiresApproval": True}}]}
    docs = [skill("s", mcpServers=[server]), actor("plain", skills=["s"]),
            actor("chosen", skills=["s"], approval={"via": "Elicitation", "timeoutSeconds": 9})]
    plain, chosen = resolve_actor(docs, "team-a/plain"), resolve_actor(docs, "team-a/chosen")
    assert "approval" not in json.loads(plain.text)
    assert json.loads(chosen.text)["approval"] == {"via": "Elicitation", "timeoutSeconds": 9}
    assert chosen.build_document().as_dict()["approval"] == {"via": "Elicitation",
                                                       "timeoutSeconds": 9}
    assert parse_served_set(plain.text).approval == ApprovalSettings()
    assert parse_served_set(chosen.text).approval == ApprovalSettings(via="Elicitation",
                                                                      timeout_seconds=9)
    assert plain.hash != chosen.hash  # the hash covers the choice
