"""The Helm chart rendered by the real Helm v4 engine (helm-python-sdk), as objects.

Shared by the chart's unit tests and the real-API tier, which applies what the
chart renders (RBAC, the webhook configuration) to a real API server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[1] / "helm" / "skillop"
RELEASE, NAMESPACE = "skillop", "skillop-system"


def load() -> Any:
    """The chart; raises ImportError or helm_python.HelmError when Helm is not usable here."""
    import helm_python

    return helm_python.Chart.load(str(CHART))


def objects(chart: Any, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every object the chart renders (NOTES.txt excluded), in file order."""
    out = chart.render(values=values or {}, name=RELEASE, namespace=NAMESPACE)
    docs: list[dict[str, Any]] = []
    for path, text in sorted(out.items()):
        if path.endswith("NOTES.txt"):
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs
