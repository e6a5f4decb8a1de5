"""The range pyproject.toml allows a third-party distribution whose internals the
package relies on: a pin test fails when the installed version is outside it, so
that a new version is checked before the range is widened."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def pinned(distribution: str) -> SpecifierSet:
    """The specifier of ``distribution`` in pyproject's dependencies (every extra);
    the extras that name it must agree."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    declared = [*project.get("dependencies", []),
                *(r for extra in project.get("optional-dependencies", {}).values()
                  for r in extra)]
    found = {str(req.specifier) for req in map(Requirement, declared)
             if req.name == distribution}
    assert len(found) == 1, f"{distribution} in pyproject.toml: {sorted(found) or 'absent'}"
    return SpecifierSet(found.pop())


def installed_within_pin(distribution: str) -> tuple[Version, SpecifierSet]:
    """The installed version of ``distribution`` and its pin; asserts the one is in the other."""
    version, allowed = Version(metadata.version(distribution)), pinned(distribution)
    assert version in allowed, (
        f"{distribution} {version} is installed; the code was checked against {allowed}")
    return version, allowed
