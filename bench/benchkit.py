"""Helpers shared by the benchmarks (run as scripts: this folder is on sys.path)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(predicate: Callable[[], bool], timeout: float, what: str,
               interval: float = 0.25) -> float:
    """Poll until ``predicate()`` holds; return the seconds it took."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"not within {timeout}s: {what}")
        time.sleep(interval)
    return time.monotonic() - start
