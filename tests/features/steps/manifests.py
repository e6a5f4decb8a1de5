"""Manifests on disk and the ``skillop`` command run on them, as a user runs it."""

from __future__ import annotations

import json
from typing import Any

from behave import given, then, when
from clirun import run


@given("the full-stack-dev Skills from the examples")
def examples(context: Any) -> None:
    (top,) = [d for d in context.manifests.docs() if d["kind"] == "Skill"
              and d["metadata"]["name"] == "full-stack-dev"]
    assert [i["skill"] for i in top["spec"]["includes"]] == [
        "file-ops", "code-analysis", "testing", "devops-toolkit"], top


@given('the Skill "{ref}" also includes "{included}"')
def also_includes(context: Any, ref: str, included: str) -> None:
    context.manifests.include(ref, included)


def _skillop(context: Any, *args: str) -> None:
    context.run = run(*args, "-f", str(context.manifests.folder), "-o", "json")


def _toolset(context: Any) -> None:
    assert context.run.returncode == 0, context.run.stderr
    context.toolset = json.loads(context.run.stdout)


@when('I list the tools of the Actor "{ref}", asking the MCP servers')
def tools_discovered(context: Any, ref: str) -> None:
    ns, name = ref.split("/")
    _skillop(context, "tools", name, "-n", ns, "--discover", "--allow", "127.0.0.1")
    _toolset(context)


@when('I list the tools of the Actor "{ref}"')
def tools(context: Any, ref: str) -> None:
    ns, name = ref.split("/")
    _skillop(context, "tools", name, "-n", ns)
    _toolset(context)


@when('I flatten the Skill "{ref}"')
def flatten(context: Any, ref: str) -> None:
    ns, name = ref.split("/")
    _skillop(context, "flatten", name, "-n", ns)
    _toolset(context)


@when("I validate the manifests")
def validate(context: Any) -> None:
    context.run = run("validate", "-f", str(context.manifests.folder))


@then('validation fails with "{message}"')
def validation_fails(context: Any, message: str) -> None:
    assert context.run.returncode != 0, context.run.stdout
    assert message in context.run.stderr, context.run.stderr


@when('I ask why the Actor "{ref}" has no "{tool}"')
def explain(context: Any, ref: str, tool: str) -> None:
    ns, name = ref.split("/")
    context.run = run("explain", name, tool, "-n", ns, "-f", str(context.manifests.folder))


@then('I am told "{line}"')
def told(context: Any, line: str) -> None:
    assert context.run.returncode == 0, context.run.stderr
    assert line in context.run.stdout.splitlines(), context.run.stdout
