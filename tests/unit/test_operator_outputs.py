"""What the operator writes: status, ConfigMap and events, and nothing when nothing changed."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

from skillkit import actor, anon, catalog, noise, ref, skill

from skillop.model import problems as P
from skillop.model.names import ACTOR_LABEL
from skillop.model.status import MAX_PRUNED, MAX_TEXT, ActorStatus, SkillStatus
from skillop.model.toolset import MAX_CONFIGMAP_BYTES, TOOLS_KEY
from skillop.operator.actorplan import actor_plan
from skillop.operator.configmaps import (
    HASH_ANNOTATION,
    MANAGED_BY,
    ObservedConfigMap,
    data_digest,
)
from skillop.operator.listing import Listing
from skillop.operator.outputs import (
    Plan,
    ServerReport,
    invalid_status,
    remembered,
    skill_plan,
)
from skillop.operator.pinning import PinState
from skillop.operator.store import Store
from skillop.resolve.resolver import Resolver

Doc = dict[str, Any]
T0 = "2024-01-01T00:00:00Z"
T1 = "2024-01-02T00:00:00Z"
T2 = "2024-01-03T00:00:00Z"
URL = "http://docker-mcp.tools.svc:8080/mcp"


def _actor(*skills: str, **spec: Any) -> Doc:
    doc = actor("dev", skills=skills, **spec)
    doc["metadata"].update(uid="uid-dev", generation=3)
    return doc


def _plan(docs: list[Doc], *, old_status: Doc | None = None,
          observed: ObservedConfigMap | None = None, now: str = T0) -> Plan:
    cat = catalog(docs)
    resolution = Resolver(cat).resolve_actor(ref("team-a/dev"))
    assert resolution is not None
    return actor_plan(cat.actors[ref("team-a/dev")], resolution,
                      old_status=old_status or {}, observed=observed, now=now)


def _echo(plan: Plan, old: Doc | None = None) -> tuple[Doc, ObservedConfigMap | None]:
    """What the cluster shows after the plan's writes (through JSON, as the API returns it)."""
    status = json.loads(json.dumps(plan.status)) if plan.status is not None else old or {}
    if plan.configmap is None:
        return status, None
    store = Store()
    store.record_configmap(json.loads(json.dumps(plan.configmap)))
    return status, store.observed_configmap(ref("team-a/dev-tools"))


def test_the_digest_a_plan_carries_is_the_one_its_configmap_is_observed_with() -> None:
    plan = _plan(_base())
    written = plan.written
    assert written is not None and plan.configmap is written.body
    assert written.digest == data_digest(written.body["data"], written.body.get("binaryData"))
    store = Store()
    store.record_configmap(written.at("17"))
    _, observed = _echo(plan)
    assert store.observed_configmap(ref("team-a/dev-tools")) == observed
    assert observed is not None and observed.resource_version is None
    recorded = store.observed_configmap(ref("team-a/dev-tools"))
    assert recorded is not None and recorded.resource_version == "17"
    # The answer's version is metadata: the body is otherwise the one written.
    assert written.at("17").body == {**written.body, "metadata": {
        **written.body["metadata"], "resourceVersion": "17"}}
    assert written.at(None) == written and "resourceVersion" not in written.body["metadata"]
    # Nothing to write, nothing carried: a digest is the written ConfigMap's.
    assert _plan(_base(), observed=observed).written is None


def _cond(status: Doc, type_: str) -> Doc:
    return next(c for c in status["conditions"] if c["type"] == type_)


def _base(*extra: Doc) -> list[Doc]:
    return [skill("base", builtins=["git_operations"], anonymousTools=[anon("lint"), *extra]),
            _actor("base")]


