"""When a part of a packed set that no index names any more is deleted: after a
grace, counted from when the operator first saw it so (docs/toolset.md, Large
sets). The kubelet refreshes each source of a pod's projected volume on its own
schedule, so a pod may show the index before for a while yet; kept, the part
still makes that index whole for a gateway starting meanwhile. Forgotten on a
restart: the grace then starts again, which only defers the deletion."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from skillop.model.names import ObjectRef
from skillop.operator.configmaps import ObservedConfigMap


class StaleParts:
    """The parts of each Actor found stale, and since when (monotonic seconds)."""

    def __init__(self, grace: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.grace = grace
        self._clock = clock
        self._since: dict[tuple[ObjectRef, str], float] = {}

    def due(self, actor: ObjectRef, stale: Sequence[ObservedConfigMap],
            ) -> tuple[tuple[ObservedConfigMap, ...], float | None]:
        """Of ``actor``'s ``stale`` parts (all there are now), those whose grace is
        over, and the seconds until the next one's is (None: no other waits)."""
        now = self._clock()
        names = {part.name for part in stale}
        for gone in [k for k in self._since if k[0] == actor and k[1] not in names]:
            del self._since[gone]  # written again since, or deleted
        due: list[ObservedConfigMap] = []
        wait: float | None = None
        for part in stale:
            left = self._since.setdefault((actor, part.name), now) + self.grace - now
            if left <= 0:
                due.append(part)
            else:
                wait = left if wait is None else min(wait, left)
        return tuple(due), wait
