"""Whoever writes the webhook configurations (the chart, or kopf in managed mode), a
webhook fails the same way when no replica answers, and the pod injector fails
closed: a labelled pod is never admitted without the gateway."""

from __future__ import annotations

from typing import Any

import pytest

import chartkit

kopf = pytest.importorskip("kopf")
helm = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
try:
    # kopf builds the configurations it manages from its registry with this function
    # and keeps both private: there is no public way to see what it would write.
    from kopf._cogs.structs.references import Resource
    from kopf._core.engines.admission import build_webhooks
except ImportError as err:
    pytest.skip(f"kopf internals changed: {err}", allow_module_level=True)
try:
    CHART = chartkit.load()
except (helm.HelmError, OSError) as err:
    pytest.skip(f"helm_python cannot load the chart: {err}", allow_module_level=True)

from skillop.model.names import API_GROUP, API_VERSION  # noqa: E402
from skillop.operator import webhook  # noqa: E402

RESOURCES = [Resource(API_GROUP, API_VERSION, plural, namespaced=True)
             for plural in ("skills", "actors", "toolcallapprovals")]
RESOURCES.append(Resource("", "v1", "pods", namespaced=True))
CLIENT = {"url": "https://skillop.example:9443"}


def managed(*, on_stop: bool = False) -> dict[str, str]:
    """Handler id -> failurePolicy, as kopf writes them while running or, with
    ``on_stop``, what it leaves when it stops gracefully."""
    registry = kopf.OperatorRegistry()
    webhook.register(registry)
    webhook.register_approvals(registry)
    # As the operator registers them in managed mode: the check of pod changes is
    # the chart's only (it needs the old object's label, which kopf's filter lacks).
    webhook.register_injection(registry, pod_updates=False)
    hooks = build_webhooks(registry._webhooks.get_all_handlers(), resources=RESOURCES,
                           name_suffix="skillop.dev", client_config=CLIENT,
                           persistent_only=on_stop)
    return {h["clientConfig"]["url"].rsplit("/", 1)[1]: h["failurePolicy"] for h in hooks}


def charted() -> dict[str, str]:
    """Handler id (the path) -> failurePolicy in the chart's configurations (defaults)."""
    docs = chartkit.objects(CHART, {"webhook": {"enabled": True},
                                    "injection": {"enabled": True}})
    out: dict[str, str] = {}
    for doc in docs:
        if doc["kind"] in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            for hook in doc["webhooks"]:
                path: Any = hook["clientConfig"]["service"]["path"]
                out[path.lstrip("/")] = hook["failurePolicy"]
    return out


def test_managed_mode_fails_as_the_chart_does() -> None:
    chart = charted()
    assert chart.pop(webhook.POD_UPDATE_WEBHOOK) == "Fail"
    assert managed() == chart
    assert managed()[webhook.POD_WEBHOOK] == "Fail"
    assert managed()[webhook.SKILL_WEBHOOK] == managed()[webhook.ACTOR_WEBHOOK] == "Ignore"


def test_a_graceful_stop_keeps_the_webhooks_that_fail_closed() -> None:
    # kopf empties its managed configurations on stop, but for persistent webhooks:
    # the injector and approvals stay, so pods and decisions are refused meanwhile.
    assert managed(on_stop=True) == {webhook.POD_WEBHOOK: "Fail",
                                     webhook.APPROVAL_WEBHOOK: "Fail"}
