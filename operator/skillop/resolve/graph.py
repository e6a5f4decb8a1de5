"""The include graph and its cycles.

Cycles are found with an iterative Tarjan (so a 10,000-skill chain cannot hit
the recursion limit); each skill on a cycle gets the cycle spelled from itself,
``team-a/a -> team-a/b -> team-a/a``, which is what its error message shows.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence

from skillop.model.names import ObjectRef

Edges = Callable[[ObjectRef], Sequence[ObjectRef]]


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


def cycles(nodes: Iterable[ObjectRef], edges: Edges) -> dict[ObjectRef, list[ObjectRef]]:
    """For every node on a cycle, one shortest cycle through it, starting and ending there."""
    found: dict[ObjectRef, list[ObjectRef]] = {}
    for component in strongly_connected(nodes, edges):
        members = set(component)
        if len(component) == 1 and component[0] not in edges(component[0]):
            continue
        for node in component:
            found[node] = _shortest_cycle(node, members, edges)
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


def reverse_edges(
    nodes: Iterable[ObjectRef], edges: Edges
) -> Mapping[ObjectRef, list[ObjectRef]]:
    out: dict[ObjectRef, list[ObjectRef]] = {}
    for node in nodes:
        for nxt in edges(node):
            out.setdefault(nxt, []).append(node)
    return out