def test_a_fresh_actor_gets_a_status_and_an_owned_configmap_and_no_events() -> None:
    plan = _plan(_base())
    assert plan.status is not None and plan.configmap is not None
    assert plan.events == ()
    cm = plan.configmap
    meta = cm["metadata"]
    assert (meta["name"], meta["namespace"]) == ("dev-tools", "team-a")
    assert meta["labels"] == {**MANAGED_BY, ACTOR_LABEL: "dev"}
    owner = meta["ownerReferences"]
    assert len(owner) == 1
    assert owner[0]["kind"] == "Actor" and owner[0]["name"] == "dev"
    assert owner[0]["uid"] == "uid-dev" and owner[0]["controller"] is True
    assert owner[0]["apiVersion"] == "skillop.dev/v1alpha1"
    doc = json.loads(cm["data"][TOOLS_KEY])
    assert meta["annotations"][HASH_ANNOTATION] == doc["hash"] == plan.status["toolsHash"]
    status = plan.status
    assert status["observedGeneration"] == 3
    assert status["toolCount"] == len(doc["tools"]) == 6  # five git tools and lint
    assert status["toolTokens"] == doc["tokens"]["total"] == sum(t["tokens"] for t in doc["tools"])
    assert status["configMapName"] == "dev-tools"
    assert status["skills"] == ["team-a/base"]
    assert [t["name"] for t in status["tools"]] == [t["name"] for t in doc["tools"]]
    ready, refs = _cond(status, "Ready"), _cond(status, "ResolvedRefs")
    assert (ready["status"], ready["reason"], ready["lastTransitionTime"]) == (
        "True", "Resolved", T0)
    assert ready["observedGeneration"] == 3
    assert (refs["status"], refs["reason"]) == ("True", "Resolved")


def test_the_configmap_name_follows_spec_config_map_name() -> None:
    plan = _plan([skill("base", builtins=["git_operations"]),
                  _actor("base", configMapName="reviewer-tools")])
    assert plan.configmap is not None and plan.status is not None
    assert plan.configmap["metadata"]["name"] == "reviewer-tools"
    assert plan.status["configMapName"] == "reviewer-tools"


def test_an_unchanged_actor_gets_no_writes_even_later() -> None:
    first = _plan(_base())
    status, observed = _echo(first)
    again = _plan(_base(), old_status=status, observed=observed, now=T1)
    assert again == Plan()  # no status, no ConfigMap, no events


def test_a_lost_configmap_is_rewritten_without_touching_status() -> None:
    status, observed = _echo(_plan(_base()))
    assert observed is not None
    gone = _plan(_base(), old_status=status, observed=None, now=T1)
    assert gone.configmap is not None and gone.status is None and gone.events == ()
    edited = dataclasses.replace(observed, data_digest="hand-edited")
    fixed = _plan(_base(), old_status=status, observed=edited, now=T1)
    assert fixed.configmap is not None and fixed.status is None and fixed.events == ()


def test_a_configmap_with_the_wrong_owner_or_without_its_labels_is_rewritten() -> None:
    status, observed = _echo(_plan(_base()))
    assert observed is not None and observed.owner_uid == "uid-dev" and observed.labelled
    for broken in (dataclasses.replace(observed, owner_uid="uid-of-a-deleted-dev"),
                   dataclasses.replace(observed, owner_uid=None),
                   dataclasses.replace(observed, labelled=False)):
        plan = _plan(_base(), old_status=status, observed=broken, now=T1)
        assert plan.configmap is not None and plan.status is None, broken
        (ref_,) = plan.configmap["metadata"]["ownerReferences"]
        assert ref_["uid"] == "uid-dev" and plan.configmap["metadata"]["labels"][
            "app.kubernetes.io/managed-by"] == "skillop"


def test_a_problem_keeps_the_last_good_tool_set() -> None:
    status, observed = _echo(_plan(_base()))
    broken = [*_base()[:1], _actor("base", "missing")]
    plan = _plan(broken, old_status=status, observed=observed, now=T1)
    assert plan.configmap is None and plan.events == ()
    new = plan.status
    assert new is not None
    ready, refs = _cond(new, "Ready"), _cond(new, "ResolvedRefs")
    assert (ready["status"], ready["reason"]) == ("False", P.REF_NOT_FOUND)
    assert "team-a/missing" in ready["message"]
    assert "keeps the last good tool set" in ready["message"]
    assert status["toolsHash"] in ready["message"]
    assert ready["lastTransitionTime"] == T1  # it changed status
    assert (refs["status"], refs["reason"]) == ("False", P.REF_NOT_FOUND)
    for field in ("toolsHash", "toolCount", "toolTokens", "tools"):
        assert new[field] == status[field], field
    # the broken state is itself stable
    again = _plan(broken, old_status=json.loads(json.dumps(new)), observed=observed, now=T2)
    assert again == Plan()


