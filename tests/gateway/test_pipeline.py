"""The call path as a pipeline of guards (``gateway.pipeline``, ``gateway.guards``):
each guard's verdict ends the call or lets it on; every end but a pending approval
is recorded once, with its outcome, reason and durations, for every recorder; a
guard's unforeseen exception or a cancellation is recorded too."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from gatewaykit import Volume, echo_tool, toolset_files
from mcp.shared.exceptions import MCPError
from skillkit import actor, skill, skill_md

from skillop.gateway import approval
from skillop.gateway.approval_request import Requests
from skillop.gateway.guards import call_path
from skillop.gateway.pipeline import (
    CONTINUE,
    Call,
    CallRecord,
    Done,
    Fail,
    Pending,
    Pipeline,
    Refuse,
    Unknown,
    Verdict,
    answer,
)
from skillop.gateway.served import ServedSet, load_served_set
from skillop.model.exchange import TokenExchange

NOBODY = approval.Nobody("nobody")


def _served(tmp_path: Path, *, requires_approval: bool = False) -> ServedSet:
    notes = {"inline": skill_md("notes")}
    Volume(tmp_path / "tools").write(toolset_files([
        skill("srv", mcpServers=[{"name": "up", "url": "http://up.tools.svc/mcp",
                                  "tools": [echo_tool("echo", "up")]}], agentSkills=[notes]),
        actor("dev", skills=["srv"], approval={"via": "Elicitation"})], "team-a/dev"))
    served = load_served_set(tmp_path / "tools")
    if not requires_approval:
        return served
    notes = replace(served.tools["notes"], requires_approval=True)
    return replace(served, tools={**served.tools, "notes": notes})


class _DenyArgument:
    """A guard as a new one would be written: refuses calls with ``deny`` set."""

    async def __call__(self, call: Call) -> Verdict:
        return Refuse("deny is set") if call.arguments.get("deny") else CONTINUE


class _Raises:
    async def __call__(self, call: Call) -> Verdict:
        raise ZeroDivisionError


class _Waits:
    async def __call__(self, call: Call) -> Verdict:
        await anyio.sleep_forever()
        raise AssertionError


def _run(served: ServedSet, name: str, arguments: dict[str, Any], *extra: Any,
         approver: approval.Approver = NOBODY) -> tuple[Verdict, list[CallRecord], list[str]]:
    records: list[CallRecord] = []
    said: list[str] = []
    guards = call_path(Requests.from_environment(Path("/nonexistent")))
    # A new guard goes into the list: here just before the Agent Skill's answer.
    pipeline = Pipeline([*guards[:-2], *extra, *guards[-2:]], [records.append],
                        say=said.append)

    async def main() -> Verdict:
        return await pipeline.run(Call(served, name, arguments, approver, None, 60.0))

    return anyio.run(main), records, said


def test_an_added_guard_ends_the_call_and_the_record_says_why(tmp_path: Path) -> None:
    served = _served(tmp_path)
    refused, records, _ = _run(served, "notes", {"deny": True}, _DenyArgument())
    assert refused == Refuse("deny is set")
    done, more, _ = _run(served, "notes", {}, _DenyArgument())
    assert isinstance(done, Done) and done.result.content == [
        types.TextContent(text=served.tools["notes"].body or "")]
    (first,), (second,) = records, more
    assert (first.binding_name, first.outcome, first.reason) == ("notes", "refused",
                                                                 "deny is set")
    assert (second.outcome, second.reason, second.upstream) == ("ok", None, None)
    assert second.actor == "team-a/dev" and second.seconds > 0
    assert second.upstream_seconds == 0  # no upstream was asked


def test_an_unknown_tool_is_recorded_and_answered_with_the_mcp_error(tmp_path: Path) -> None:
    verdict, (record,), _ = _run(_served(tmp_path), "nope", {})
    assert verdict == Unknown("nope")
    assert (record.binding_name, record.outcome, record.reason) == ("nope", "refused",
                                                                    "unknown tool")
    with pytest.raises(MCPError, match="Unknown tool: nope"):
        answer(verdict)


def test_an_upstream_tool_without_its_upstream_fails_at_the_definition_pin(
        tmp_path: Path) -> None:
    verdict, (record,), _ = _run(_served(tmp_path), "echo", {})
    assert verdict == Fail("the tool's upstream is not in the mounted set",
                           "the tool's upstream is not in the mounted set")
    assert (record.outcome, record.upstream_tool) == ("error", "echo")
    result = answer(verdict)
    assert isinstance(result, types.CallToolResult) and result.is_error


def test_a_guards_unforeseen_exception_is_a_failure_recorded_and_said(tmp_path: Path) -> None:
    verdict, (record,), said = _run(_served(tmp_path), "notes", {}, _Raises())
    reason = "the gateway could not complete the call (ZeroDivisionError)"
    assert verdict == Fail(reason, reason)
    assert (record.outcome, record.reason) == ("error", reason)
    assert said == [f"notes: {reason}"]


def test_a_cancelled_call_is_recorded_and_stays_cancelled(tmp_path: Path) -> None:
    served = _served(tmp_path)
    records: list[CallRecord] = []
    guards = call_path(Requests.from_environment(Path("/nonexistent")))
    pipeline = Pipeline([guards[0], _Waits()], [records.append], say=print)

    async def main() -> None:
        with anyio.move_on_after(0.05):
            await pipeline.run(Call(served, "notes", {}, approval.Nobody("x"), None, 60.0))

    anyio.run(main)
    (record,) = records
    assert record.outcome == "error" and record.reason is not None
    assert record.reason.startswith("cancelled before it completed")


def test_a_pending_approval_is_not_recorded_the_deciding_round_is(tmp_path: Path) -> None:
    served = _served(tmp_path, requires_approval=True)
    asking = types.InputRequiredResult(request_state="opaque")

    class Asks:
        async def decide(self, question: approval.Question) -> approval.Verdict:
            return approval.Pending(asking)

    pending, records, _ = _run(served, "notes", {}, approver=Asks())
    assert pending == Pending(asking) and records == []
    refused, (record,), _ = _run(served, "notes", {}, approver=approval.Nobody("no one"))
    assert isinstance(refused, Refuse) and record.outcome == "refused"
    assert record.reason == "no one"


def test_a_call_meets_only_the_guards_that_can_act_on_it(tmp_path: Path) -> None:
    served = _served(tmp_path)
    pipeline = Pipeline(call_path(Requests.from_environment(Path("/nonexistent"))), [],
                        say=print)

    def names(name: str) -> list[str]:
        return [type(guard).__name__ for _, guard in pipeline.steps(served, name)]

    assert names("notes") == ["Membership", "SkillBody"]
    assert names("echo") == ["Membership", "DefinitionPin", "Forward"]
    assert names("nope") == ["Membership"]
    approving = _served(tmp_path / "again", requires_approval=True)
    assert names("notes") == ["Membership", "SkillBody"]  # the other set's, kept
    assert [type(guard).__name__ for _, guard in pipeline.steps(approving, "notes")] == [
        "Membership", "ApprovalGate", "SkillBody"]


class _Link:
    """An upstream's link as a reload left it: its server now asks for tokenExchange."""

    label = "up"

    def __init__(self, served: ServedSet) -> None:
        tool = served.tools["echo"]
        assert tool.upstream is not None
        self.upstream = served.upstreams[tool.upstream].model_copy(
            update={"token_exchange": TokenExchange(audience="up")})
        self.digests = {tool.upstream_name: tool.upstream_digest}
        self.forwarded: list[Any] = []

    async def connection(self) -> _Link:
        return self

    async def call(self, conn: Any, name: str, arguments: Any, *, exchanged: Any) -> Any:
        self.forwarded.append(exchanged)
        return types.CallToolResult(content=[])


class _Pool:
    def __init__(self, link: _Link) -> None:
        self._link = link

    def link(self, key: Any) -> _Link:
        return self._link


def test_a_server_given_token_exchange_by_a_reload_mid_call_is_never_called_without_it(
        tmp_path: Path) -> None:
    """The call's set had no tokenExchange for the tool's server (its steps hold no
    token exchange); the link it reaches does: the call is refused (it has no
    verified caller to exchange for), not forwarded with the server's own header."""
    served = _served(tmp_path)
    link = _Link(served)
    pipeline = Pipeline(call_path(Requests.from_environment(Path("/nonexistent"))), [],
                        say=print)
    assert "TokenExchange" not in [type(g).__name__ for _, g in pipeline.steps(served, "echo")]

    async def main() -> Verdict:
        return await pipeline.run(Call(served, "echo", {}, NOBODY, _Pool(link),  # type: ignore[arg-type]
                                       60.0))

    verdict = anyio.run(main)
    assert isinstance(verdict, Refuse) and "tokenExchange" in verdict.reason
    assert "no verified caller" in verdict.reason
    assert link.forwarded == []
