"""Giving freed memory back to the system after a large batch.

A batch that resolves thousands of objects allocates and frees hundreds of
megabytes: request bodies, flattened sets, plans, ConfigMap texts. CPython
returns its own small-object arenas once they are empty, but blocks larger than
512 bytes come from the C allocator, and glibc keeps the pages of freed blocks
in the middle of its heap: the operator's resident size stays at its peak
although most of it is free (docs/benchmarks.md, Memory). ``malloc_trim``
releases those pages; it takes a few milliseconds, so it is asked only after a
batch that planned many objects. On a C library without it (musl) nothing is
done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

#: A batch planning at least this many objects is followed by a trim.
TRIM_AFTER_OBJECTS = 256


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError, TypeError):  # not glibc, or no C library found
        return None
    return trim


def release_free_memory() -> bool:
    """Return the C allocator's free pages to the system; whether it could ask."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def after_batch(objects: int) -> None:
    """Trim after a batch that planned ``objects`` objects, if that was many."""
    if objects >= TRIM_AFTER_OBJECTS:
        release_free_memory()
