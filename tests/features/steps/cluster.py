"""The cluster (the real API tier and the operator), as kubectl shows it."""

from __future__ import annotations

import json
from typing import Any

import world
import yaml
from behave import given, then, when


def _toolset(context: Any, ref: str) -> dict[str, Any]:
    ns, name = ref.split("/")
    return context.cluster.toolset(ns, name)


@given("the full-stack-dev Skills are applied to the cluster")
def applied(context: Any) -> None:
    context.cluster.apply_manifests(context.manifests)


@given('the ConfigMap of the Actor "{ref}" soon has these tools:')
@then('the ConfigMap of the Actor "{ref}" soon has these tools:')
def configmap_has(context: Any, ref: str) -> None:
    rows = world.rows(context.table)
    world.eventually(lambda: world.mismatches(_toolset(context, ref), rows))


@then('the ConfigMap of the Actor "{ref}" soon does not have {names}')
def configmap_lacks(context: Any, ref: str, names: str) -> None:
    unwanted = world.names_in(names)

    def problems() -> list[str]:
        toolset = _toolset(context, ref)
        return world.present(toolset, unwanted) if toolset else ["no ConfigMap"]

    world.eventually(problems)


@when('the Skill "{ref}" gains an inline tool "{name}" that says "{description}"')
def gains_tool(context: Any, ref: str, name: str, description: str) -> None:
    doc = context.manifests.skill(ref)
    doc["spec"].setdefault("anonymousTools", []).append(
        {"name": name, "description": description, "capabilities": {"readOnly": True}})
    done = context.cluster.apply(json.dumps(doc))
    assert done.returncode == 0, done.stderr


@when('I apply the Skill "{ref}" including "{included}"')
def apply_including(context: Any, ref: str, included: str) -> None:
    context.run = context.cluster.apply(json.dumps(context.manifests.include(ref, included)))


@then('the cluster refuses it with "{message}"')
def refused(context: Any, message: str) -> None:
    assert context.run.returncode != 0, context.run.stdout
    assert message in context.run.stderr, context.run.stderr


@then('the Skill "{ref}" in the cluster includes nothing')
def includes_nothing(context: Any, ref: str) -> None:
    ns, name = ref.split("/")
    spec = context.cluster.real.get("Skill", ns, name)["spec"]
    assert not spec.get("includes"), spec


@when('the admins of "{ns}" apply a SkillPolicy that denies the source "{source}"')
def skill_policy(context: Any, ns: str, source: str) -> None:
    policy = {"apiVersion": "skillop.dev/v1alpha1", "kind": "SkillPolicy",
              "metadata": {"name": f"no-{source}", "namespace": ns},
              "spec": {"sources": {"deny": [source]}}}
    done = context.cluster.apply(yaml.safe_dump(policy))
    assert done.returncode == 0, done.stderr
    context.add_cleanup(context.cluster.real.kubectl, "delete", "skillpolicy", "-n", ns,
                        f"no-{source}", "--wait=false")