def test_a_problem_before_any_success_has_no_tool_set_and_no_stale_note() -> None:
    plan = _plan([_actor("missing")])
    assert plan.configmap is None and plan.status is not None
    assert "toolsHash" not in plan.status and "tools" not in plan.status
    ready = _cond(plan.status, "Ready")
    assert ready["status"] == "False" and "keeps" not in ready["message"]


def test_healing_sets_ready_again_and_writes_the_configmap() -> None:
    broken = _plan([_actor("base")])
    status, _ = _echo(broken)
    healed = _plan(_base(), old_status=status, observed=None, now=T1)
    assert healed.configmap is not None and healed.status is not None
    ready = _cond(healed.status, "Ready")
    assert (ready["status"], ready["lastTransitionTime"]) == ("True", T1)


def test_last_transition_time_is_kept_while_the_condition_holds() -> None:
    status, observed = _echo(_plan(_base()))
    plan = _plan(_base(anon("format")), old_status=status, observed=observed, now=T1)
    assert plan.status is not None and plan.configmap is not None
    assert _cond(plan.status, "Ready")["lastTransitionTime"] == T0
    assert _cond(plan.status, "Ready")["message"] != _cond(status, "Ready")["message"]


def test_an_oversized_tool_set_is_too_large_and_writes_no_configmap() -> None:
    # Too large even packed: text gzip cannot shrink, over every ConfigMap it may fill.
    big = [[anon(f"tool{n}{i:04d}", description=noise(f"{n}{i}", 4000)) for i in range(700)]
           for n in "ab"]
    plan = _plan([skill("base", anonymousTools=big[0]), skill("more", anonymousTools=big[1]),
                  _actor("base", "more")])
    assert plan.configmap is None and plan.status is not None
    ready = _cond(plan.status, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "TooLarge")
    assert f"{MAX_CONFIGMAP_BYTES // 1024} KiB" in ready["message"]
    assert _cond(plan.status, "ResolvedRefs")["status"] == "True"


def test_status_tools_are_capped_but_tool_count_is_the_full_count() -> None:
    many = [anon(f"tool{i:04d}") for i in range(300)]
    plan = _plan([skill("base", anonymousTools=many), _actor("base")])
    assert plan.status is not None and plan.configmap is not None
    assert plan.status["toolCount"] == 300
    assert len(plan.status["tools"]) == 256
    assert len(json.loads(plan.configmap["data"][TOOLS_KEY])["tools"]) == 300
    assert {"name", "bindingName", "source", "skill"} <= set(plan.status["tools"][0])


def _events(plan: Plan) -> list[tuple[str, str, str]]:
    return [(e.type, e.reason, e.message) for e in plan.events]


def test_the_event_is_owed_when_the_configmap_got_the_change_but_the_status_did_not() -> None:
    status, observed = _echo(_plan(_base()))
    changed = _plan(_base(anon("format")), old_status=status, observed=observed, now=T1)
    # Killed after the ConfigMap write, before the status: restarted, it finds the
    # ConfigMap already right, and still owes the status and its Event.
    _, written = _echo(changed)
    restarted = _plan(_base(anon("format")), old_status=status, observed=written, now=T1)
    assert restarted.configmap is None and restarted.status is not None
    assert [r for _, r, _ in _events(restarted)] == ["ToolSetChanged"]
    new_status, _ = _echo(restarted, status)
    again = _plan(_base(anon("format")), old_status=new_status, observed=written, now=T1)
    assert again == Plan()  # paid once


