"""Helpers for the gateway tests: a kubelet-like volume, the gateway as a process,
and the SDK's client as the agent."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for _path in (ROOT / "tests", ROOT / "tests" / "mcp", ROOT / "tests" / "unit",
              ROOT / "tests" / "gateway"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
