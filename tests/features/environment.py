"""Behave's hooks: what every scenario shares, started once per run.

The docker-tools MCP server and the manifests pointing at it serve every feature;
the control plane and the operator start at the first feature tagged ``@cluster``
(and stop at the end). Where the real API tier is not at hand such a feature is
skipped, with one line saying why, as ``tests/realapi`` is.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
# Behave is its own entry point: the test kits are importable as pytest's
# ``pythonpath`` (pyproject.toml) makes them, plus this folder.
for folder in (HERE, TESTS / "realapi", TESTS / "gateway", TESTS / "mcp", TESTS / "cli",
               TESTS / "unit", TESTS, TESTS.parent / "operator"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import world  # noqa: E402


def before_all(context: Any) -> None:
    context.stack = contextlib.ExitStack()
    context.workdir = Path(context.stack.enter_context(tempfile.TemporaryDirectory()))
    context.docker = context.stack.enter_context(world.docker_server())
    context.cluster = world.ClusterWorld(context.stack)


def before_feature(context: Any, feature: Any) -> None:
    if "cluster" in feature.tags:
        reason = context.cluster.start()
        if reason is not None:
            # behave captures what hooks print; this line is for the person running it
            sys.__stdout__.write(f"skipped: {reason}\n")
            feature.skip(reason)


def before_scenario(context: Any, scenario: Any) -> None:
    folder = Path(tempfile.mkdtemp(dir=context.workdir))
    context.manifests = world.Manifests(folder, context.docker.url)


def after_all(context: Any) -> None:
    context.stack.close()