def test_a_changed_tool_set_posts_tool_set_changed() -> None:
    status, observed = _echo(_plan(_base()))
    plan = _plan(_base(anon("format")), old_status=status, observed=observed, now=T1)
    events = _events(plan)
    assert [r for _, r, _ in events] == ["ToolSetChanged"]
    type_, _, message = events[0]
    assert type_ == "Normal" and "7 tools (+1 -0 ~0)" in message


def test_a_new_conflicting_tool_posts_tool_renamed() -> None:
    docs = [skill("a", anonymousTools=[anon("lint")]), skill("b", builtins=["git_operations"]),
            _actor("a", "b")]
    status, observed = _echo(_plan(docs))
    assert "lint" in [t["name"] for t in status["tools"]]
    docs[1] = skill("b", builtins=["git_operations"], anonymousTools=[anon("lint")])
    plan = _plan(docs, old_status=status, observed=observed, now=T1)
    renamed = [(t, m) for t, r, m in _events(plan) if r == "ToolRenamed"]
    assert renamed == [("Normal", "lint -> team-a/a.lint (name conflict)")]
    assert "ToolSetChanged" in [r for _, r, _ in _events(plan)]

    # The conflict gone, the name is bare again: said so, not "name conflict".
    status, observed = _echo(plan)
    docs[1] = skill("b", builtins=["git_operations"])
    plan = _plan(docs, old_status=status, observed=observed, now=T2)
    renamed = [(t, m) for t, r, m in _events(plan) if r == "ToolRenamed"]
    assert renamed == [("Normal", "team-a/a.lint -> lint (conflict resolved)")]


def _mcp_skill(description: str) -> Doc:
    server = {"name": "db", "url": "http://db.tools.svc/mcp",
              "tools": [{"name": "query", "description": description}]}
    return skill("base", builtins=["git_operations"], mcpServers=[server])


def test_a_changed_mcp_tool_definition_posts_a_warning() -> None:
    status, observed = _echo(_plan([_mcp_skill("read rows"), _actor("base")]))
    plan = _plan([_mcp_skill("read and delete rows"), _actor("base")], old_status=status,
                 observed=observed, now=T1)
    changed = [(t, m) for t, r, m in _events(plan) if r == "ToolDefinitionChanged"]
    assert len(changed) == 1
    type_, message = changed[0]
    assert type_ == "Warning"
    assert message.startswith("query (team-a/base.query) changed definition: sha256:")
    assert next(m for _, r, m in _events(plan) if r == "ToolSetChanged").startswith(
        "6 tools (+0 -0 ~1)")
    assert "ToolRenamed" not in [r for _, r, _ in _events(plan)]


def test_an_in_cluster_definition_change_is_one_event_not_two() -> None:
    # Skills and Tools are reviewed through GitOps; only definitions that come from
    # outside the cluster (MCP servers) get their own warning Event.
    status, observed = _echo(_plan(_base()))
    docs = [skill("base", builtins=["git_operations"],
                  anonymousTools=[anon("lint", description="now it also deletes files")]),
            _actor("base")]
    plan = _plan(docs, old_status=status, observed=observed, now=T1)
    assert [r for _, r, _ in _events(plan)] == ["ToolSetChanged"]
    assert next(m for _, r, m in _events(plan)).startswith("6 tools (+0 -0 ~1)")


# -- skills ---------------------------------------------------------------------
def _skill_plan(docs: list[Doc], servers: list[ServerReport], *, old_status: Doc | None = None,
                now: str = T0) -> Plan:
    cat = catalog(docs)
    resolution = Resolver(cat).resolve_skill(ref("team-a/docker"))
    assert resolution is not None
    sk = cat.skills[ref("team-a/docker")]
    return skill_plan(sk, resolution, old_status=old_status or {}, servers=servers, now=now)


def _listed(name: str = "docker", *, pins: PinState | None = None, **known: Any,
            ) -> ServerReport:
    """A server discovery lists, declaring two tools, with what discovery ``known``."""
    return ServerReport(name, 2, url=URL, listing=Listing(**known), pins=pins)


