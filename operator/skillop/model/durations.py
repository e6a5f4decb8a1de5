"""Go durations (``1m30s``, ``500ms``, ``2h``), as Kubernetes spells them.

Only the units a refresh period needs (``ms``, ``s``, ``m``, ``h``); the CRD's
pattern admits exactly these, and CEL's ``duration()`` parses a superset.
"""

from __future__ import annotations

import re
from typing import Final

#: The grammar: one or more ``<digits><unit>`` parts.
DURATION_PATTERN: Final = r"^([0-9]+(ms|s|m|h))+$"
#: The longest duration Kubernetes (Go's time.Duration) represents, in nanoseconds.
MAX_NANOS: Final = 2**63 - 1
_PART = re.compile(r"([0-9]+)(ms|s|m|h)")
_NANOS = {"ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


def duration_nanos(text: str) -> int:
    """The sum of the parts, in nanoseconds (``text`` matches ``DURATION_PATTERN``)."""
    return sum(int(n) * _NANOS[unit] for n, unit in _PART.findall(text))


def duration_seconds(text: str) -> float:
    """``1m30s``, ``500ms``, ``2h``: the sum of the parts, in seconds."""
    return duration_nanos(text) / 10**9
