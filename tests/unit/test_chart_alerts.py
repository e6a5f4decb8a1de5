"""The chart's PrometheusRule, as rendered: ``promtool check rules`` accepts it and
``promtool test rules`` fires its alerts for the causes they name (and not for a
healthy gateway); the dashboard ConfigMap holds JSON Grafana's sidecar finds.
Skips, saying why, without promtool (Debian's prometheus; .ci/run installs it)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from chartkit import load, objects

PROMTOOL = shutil.which("promtool")
ON = {"metrics": {"prometheusRule": {"enabled": True}, "dashboard": {"enabled": True}}}


helm = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
try:
    _CHART = load()
except (helm.HelmError, OSError) as err:  # e.g. libhelm_c missing for this platform
    pytest.skip(f"helm_python cannot load the chart: {err}", allow_module_level=True)


@cache
def _objects() -> list[dict[str, Any]]:
    return objects(_CHART, ON)


def _rendered(kind: str) -> dict[str, Any]:
    return next(o for o in _objects() if o["kind"] == kind
                and (kind != "ConfigMap" or o["metadata"]["name"].endswith("-dashboard")))


def _series(name: str, values: str) -> dict[str, str]:
    return {"series": name, "values": values}


@pytest.mark.skipif(PROMTOOL is None, reason="no promtool on PATH (Debian's prometheus)")
def test_the_rules_check_and_fire_for_their_causes(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": _rendered("PrometheusRule")["spec"]["groups"]}))
    check = subprocess.run([str(PROMTOOL), "check", "rules", str(rules)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    pod = 'namespace="team-a", pod="agent-0"'
    tests = {"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [
            # agent-0: 2 refused calls a second and a few ok; upstream "up" down.
            _series(f'skillop_gateway_calls_total{{{pod}, binding="(unknown)",'
                    ' outcome="refused", reason="unknown_tool"}', "0+120x30"),
            _series(f'skillop_gateway_calls_total{{{pod}, binding="echo", outcome="ok",'
                    ' reason=""}', "0+6x30"),
            _series(f'skillop_gateway_upstream_failures_total{{{pod}, upstream="up",'
                    ' kind="unavailable"}', "0+5x30"),
            # agent-1: healthy, every call ok through its upstream.
            _series('skillop_gateway_calls_total{namespace="team-a", pod="agent-1",'
                    ' binding="echo", outcome="ok", reason=""}', "0+60x30"),
            _series('skillop_gateway_upstream_duration_seconds_count{namespace="team-a",'
                    ' pod="agent-1", upstream="up"}', "0+60x30"),
            _series("skillop_leader", "1x30"),
        ],
        "alert_rule_test": [
            {"eval_time": "25m", "alertname": "SkillopGatewayDeniedCallsSpiking",
             "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": "team-a",
                                            "pod": "agent-0"}}]},
            {"eval_time": "25m", "alertname": "SkillopGatewayUpstreamDown",
             "exp_alerts": [{"exp_labels": {"severity": "critical", "namespace": "team-a",
                                            "pod": "agent-0", "upstream": "up"}}]},
            {"eval_time": "25m", "alertname": "SkillopNoLeader", "exp_alerts": []},
        ]}]}
    for test in tests["tests"]:  # the summaries are templates: match them as rendered
        for case in test["alert_rule_test"]:
            for alert in case["exp_alerts"]:
                alert["exp_annotations"] = _annotations(case["alertname"], alert["exp_labels"])
    spec = tmp_path / "test.yaml"
    spec.write_text(yaml.safe_dump(tests))
    run = subprocess.run([str(PROMTOOL), "test", "rules", str(spec)], capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def _annotations(alert: str, labels: dict[str, str]) -> dict[str, str]:
    rule = next(r for g in _rendered("PrometheusRule")["spec"]["groups"] for r in g["rules"]
                if r.get("alert") == alert)
    summary: str = rule["annotations"]["summary"]
    for key, value in labels.items():
        summary = summary.replace(f"{{{{ $labels.{key} }}}}", value)
    return {"summary": summary}


def test_the_dashboard_is_json_labelled_for_grafana_and_queries_what_exists() -> None:
    config = _rendered("ConfigMap")
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    board = json.loads(config["data"]["skillop.json"])
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    metrics_py = (Path(__file__).resolve().parents[2] / "operator" / "skillop" / "gateway"
                  / "metrics.py").read_text()
    for expr in exprs:
        for name in re.findall(r"skillop_gateway_[a-z_]+", expr):
            base = name.removesuffix("_total").removesuffix("_bucket").removesuffix("_count")
            assert base.removeprefix("skillop_gateway_") in metrics_py, name
