"""The trees of gateway/ranker.py, fitted by gradient boosting on a LambdaRank gradient.

Each query's candidates start from the linear score (gateway/fusion.py's fitted
weights); each tree is fitted to the gradient and curvature of a pairwise loss
(every relevant candidate against every other, each pair weighted by how much
swapping the two changes the query's NDCG), a Newton step per leaf, shrunk by
``RATE``. The trees are oblivious (one split per level, chosen over every feature's
quantile thresholds by the summed gain of all the level's nodes) and of one depth;
a leaf with fewer than ``MIN_LEAF`` candidates is worth 0. Used by
bench/disclosure_cv.py (``--trees``), which judges them by leaving one seen set out.
Pure numpy, deterministic: the same rows give the same trees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skillop.gateway.fusion import FEATURES
from skillop.gateway.ranker import Forest

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Array = npt.NDArray[np.float64]

#: Shrinkage, leaves' L2 penalty, least candidates in a leaf that counts, thresholds
#: per feature (chosen by the folds of bench/disclosure_cv.py).
RATE, PENALTY, MIN_LEAF, BINS = 0.1, 1.0, 50, 32
#: The threshold of a level that splits nothing (no finite value is above it).
NEVER = 3.0e38


def thresholds(flat: Array) -> list[Array]:
    """Each feature's split points: midpoints of its values when few, else quantiles."""
    import numpy as np

    out = []
    for column in flat.T.astype(np.float32):
        values = np.unique(column)
        if len(values) <= BINS:
            points = (values[:-1] + values[1:]) / 2
        else:
            points = np.unique(np.quantile(column, np.linspace(0, 1, BINS + 1)[1:-1]))
        out.append(points.astype(np.float32))
    return out


def lambdas(score: Array, positive: Array) -> tuple[Array, Array]:
    """The pairwise loss's gradient and curvature per candidate (query x candidate)."""
    import numpy as np

    order = np.argsort(-score, axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(score.shape[1]), score.shape),
                      axis=1)
    discount = 1 / np.log2(rank + 2.0)
    ideal = np.cumsum(1 / np.log2(np.arange(score.shape[1]) + 2.0))
    gain = positive / ideal[np.maximum(positive.sum(axis=1).astype(int) - 1, 0)][:, None]
    delta = (np.abs(gain[:, :, None] - gain[:, None, :])
             * np.abs(discount[:, :, None] - discount[:, None, :]))
    pairs = positive[:, :, None] > positive[:, None, :]
    rho = 1 / (1 + np.exp(np.clip(score[:, :, None] - score[:, None, :], -50, 50)))
    push = pairs * delta * rho
    curve = pairs * delta * rho * (1 - rho)
    return push.sum(axis=1) - push.sum(axis=2), curve.sum(axis=2) + curve.sum(axis=1)


def tree(binned: npt.NDArray[np.intp], points: list[Array], gradient: Array,
         curvature: Array, depth: int) -> tuple[list[tuple[int, int]], Array]:
    """One oblivious tree: its (feature, threshold number) per level and leaves."""
    import numpy as np

    count, width = binned.shape
    k = max(len(p) for p in points) + 1
    valid = np.zeros((width, k - 1), dtype=bool)
    for column, p in enumerate(points):
        valid[column, :len(p)] = True
    leaf = np.zeros(count, dtype=np.intp)
    offsets = np.arange(width) * k + binned
    g, h = np.repeat(gradient, width), np.repeat(curvature, width)
    splits: list[tuple[int, int]] = []
    for level in range(depth):
        size = (1 << level) * width * k
        index = (leaf[:, None] * (width * k) + offsets).ravel()
        sums = [np.bincount(index, w, size).reshape(-1, width, k).cumsum(axis=2)
                for w in (g, h, None)]
        left = [s[:, :, :-1] for s in sums]
        total = [s[:, :, -1:] for s in sums]
        right = [t - s for t, s in zip(total, left, strict=True)]
        ok = ((left[2] >= MIN_LEAF) | (left[2] == 0)) & ((right[2] >= MIN_LEAF) | (right[2] == 0))
        gain = np.where(ok, left[0] ** 2 / (left[1] + PENALTY) + right[0] ** 2 / (
            right[1] + PENALTY) - total[0] ** 2 / (total[1] + PENALTY), -np.inf).sum(axis=0)
        gain[~valid] = -np.inf
        column, point = np.unravel_index(int(np.argmax(gain)), gain.shape)
        if not gain[column, point] > 0:
            splits.append((-1, 0))  # no gain: a level every row answers 0
            leaf = leaf * 2
            continue
        splits.append((int(column), int(point)))
        leaf = leaf * 2 + (binned[:, column] > point)
    leaves = 1 << depth
    g_sum = np.bincount(leaf, gradient, leaves)
    h_sum = np.bincount(leaf, curvature, leaves)
    counted = np.bincount(leaf, None, leaves)
    return splits, np.where(counted >= MIN_LEAF, -RATE * g_sum / (h_sum + PENALTY), 0.0)


def boosted(rows: Array, positive: Array, base: Array, *, trees: int,
            depth: int) -> Forest:
    """``trees`` trees of ``depth`` on top of ``base`` (queries x candidates), for the
    candidates' ``rows`` (queries x candidates x features) of which ``positive`` are
    relevant (queries with none left out)."""
    import numpy as np

    used = positive.any(axis=1)
    rows, positive, score = rows[used], positive[used].astype(np.float64), base[used].copy()
    flat = rows.reshape(-1, rows.shape[2]).astype(np.float32)
    points = thresholds(flat)
    binned = np.stack([np.searchsorted(p, flat[:, c], side="left")
                       for c, p in enumerate(points)], axis=1)
    splits: list[tuple[tuple[str, float], ...]] = []
    leaves: list[tuple[float, ...]] = []
    for _ in range(trees):
        gradient, curvature = lambdas(score, positive)
        chosen, values = tree(binned, points, gradient.ravel(), curvature.ravel(), depth)
        splits.append(tuple((FEATURES[c], float(points[c][p])) if c >= 0 else
                            (FEATURES[0], NEVER) for c, p in chosen))
        leaves.append(tuple(round(float(v), 6) for v in values))  # as the file keeps them
        score += Forest((splits[-1],), (leaves[-1],)).score(flat).reshape(score.shape)
    return Forest(tuple(splits), tuple(leaves))
