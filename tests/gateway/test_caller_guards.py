"""The call path per caller (``guards.caller_rules``, ``guards.rate_limit``), the
listing and ``search_tools`` filtered per caller, with ``pipeline.Call(...,
caller=...)`` built as the gateway builds it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from callerkit import served_with, who

from skillop.gateway import approval
from skillop.gateway.approval_request import Requests
from skillop.gateway.buckets import Buckets
from skillop.gateway.guards import call_path
from skillop.gateway.guards.rate_limit import META_RETRY_AFTER
from skillop.gateway.listing import Listings
from skillop.gateway.pipeline import Call, CallRecord, Pipeline, answer
from skillop.gateway.search_tool import search_tools
from skillop.gateway.served import ServedSet
from skillop.model.caller import ANONYMOUS, Caller

NOBODY = approval.Nobody("nobody can be asked here")


class Asked:
    """An approver that approves, and keeps what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def decide(self, question: approval.Question) -> approval.Verdict:
        self.asked.append(question.tool)
        return approval.Approved()


def pipeline(records: list[CallRecord] | None = None) -> Pipeline:
    out = [] if records is None else records
    return Pipeline(call_path(Requests.from_environment(Path("/nonexistent")),
                              buckets=Buckets()), [out.append], say=print)


async def call(run: Pipeline, served: ServedSet, name: str, caller: Caller, *,
               approver: approval.Approver = NOBODY) -> types.CallToolResult:
    result = answer(await run.run(Call(served, name, {}, approver, None, 60.0, caller=caller)))
    assert isinstance(result, types.CallToolResult)
    return result


def text(result: types.CallToolResult) -> str:
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    return content.text


RULES = {"callerRules": [
    {"callers": {"groups": ["contractors"]}, "effect": "Deny", "skills": ["team-a/ops"]},
    {"callers": {"groups": ["sre"]}, "effect": "RequireApproval", "tools": ["wipe"]}]}
ELICIT = {"approval": {"via": "Elicitation"}}


def test_a_denied_call_is_refused_naming_the_rule_and_recorded(tmp_path: Path) -> None:
    served = served_with(tmp_path, skillAccessPolicy=RULES)
    records: list[CallRecord] = []
    run = pipeline(records)

    async def main() -> tuple[types.CallToolResult, types.CallToolResult]:
        return (await call(run, served, "wipe", who("carl", "contractors")),
                await call(run, served, "notes", who("carl", "contractors")))

    refused, allowed = anyio.run(main)
    assert refused.is_error and text(refused) == (
        "refused: denied by Actor team-a/bot: rule 1 (groups: [contractors])")
    assert not allowed.is_error and "# Body" in text(allowed)
    assert [(r.binding_name, r.outcome, r.reason) for r in records] == [
        ("wipe", "refused", "denied by Actor team-a/bot: rule 1 (groups: [contractors])"),
        ("notes", "ok", None)]


def test_require_approval_asks_for_the_callers_it_names_only(tmp_path: Path) -> None:
    served = served_with(tmp_path, skillAccessPolicy=RULES, **ELICIT)
    run, asked = pipeline(), Asked()

    async def main() -> list[types.CallToolResult]:
        return [await call(run, served, "wipe", who("sam", "sre"), approver=asked),
                await call(run, served, "wipe", who("ann", "dev"), approver=asked),
                await call(run, served, "wipe", who("sue", "sre"))]

    approved, unasked, nobody = anyio.run(main)
    assert asked.asked == ["wipe"]
    assert not approved.is_error and not unasked.is_error
    assert nobody.is_error and text(nobody) == "refused: nobody can be asked here"


def test_a_rate_limited_call_says_which_limit_and_when_to_retry(tmp_path: Path) -> None:
    served = served_with(tmp_path, rateLimits=[{"calls": 2, "perSeconds": 60, "per": "Caller"}])
    run = pipeline()

    async def main() -> list[types.CallToolResult]:
        return [await call(run, served, name, who("alice")) for name in ("notes", "plan", "wipe")]

    *ok, limited = anyio.run(main)
    assert not any(r.is_error for r in ok)
    assert text(limited) == ("refused: rate limited by Actor team-a/bot: rate limit 1 (2 calls"
                             " per 60 s per caller); retry after 30 s")
    assert limited.meta == {META_RETRY_AFTER: 30}
    dumped = limited.model_dump(by_alias=True, exclude_none=True)
    assert dumped["_meta"] == {"skillop.dev/retryAfterSeconds": 30}