def _docker() -> list[Doc]:
    doc = skill("docker", mcpServers=[{"name": "docker", "url": URL,
                                       "tools": [anon("build"), anon("push")]}])
    doc["metadata"]["generation"] = 2
    return [doc]


def test_skill_plan_reports_a_failing_server() -> None:
    failing = _listed(tool_count=2, error="connection refused", reason="Unreachable")
    plan = _skill_plan(_docker(), [failing])
    status = plan.status
    assert status is not None and plan.configmap is None
    found = _cond(status, "Discovered")
    assert (found["status"], found["reason"]) == ("False", "Unreachable")
    assert found["message"] == "docker: connection refused"
    assert found["observedGeneration"] == 2
    assert status["mcpServers"] == [
        {"name": "docker", "toolCount": 2, "error": "connection refused", "url": URL}]
    # discovery trouble alone keeps the skill Ready, with the declared tools
    assert _cond(status, "Ready")["status"] == "True"
    assert status["toolCount"] == 2


def test_skill_plan_default_reason_recovery_and_no_rewrite() -> None:
    failing = _listed(tool_count=2, error="timed out")
    first = _skill_plan(_docker(), [failing])
    assert first.status is not None
    assert _cond(first.status, "Discovered")["reason"] == "DiscoveryFailed"
    old = json.loads(json.dumps(first.status))
    assert _skill_plan(_docker(), [failing], old_status=old, now=T1) == Plan()
    ok = _listed(tool_count=2, last_sync=T1)
    healed = _skill_plan(_docker(), [ok], old_status=old, now=T1)
    assert healed.status is not None
    found = _cond(healed.status, "Discovered")
    assert (found["status"], found["reason"], found["lastTransitionTime"]) == (
        "True", "Discovered", T1)
    assert healed.status["mcpServers"] == [
        {"name": "docker", "toolCount": 2, "lastSync": T1, "url": URL}]
    assert _cond(healed.status, "Ready")["lastTransitionTime"] == T0


def test_skill_plan_without_url_servers_has_no_discovered_condition() -> None:
    docs = [skill("docker", mcpServers=[{"name": "local", "command": ["docker-mcp"],
                                         "tools": [anon("build")]}])]
    (local,) = catalog(docs).skills[ref("team-a/docker")].spec.mcp_servers
    plan = _skill_plan(docs, [ServerReport.declared(local)])
    assert plan.status is not None
    assert [c["type"] for c in plan.status["conditions"]] == ["Ready", "ResolvedRefs"]
    assert plan.status["mcpServers"] == [{"name": "local", "toolCount": 1}]


def test_a_recorded_status_is_read_back_through_its_model() -> None:
    """What discovery reads back (lastSync, toolsDigest, pinnedDigests) comes through
    McpServerStatus; an entry that no longer parses counts as nothing recorded."""
    from skillop.model.status import recorded_servers, recorded_tools

    written = _skill_plan(_docker(), [_listed(
        last_sync=T1, tools_digest="sha256:1",
        pins=PinState({"build": "sha256:2"}))]).status
    assert written is not None
    (server,) = recorded_servers(written).values()
    assert (server.last_sync, server.tools_digest, server.pinned_digests) == (
        T1, "sha256:1", {"build": "sha256:2"})
    edited = {"mcpServers": [{"name": "docker", "toolCount": "many"}, "junk",
                             {"name": "other", "toolCount": 1}]}
    assert list(recorded_servers(edited)) == ["other"]
    tools = {"tools": [{"name": "a", "bindingName": "a", "source": "mcp", "skill": "team-a/s",
                        "qualifiedName": "team-a/s.a", "digest": "sha256:3"},
                       {"name": "b"}, {"name": "c", "bindingName": "c", "source": "mcp",
                                       "skill": "team-a/s"}]}
    # b does not parse and c names no qualifiedName: neither was recorded usably.
    assert {q: t.digest for q, t in recorded_tools(tools).items()} == {"team-a/s.a": "sha256:3"}


