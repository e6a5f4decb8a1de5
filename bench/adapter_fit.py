"""The query adapter of bench/adapter_cv.py: its fit and the servers' split, numpy only.

q' = normalize(q + B(A q)), A: width -> rank, B: rank -> width, fitted by a softmax
loss of each query's cosine against every tool (its labelled tools positive), L2 on A
and B (towards the identity), Adam, full batch, seeded: the same inputs give the same
weights.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Array = npt.NDArray[np.float64]

Held = Callable[[frozenset[str]], bool]


@dataclass(frozen=True)
class Settings:
    rank: int
    penalty: float
    temperature: float
    steps: int
    rate: float = 0.01


def fit_adapter(queries_: Array, positive: Array, tools: Array, settings: Settings,
                ) -> tuple[Array, Array]:
    """A (r x 384) and B (384 x r) minimising the mean over queries of -log of the
    softmax share of each labelled tool (averaged over a query's labelled tools), by
    Adam, full batch. ``queries_``: unit rows; ``positive``: queries x tools, 0/1;
    ``tools``: the tools' vectors the query's cosine is taken with."""
    import numpy as np

    rng = np.random.default_rng(0)
    width = queries_.shape[1]
    a = rng.normal(0.0, 1.0 / np.sqrt(width), (settings.rank, width))
    b = np.zeros((width, settings.rank))
    raw = queries_ @ tools.T  # queries x tools
    share = positive / positive.sum(axis=1, keepdims=True)
    tau, n = settings.temperature, len(queries_)
    state = [(np.zeros_like(a), np.zeros_like(a)), (np.zeros_like(b), np.zeros_like(b))]
    for step in range(1, settings.steps + 1):
        u = queries_ @ a.T  # n x r
        mb = tools @ b  # tools x r
        d = u @ b.T  # n x width
        norm = np.sqrt(1.0 + 2.0 * (queries_ * d).sum(axis=1) + (d * d).sum(axis=1))[:, None]
        s = tau * (raw + u @ mb.T) / norm
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        ds = (p - share) / n  # d loss / d s
        along = (ds * s).sum(axis=1, keepdims=True)  # dq'.q' (tau folded in)
        # d loss / d z = (tau ds M - q' along) / |z|, with q' = z / |z|, z = q + d
        dz_tools = tau * ds / norm  # n x tools: the part through M
        z = queries_ + d
        dz_self = along / norm ** 2  # times z: the normalisation's part
        db = (tools.T @ (dz_tools.T @ u)) - (z * dz_self).T @ u
        du = dz_tools @ mb - (z * dz_self) @ b
        da = du.T @ queries_
        for k, (param, grad) in enumerate(((a, da), (b, db))):
            grad = grad + 2 * settings.penalty * param
            m, v = state[k]
            m *= 0.9
            m += 0.1 * grad
            v *= 0.999
            v += 0.001 * grad ** 2
            param -= settings.rate * (m / (1 - 0.9 ** step)) / (
                np.sqrt(v / (1 - 0.999 ** step)) + 1e-8)
    return a, b


def adapted(vector: Any, a: Any, b: Any) -> Any:
    """The query's unit vector moved by the adapter (A, B), at unit length, float32."""
    import numpy as np

    z = vector.astype(np.float64) + b @ (a @ vector.astype(np.float64))
    return (z / max(float(np.linalg.norm(z)), 1e-12)).astype(np.float32)


def server_splits(servers: Sequence[str], groups: int) -> list[tuple[str, tuple[Held, Held]]]:
    """One (name, (outside, inside)) per group of ``servers`` (round-robin in their
    order): ``outside(labels)`` when no labelled tool ("server/tool") is of the group
    (a query to fit on), ``inside(labels)`` when every one is (a query to judge)."""
    out: list[tuple[str, tuple[Held, Held]]] = []
    for g in range(groups):
        group = frozenset(servers[g::groups])

        def inside(labels: frozenset[str], group: frozenset[str] = group) -> bool:
            return bool(labels) and all(k.split("/")[0] in group for k in labels)

        def outside(labels: frozenset[str], group: frozenset[str] = group) -> bool:
            return not any(k.split("/")[0] in group for k in labels)

        out.append(("+".join(sorted(group)), (outside, inside)))
    return out