def test_a_denied_call_takes_no_token(tmp_path: Path) -> None:
    served = served_with(tmp_path, skillAccessPolicy=RULES,
                         rateLimits=[{"calls": 1, "perSeconds": 60, "per": "Actor"}])
    run = pipeline()

    async def main() -> list[bool]:
        return [(await call(run, served, name, caller)).is_error is True for name, caller in
                (("wipe", who("carl", "contractors")), ("notes", who("carl", "contractors")),
                 ("notes", who("bob")))]

    assert anyio.run(main) == [True, False, True]


def test_fifty_concurrent_callers_share_an_actor_bucket_exactly(tmp_path: Path) -> None:
    served = served_with(tmp_path, rateLimits=[
        {"calls": 20, "perSeconds": 3600, "per": "Actor"},
        {"calls": 1, "perSeconds": 3600, "per": "Caller", "callers": {"groups": ["slow"]}}])
    run = pipeline()
    results: list[types.CallToolResult] = []

    async def one(i: int) -> None:
        caller = who(f"user-{i}", "slow" if i % 10 == 0 else "fast")
        for _ in range(2):
            results.append(await call(run, served, "notes", caller))

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            for i in range(50):
                tasks.start_soon(one, i)

    anyio.run(main)
    refused = [text(r) for r in results if r.is_error]
    assert len(results) == 100 and len(refused) == 100 - 20
    assert all(t.startswith("refused: rate limited by Actor team-a/bot: rate limit")
               for t in refused)


def listed(listings: Listings, served: ServedSet, caller: Caller) -> list[str]:
    return [t.name for t in listings.page(served, None, streamed=False, caller=caller).tools]


def test_each_caller_is_listed_only_what_they_may_call(tmp_path: Path) -> None:
    served = served_with(tmp_path, skillAccessPolicy={"callerRules": [
        *RULES["callerRules"],
        {"callers": {"subjects": ["alice"]}, "effect": "Allow", "tools": ["deploy"]}]})
    listings = Listings({})
    assert listed(listings, served, who("carl", "contractors")) == ["notes", "plan"]
    assert listed(listings, served, who("alice")) == ["deploy", "notes", "plan", "wipe"]
    assert listed(listings, served, ANONYMOUS) == ["notes", "plan", "wipe"]
    # The fast path's JSON is the same view.
    shaped = json.loads(listings.json(served, "2025-06-18", caller=who("carl", "contractors")))
    assert [t["name"] for t in shaped["tools"]] == ["notes", "plan"]
    paged = listings.page(served, None, streamed=True, caller=who("carl", "contractors"))
    assert [t.name for t in paged.tools] == ["notes", "plan"]


def test_callers_matching_the_same_rules_share_one_view(tmp_path: Path) -> None:
    served = served_with(tmp_path, skillAccessPolicy=RULES)
    listings = Listings({})
    first = listings.view(served, who("carl", "contractors"))
    assert listings.view(served, who("cora", "contractors", "x")) is first
    assert listings.view(served, who("bob")) is not first


def test_search_finds_only_what_the_caller_may_call(tmp_path: Path) -> None:
    served = served_with(tmp_path, skillAccessPolicy=RULES, disclosure={"mode": "Search"})
    records: list[CallRecord] = []

    def found(caller: Caller, query: str) -> list[str]:
        result = anyio.run(lambda: search_tools(served, {"query": query, "limit": 5},
                                                records.append, caller=caller))
        answer: dict[str, Any] = json.loads(text(result))
        return [t["name"] for t in answer["tools"] or answer.get("closest", [])]

    assert "wipe" in found(who("sam", "sre"), "wipe the disk")
    assert "wipe" not in found(who("carl", "contractors"), "wipe the disk")
    assert "deploy" not in found(who("carl", "contractors"), "deploy the app")
