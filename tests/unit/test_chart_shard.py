"""The chart's shard values: the operator's settings, the Lease per shard, and the
admission webhooks of each release limited to its shard's namespaces."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chartkit import load, objects
from skillop.model.settings import SHARD_CLUSTER_OWNER, SHARD_SELECTOR
from skillop.model.shardselector import LabelSelector

helm = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
try:
    CHART = load()
except (helm.HelmError, OSError) as err:
    pytest.skip(f"the Helm engine cannot load here: {err}", allow_module_level=True)

SHARD_A = {"shard": {"name": "a", "namespaceSelector": "skillop.dev/shard=a,!frozen",
                     "clusterOwner": False},
           "webhook": {"enabled": True}, "injection": {"enabled": True}}


def _env(values: dict[str, Any]) -> dict[str, str]:
    deployment = next(d for d in objects(CHART, values) if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", "") for e in container["env"]}


def _selectors(values: dict[str, Any]) -> dict[str, dict[str, Any] | None]:
    """Each admission webhook's namespaceSelector, by webhook name."""
    return {hook["name"]: hook.get("namespaceSelector")
            for doc in objects(CHART, values)
            if doc["kind"] in ("ValidatingWebhookConfiguration",
                               "MutatingWebhookConfiguration")
            for hook in doc["webhooks"]}


def test_a_shard_is_the_operators_settings_and_its_own_lease() -> None:
    env = _env(SHARD_A)
    assert SHARD_SELECTOR.read(env) == LabelSelector.parse("skillop.dev/shard=a,!frozen")
    assert SHARD_CLUSTER_OWNER.read(env) is False
    assert env["SKILLOP_LEASE_NAME"] == "skillop-a"
    assert _env({})["SKILLOP_LEASE_NAME"] == "skillop"  # unsharded: as before


def test_every_admission_webhook_of_a_shard_sees_only_its_namespaces() -> None:
    selectors = _selectors(SHARD_A)
    assert set(selectors) == {"skills.validate.skillop.dev", "actors.validate.skillop.dev",
                              "toolcallapprovals.mutate.skillop.dev",
                              "pods.inject.skillop.dev", "pods.validate.skillop.dev"}
    for name, selector in selectors.items():
        assert selector is not None, name
        expressions = selector["matchExpressions"]
        assert {"key": "skillop.dev/shard", "operator": "In", "values": ["a"]} in expressions
        assert {"key": "frozen", "operator": "DoesNotExist"} in expressions


def test_unsharded_webhooks_are_as_before() -> None:
    selectors = _selectors({"webhook": {"enabled": True}})
    assert selectors["skills.validate.skillop.dev"] is None


#: Every kind of requirement; the chart is rendered once (Helm takes a second).
SELECTOR = "skillop.dev/shard=a,tier!=frozen,team,!legacy"
_LABELS = st.dictionaries(st.sampled_from(["skillop.dev/shard", "tier", "team", "legacy"]),
                          st.sampled_from(["a", "b", "frozen", "x"]), max_size=4)
_RENDERED: list[dict[str, Any]] = []


@given(_LABELS)
@settings(max_examples=60, deadline=None)  # the first example renders the chart
def test_the_webhooks_select_the_namespaces_the_operator_owns(labels: dict[str, str]) -> None:
    """The chart's matchExpressions and the operator's selector agree on every
    namespace: an object is admitted by the shard that writes it."""
    if not _RENDERED:
        selector = _selectors({"shard": {"namespaceSelector": SELECTOR},
                               "webhook": {"enabled": True}})["skills.validate.skillop.dev"]
        assert selector is not None
        _RENDERED.append(selector)
    assert _matches(_RENDERED[0]["matchExpressions"], labels) == \
        LabelSelector.parse(SELECTOR).matches(labels)


def _matches(expressions: list[dict[str, Any]], labels: dict[str, str]) -> bool:
    def one(e: dict[str, Any]) -> bool:
        present = e["key"] in labels
        return {"In": present and labels.get(e["key"]) in e.get("values", []),
                "NotIn": not present or labels[e["key"]] not in e.get("values", []),
                "Exists": present, "DoesNotExist": not present}[e["operator"]]
    return all(one(e) for e in expressions)