def test_a_status_written_by_another_version_is_read_back_whole() -> None:
    """Fields this version does not know (a newer operator's, in the status, a
    condition or a tool entry) are ignored on reading back: the old tools still count
    as changed (not removed and added) and the condition keeps its transition time."""
    status, observed = _echo(_plan([_mcp_skill("read rows"), _actor("base")]))
    newer = {**status, "futureField": {"x": 1},
             "conditions": [{**c, "futureKey": "y"} for c in status["conditions"]],
             "tools": [{**t, "futureKey": "z"} for t in status["tools"]]}
    plan = _plan([_mcp_skill("read and delete rows"), _actor("base")], old_status=newer,
                 observed=observed, now=T1)
    assert next(m for _, r, m in _events(plan) if r == "ToolSetChanged").startswith(
        "6 tools (+0 -0 ~1)")
    assert [r for _, r, _ in _events(plan)].count("ToolDefinitionChanged") == 1
    assert plan.status is not None
    assert _cond(plan.status, "Ready")["lastTransitionTime"] == T0
    servers = {"mcpServers": [{"name": "docker", "toolCount": 2, "lastSync": T1,
                               "futureKey": 1}]}
    from skillop.model.status import recorded_servers

    assert recorded_servers(servers)["docker"].last_sync == T1


def test_a_hand_edited_status_loses_only_what_no_longer_parses() -> None:
    """A condition edited out of shape is read as not recorded (its time restarts);
    the others, and the toolsHash, are read as written."""
    status, observed = _echo(_plan(_base()))
    edited = copy.deepcopy(status)
    resolved = next(c for c in edited["conditions"] if c["type"] == "ResolvedRefs")
    resolved["status"] = ["True"]
    edited["outdatedPods"] = "not a list"
    plan = _plan(_base(anon("format")), old_status=edited, observed=observed, now=T1)
    assert plan.status is not None
    assert _cond(plan.status, "Ready")["lastTransitionTime"] == T0
    assert _cond(plan.status, "ResolvedRefs")["lastTransitionTime"] == T1
    assert [r for _, r, _ in _events(plan)] == ["ToolSetChanged"]


def test_a_broken_spec_keeps_the_last_good_tool_set_described() -> None:
    status, observed = _echo(_plan(_base()))
    status["tools"] = [{**status["tools"][0], "futureKey": 1}, {"name": "junk"},
                       *status["tools"][1:]]
    plan = _plan([_actor("missing")], old_status=status, observed=observed, now=T1)
    assert plan.status is not None
    assert (plan.status["toolCount"], plan.status["toolsHash"]) == (
        status["toolCount"], status["toolsHash"])
    assert [t["name"] for t in plan.status["tools"]] == [
        t["name"] for t in status["tools"] if t["name"] != "junk"]
    assert "futureKey" not in plan.status["tools"][0]
    assert ActorStatus.model_validate(plan.status).wire() == plan.status


def test_copies_are_not_shared_between_plans() -> None:
    # a plan's status must not alias the old status it was computed from
    status, observed = _echo(_plan(_base()))
    before = copy.deepcopy(status)
    _plan([_actor("missing")], old_status=status, observed=observed, now=T1)
    assert status == before


# -- one source: every status is a status model, within the schema's limits ------------


def test_every_status_planned_is_its_status_model() -> None:
    first = _plan(_base())
    broken = _plan([*_base()[:1], _actor("base", "missing")], old_status=_echo(first)[0],
                   now=T1)
    for plan in (first, broken, _plan([_actor("missing")])):
        assert plan.status is not None
        assert ActorStatus.model_validate(plan.status).wire() == plan.status
    cat = catalog([skill("s", builtins=["git_operations"])])
    resolution = Resolver(cat).resolve_skill(ref("team-a/s"))
    assert resolution is not None
    servers = [_listed("m", last_sync=T0, error="x" * 10_000, tool_count=1,
                       pins=PinState({"t": "sha256:0"}, ("t changed",)),
                       tools_digest="sha256:1")]
    status = skill_plan(cat.skills[ref("team-a/s")], resolution, old_status={},
                        servers=servers, now=T0).status
    assert status is not None
    assert SkillStatus.model_validate(status).wire() == status
    (server,) = status["mcpServers"]
    assert len(server["error"]) == MAX_TEXT and server["error"].endswith("...")
    assert server["pinnedDigests"] == {"t": "sha256:0"}


