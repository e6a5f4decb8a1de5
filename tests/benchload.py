"""The benchmarks' own modules (bench/, scripts rather than a package), for tests of
what they measure with."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def bench_module(name: str) -> ModuleType:
    """``bench/<name>.py`` imported as ``<name>_bench`` (no clash with the tests' kits)."""
    spec = importlib.util.spec_from_file_location(f"{name}_bench", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
