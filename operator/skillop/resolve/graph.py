"""The include graph and its cycles.

Cycles are found with an iterative Tarjan (so a 10,000-skill chain cannot hit
the recursion limit); each skill on a cycle gets the cycle spelled from itself,
``team-a/a -> team-a/b -> team-a/a``, which is what its error message shows.
Skills on one cycle share it (rotated), so a cycle of n skills costs one search
and n short messages, not n searches and n messages of n names each.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from skillop.model.names import ObjectRef

Edges = Callable[[ObjectRef], Sequence[ObjectRef]]
T = TypeVar("T")


def strongly_connected(nodes: Iterable[ObjectRef], edges: Edges) -> list[list[ObjectRef]]:
    """Tarjan's algorithm, without recursion."""
    index: dict[ObjectRef, int] = {}
    low: dict[ObjectRef, int] = {}
    on_stack: set[ObjectRef] = set()
    stack: list[ObjectRef] = []
    out: list[list[ObjectRef]] = []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work: list[tuple[ObjectRef, int]] = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            succ = edges(node)
            recursed = False
            while i < len(succ):
                nxt = succ[i]
                i += 1
                if nxt not in index:
                    work.append((node, i))
                    work.append((nxt, 0))
                    recursed = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if recursed:
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return out


@dataclass(frozen=True, slots=True)
class Cycle:
    """A cycle through one skill: ``ring`` (the skills in include order, each once)
    read from position ``start``, back to where it began."""

    ring: tuple[ObjectRef, ...]
    start: int

    @property
    def next(self) -> ObjectRef:
        """The skill this one includes on the cycle."""
        return self.ring[(self.start + 1) % len(self.ring)]

    def path(self) -> list[ObjectRef]:
        n = len(self.ring)
        return [self.ring[(self.start + i) % n] for i in range(n + 1)]

    def spell(self, limit: int = 24) -> str:
        """``a -> b -> a``; a cycle of more than ``limit`` steps keeps its two ends."""
        n = len(self.ring)
        if n <= limit:
            return spell_cycle(self.path())
        keep = limit // 2
        head = [self.ring[(self.start + i) % n].canonical for i in range(keep)]
        tail = [self.ring[(self.start + i) % n].canonical for i in range(n - keep + 1, n + 1)]
        return " -> ".join([*head, f"... ({n + 1 - 2 * keep} more)", *tail])


def cycles(nodes: Iterable[ObjectRef], edges: Edges) -> dict[ObjectRef, Cycle]:
    """For every node on a cycle, a cycle through it, starting and ending there.

    A node not yet on a found cycle gets a shortest cycle through it; every other
    node on that cycle shares it, which for a ring of n skills is one search.
    """
    found: dict[ObjectRef, Cycle] = {}
    for component in strongly_connected(nodes, edges):
        members = set(component)
        if len(component) == 1 and component[0] not in edges(component[0]):
            continue
        for node in component:
            if node in found:
                continue
            ring = tuple(_shortest_cycle(node, members, edges)[:-1])
            for i, member in enumerate(ring):
                found.setdefault(member, Cycle(ring, i))
    return found


def _shortest_cycle(start: ObjectRef, members: set[ObjectRef], edges: Edges) -> list[ObjectRef]:
    parent: dict[ObjectRef, ObjectRef] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in edges(node):
            if nxt not in members:
                continue
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if nxt not in parent:
                parent[nxt] = node
                queue.append(nxt)
    return [start, start]  # unreachable for a member of a cyclic component


def spell_cycle(path: Sequence[ObjectRef]) -> str:
    return " -> ".join(ref.canonical for ref in path)


def reachable(starts: Iterable[T], edges: Callable[[T], Iterable[T]]) -> set[T]:
    """Every node reachable from ``starts`` (the starts included), iteratively."""
    seen: set[T] = set()
    stack = list(starts)
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(edges(node))
    return seen