def test_more_pruned_items_than_the_schema_allows_are_cut_and_counted() -> None:
    wide = [anon(f"w{i}", capabilities={"writes": True}) for i in range(MAX_PRUNED + 5)]
    plan = _plan([skill("base", anonymousTools=wide[:1000]),
                  skill("more", anonymousTools=wide[1000:]),
                  _actor("base", "more", skillAccessPolicy={"denyCapabilities": ["writes"]})])
    assert plan.status is not None
    assert len(plan.status["pruned"]) == MAX_PRUNED
    assert (f"{MAX_PRUNED + 5} items pruned; status.pruned lists the first {MAX_PRUNED}"
            in plan.status["warnings"])
    ActorStatus.model_validate(plan.status)


def test_an_invalid_skill_keeps_no_digest_where_the_schema_wants_a_list() -> None:
    cat = catalog([skill("s", builtins=["git_operations"])])
    resolution = Resolver(cat).resolve_skill(ref("team-a/s"))
    assert resolution is not None
    written = skill_plan(cat.skills[ref("team-a/s")], resolution, old_status={}, servers=[],
                         now=T0).status
    assert written is not None
    old = remembered("Skill", json.loads(json.dumps(written)))  # what the store keeps
    assert isinstance(old["tools"], str)
    problem = P.Problem(P.Subject("Skill", "team-a", "s"), "spec.mcpServers", P.INVALID_SPEC,
                        "duplicate name")
    status = invalid_status("Skill", [problem], generation=2, old=old, now=T1)
    assert status is not None
    assert "tools" not in status and "toolsHash" not in status and "toolCount" not in status
    SkillStatus.model_validate(status)
    ready = _cond(status, "Ready")
    assert (ready["status"], ready["reason"], ready["observedGeneration"]) == (
        "False", P.INVALID_SPEC, 2)
    assert status["skills"] == written["skills"]
    # Echoed back unchanged: nothing more to write.
    assert invalid_status("Skill", [problem], generation=2,
                          old=remembered("Skill", status), now=T2) is None


def test_status_says_which_secret_goes_where_and_keeps_it_with_the_last_good_set() -> None:
    helper = skill("helper", ns="team-b", sharing={"from": "All"}, mcpServers=[{
        "name": "helper", "url": URL, "tools": [anon("build")],
        "headersFrom": {"secretRef": {"name": "docker-auth"}}}])
    bound = [{"secretRef": {"name": "docker-auth"}, "hosts": ["docker-mcp.tools.svc:8080"]}]
    first = _plan([helper, _actor("team-b/helper", credentials=bound)])
    assert first.configmap is not None and first.status is not None
    where = [{"secret": "docker-auth", "server": "helper", "skill": "team-b/helper",
              "host": "http://docker-mcp.tools.svc:8080"}]
    assert first.status["credentials"] == where
    ActorStatus.model_validate(first.status)
    old, observed = _echo(first)
    # The sharer points the server elsewhere: refused, the ConfigMap stays, and so
    # does the status's account of where the Secret goes (the ConfigMap's set's).
    moved = copy.deepcopy(helper)
    moved["spec"]["mcpServers"][0]["url"] = "http://collect.evil.example/mcp"
    second = _plan([moved, _actor("team-b/helper", credentials=bound)], old_status=old,
                   observed=observed, now=T1)
    assert second.configmap is None and second.status is not None
    ready = next(c for c in second.status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == P.CREDENTIAL_NOT_BOUND
    assert "http://collect.evil.example" in ready["message"]
    assert second.status["credentials"] == where
