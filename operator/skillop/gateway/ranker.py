"""The fused order's non-linear part: boosted regression trees added to the linear score.

The linear score (gateway/fusion.py) weighs each feature of a candidate alone; it
cannot say "the query names this tool's service *and* its verb agrees", or "the
cosine's gap counts only when BM25 finds little". A few shallow trees can: each
splits on a feature's value at every level (the same split across a level, an
"oblivious" tree, so a candidate's leaf is the bits of its answers) and adds the
leaf's value to the candidate's score. They are fitted after the linear weights, on
what those still order wrong, by bench/disclosure_cv.py (gradient boosting on a
LambdaRank gradient), which writes them into ``fusion_trees``; with none written the
order is the linear score's. The trees read the features by name, so a feature
missing from ``fusion.FEATURES`` reads 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from skillop.gateway.fusion import FEATURES, scored
from skillop.gateway.fusion_trees import LEAVES, SPLITS

if TYPE_CHECKING:
    from skillop.gateway.embedding import Matrix

#: One tree: its split at each level (feature, threshold: a row goes right, bit 1,
#: when its value is above the threshold), then its ``2 ** depth`` leaves' values.
Splits = tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Forest:
    """Trees of one depth, scored together over a matrix of ``fusion.features`` rows."""

    splits: tuple[Splits, ...] = ()
    leaves: tuple[tuple[float, ...], ...] = ()
    _arrays: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def score(self, rows: Matrix) -> Matrix:
        """Each row's sum over the trees of the leaf it falls in (0 without trees)."""
        import numpy as np

        if not self.splits:
            return np.zeros(len(rows), dtype=np.float32)
        columns, thresholds, powers, leaves = self._tables()
        padded = np.concatenate([rows, np.zeros((len(rows), 1), dtype=rows.dtype)], axis=1)
        bits = padded[:, columns] > thresholds  # rows x trees x depth
        index = (bits * powers).sum(axis=2)  # rows x trees
        result: Matrix = leaves[np.arange(len(self.splits)), index].sum(axis=1)
        return result

    def _tables(self) -> tuple[Any, Any, Any, Any]:
        """The splits and leaves as arrays, made once: a feature the rows lack reads
        the appended zero column."""
        import numpy as np

        if not self._arrays:
            missing = len(FEATURES)
            at = {name: column for column, name in enumerate(FEATURES)}
            depth = len(self.splits[0])
            self._arrays.update(
                columns=np.asarray([[at.get(name, missing) for name, _ in tree]
                                    for tree in self.splits], dtype=np.intp),
                thresholds=np.asarray([[t for _, t in tree] for tree in self.splits],
                                      dtype=np.float32),
                powers=(1 << np.arange(depth - 1, -1, -1)).astype(np.intp),
                leaves=np.asarray(self.leaves, dtype=np.float32))
        a = self._arrays
        return a["columns"], a["thresholds"], a["powers"], a["leaves"]


#: The fitted trees (``fusion_trees``).
FOREST = Forest(SPLITS, LEAVES)


def ranked_scores(rows: Matrix, *, weights: Mapping[str, float] | None = None,
                  forest: Forest | None = None) -> Matrix:
    """Each candidate's fused score: the linear one plus the trees' (by default the
    fitted weights and trees)."""
    result: Matrix = scored(rows, weights) + (FOREST if forest is None else forest).score(rows)
    return result


def reordered(candidates: Sequence[int], rows: Matrix, *,
              weights: Mapping[str, float] | None = None,
              forest: Forest | None = None) -> list[int]:
    """``candidates`` (best first by the blend) by their fused score, best first; ties
    keep the blend's order."""
    score = ranked_scores(rows, weights=weights, forest=forest).tolist()
    order = sorted(range(len(candidates)), key=lambda i: (-score[i], i))
    return [candidates[i] for i in order]
