"""Node packages the tests run, installed from npm by the suite itself.

A package directory of the tests (``package.json``, a committed
``package-lock.json`` and the test's own ``*.mjs`` scripts) is installed with
``npm ci`` once per machine, into a cache directory named after the lock file, so
a changed lock installs afresh and an unchanged one costs a stat. ``.ci/run``
warms the cache (``python tests/npmkit.py``) so the tests themselves need no
network. Without node or npm a test that needs them skips, saying so in one line.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent
# Every package directory of the tests, for the cache warm-up of .ci/run.
PACKAGES = {"node-clients": TESTS / "gateway" / "node",
            "oidc-provider": TESTS / "fixtures" / "oidc"}


class NodeMissing(RuntimeError):
    """node or npm is not installed."""


def installed(source: Path, name: str) -> Path:
    """``source`` installed (its pinned lock) in the cache, its scripts beside its
    node_modules (ES modules resolve packages from where the script is); raises
    NodeMissing without node or npm, RuntimeError when npm fails."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        raise NodeMissing("npm and node are not installed")
    lock = (source / "package-lock.json").read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "skillop"
    target = cache / f"{name}-{hashlib.sha256(lock).hexdigest()[:16]}"
    if not (target / "node_modules" / ".package-lock.json").exists():
        _install(npm, source, cache, target)
    for script in source.glob("*.mjs"):
        shutil.copy(script, target / script.name)
    return target


def _install(npm: str, source: Path, cache: Path, target: Path) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    staging = cache / f".{target.name}.{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for name in ("package.json", "package-lock.json"):
        shutil.copy(source / name, staging / name)
    done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                          cwd=staging, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(f"npm ci failed in {source.name}: {done.stderr[-2000:]}")
    try:
        staging.rename(target)
    except OSError:  # another run installed it meanwhile
        shutil.rmtree(staging, ignore_errors=True)


def installed_or_skip(source: Path, name: str, *, needed_for: str) -> Path:
    """``installed``, or the calling test skipped in one line without node or npm."""
    import pytest

    try:
        return installed(source, name)
    except NodeMissing as missing:
        pytest.skip(f"{missing}: {needed_for} cannot be run")


def main() -> int:
    """Install every package directory (the cache warm-up of .ci/run)."""
    for name, source in PACKAGES.items():
        try:
            installed(source, name)
        except (NodeMissing, RuntimeError) as failed:
            print(f"ci: node packages not installed ({name}): {failed}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
