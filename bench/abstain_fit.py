"""The fitting half of bench/abstain_learned.py: the feature columns, the logistic
regression, its operating point, and the decisions per fold (one seen set left out).

Rows come in pools, one per set size (all 551 tools, and random subsets of fewer,
bench/abstain_cv.py's ``drawn``) and per naming of the skills (the servers' own names,
or one neutral name for every tool); a fold leaves one seen set out of every pool.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import abstain_cv

from skillop.gateway import abstain_model
from skillop.gateway import search as search_module

if TYPE_CHECKING:
    import numpy as np

#: The per-query evidence, in column order: gateway/abstain_model.py's (the blend of
#: the model's own query vector and its best tool's word evidence, nothing fitted on
#: the seen sets), each check as 0/1, then features read from the learned ranking (the
#: adapter, the fused order), fitted on the very sets a fold leaves out: scored apart
#: (``--learned-ranking``), an upper bound, never adopted.
RULES = ("elsewhere", "operation", "object", "service_operation", "service_object")
PLAIN = (*abstain_model.FEATURES, *RULES)
LEARNED = (
    "ranked", "adapted_blend", "adapted_blend_gap2", "adapted_blend_gap5", "fused",
    "fused_gap2", "fused_gap5", "top_bm25_share", "top_idf_cover", "top_cover",
    "top_name_covered", "top_verb_agrees", "top_verb_differs", "top_object_agrees",
    "top_object_differs",
)
FEATURES = PLAIN + LEARNED
#: The size of the full set (every recorded tool).
FULL = 551

#: The model decides only where the best cosine is within this of the length's
#: threshold (``--band``; None: everywhere); under it, the query abstains, over it,
#: it is answered, as the threshold decided.
BAND: float | None = None
#: The band's lower half (``--band-under``; None: as ``BAND``).
BAND_UNDER: float | None = None


def columns(names: tuple[str, ...]) -> list[int]:
    return [FEATURES.index(name) for name in names]


@dataclass(frozen=True)
class Pool:
    """The rows of one set size and naming: features, answerable, the seen set of each
    row, and the search's constants' ``weak`` (the threshold in the model's place)."""

    size: int
    x: Any
    ok: Any
    sets: Any
    today: Any
    #: How much each row counts in a fit (a size's draws together count as one copy
    #: of the seen queries; each naming, when both are fitted on, as half).
    weight: float = 1.0


class Logistic:
    """L2-regularised logistic regression on standardised features (Newton steps),
    each row counting ``weight``."""

    def __init__(self, x: np.ndarray, y: np.ndarray, *, l2: float = 1.0,
                 weight: np.ndarray | None = None) -> None:
        import numpy as np

        s = np.ones(len(x)) if weight is None else weight
        self.mean = x.mean(axis=0)
        self.scale = np.where(x.std(axis=0) > 1e-9, x.std(axis=0), 1.0)
        z = self._design(x)
        w = np.zeros(z.shape[1])
        penalty = np.full(z.shape[1], l2)
        penalty[0] = 0.0
        for _ in range(50):
            p = 1 / (1 + np.exp(-(z @ w)))
            grad = z.T @ (s * (p - y)) + penalty * w
            hess = ((z * (s * p * (1 - p))[:, None]).T @ z + np.diag(penalty)
                    + 1e-9 * np.eye(len(w)))
            step = np.linalg.solve(hess, grad)
            w -= step
            if float(np.abs(step).max()) < 1e-8:
                break
        self.w = w

    def _design(self, x: np.ndarray) -> np.ndarray:
        import numpy as np

        return np.hstack([np.ones((len(x), 1)), (x - self.mean) / self.scale])

    def score(self, x: np.ndarray) -> np.ndarray:
        """The log-odds that nothing fits."""
        result: np.ndarray = self._design(x) @ self.w
        return result


def point(score: np.ndarray, already: np.ndarray, ok: np.ndarray, target: float) -> float:
    """The lowest score above which abstaining (with ``already``'s, the checks') leaves
    at most ``target`` of the answerable (``ok``) wrongly abstained on."""
    import numpy as np

    budget = int(target * ok.sum()) - int((already & ok).sum())
    free = np.sort(score[ok & ~already])[::-1]
    if budget <= 0:
        return float(free[0]) + 1e-9
    return float(free[min(budget, len(free)) - 1]) + 1e-9 if budget < len(free) else -np.inf


def banded(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whether each row's best cosine is under the band, and whether within it."""
    import numpy as np

    margin = x[:, FEATURES.index("margin")]
    if BAND is None:
        return np.zeros(len(x), dtype=bool), np.ones(len(x), dtype=bool)
    under = BAND if BAND_UNDER is None else BAND_UNDER
    return margin < -under, (margin >= -under) & (margin <= BAND)


def ruled(x: np.ndarray) -> np.ndarray:
    """Whether a check fires on each row."""
    result: np.ndarray = x[:, columns(RULES)].max(axis=1) > 0
    return result


def _kept(width: int) -> list[int]:
    return [n for n, name in enumerate(FEATURES[:width]) if name not in RULES]


@dataclass(frozen=True)
class Fitted:
    """Checks OR model: the model fitted on the rows no check fires on within the band,
    and its operating point (``cut``, less ``slope`` times the log of the set's size
    when the point depends on the size)."""

    model: Logistic
    cut: float
    slope: float = 0.0

    def weak(self, x: np.ndarray) -> np.ndarray:
        below, inside = banded(x)
        score = self.model.score(x[:, _kept(x.shape[1])])
        cut = self.cut + self.slope * x[:, FEATURES.index("tools")]
        result: np.ndarray = ruled(x) | below | (inside & (score > cut))
        return result


def fit(pools: list[Pool], *, target: float, l2: float, sized: bool = False) -> Fitted:
    """Checks OR model fitted on ``pools``; its point leaves ``target`` of the full
    set's answerable rows wrongly abstained on, or (``sized``) of each size's, the
    points then a line in the log of the size."""
    import numpy as np

    x = np.vstack([p.x for p in pools])
    y = (~np.concatenate([p.ok for p in pools])).astype(float)
    weight = np.concatenate([np.full(len(p.x), p.weight) for p in pools])
    fitted = ~ruled(x) & banded(x)[1]
    keep = _kept(x.shape[1])
    model = Logistic(x[fitted][:, keep], y[fitted], l2=l2,
                     weight=None if (weight == 1.0).all() else weight[fitted])
    cuts: dict[int, float] = {}
    for size in sorted({p.size for p in pools}):
        if size != FULL and not sized:
            continue
        xs = np.vstack([p.x for p in pools if p.size == size])
        oks = np.concatenate([p.ok for p in pools if p.size == size])
        below, inside = banded(xs)
        inside &= ~ruled(xs)
        scores = np.full(len(xs), -np.inf)
        scores[inside] = model.score(xs[inside][:, keep])
        cuts[size] = point(scores, ruled(xs) | below, oks, target)
    if len(cuts) < 2:
        return Fitted(model, cuts[FULL])
    logs = np.log(np.array(list(cuts), dtype=float))
    slope, intercept = np.polyfit(logs, np.array(list(cuts.values())), 1)
    return Fitted(model, float(intercept), float(slope))


def fold_decisions(pools: list[Pool], tested: list[Pool], *, target: float, l2: float,
                   sized: bool = False) -> list[np.ndarray]:
    """Each of ``tested``'s ``weak``, every seen set decided by a model fitted on
    ``pools`` without it."""
    import numpy as np

    out = [np.zeros(len(t.x), dtype=bool) for t in tested]
    for name in dict.fromkeys(tested[0].sets.tolist()):
        train = [Pool(p.size, p.x[p.sets != name], p.ok[p.sets != name],
                      p.sets[p.sets != name], p.today, p.weight) for p in pools]
        model = fit(train, target=target, l2=l2, sized=sized)
        for weak, t in zip(out, tested, strict=True):
            held = t.sets == name
            weak[held] = model.weak(t.x[held])
    return out


def alone(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, *,
          target: float, l2: float) -> np.ndarray:
    """The model alone (the checks are features), fitted and pointed on the training."""
    import numpy as np

    model = Logistic(x_train, y_train, l2=l2)
    cut = point(model.score(x_train), np.zeros(len(x_train), dtype=bool), y_train == 0,
                target)
    result: np.ndarray = model.score(x_test) > cut
    return result


def today_folds(x: np.ndarray, ok: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """Today's decision per left-out set: its threshold's level chosen on the others
    (as bench/abstain_cv.py does), the checks as they are."""
    import numpy as np

    level = x[:, FEATURES.index("margin")] + search_module.ABSTAIN_BELOW
    weak = np.zeros(len(x), dtype=bool)
    for name, chosen in abstain_cv.chosen_levels(level, ok, sets).items():
        held = sets == name
        weak[held] = (level[held] < chosen) | ruled(x[held])
    return weak


def rows_of(weak: np.ndarray, ok: np.ndarray, sets: np.ndarray,
            ) -> list[tuple[str, float, float, int, int]]:
    out = []
    for name in dict.fromkeys(sets.tolist()):
        held = sets == name
        none, some = weak[held & ~ok], weak[held & ok]
        out.append((name, float(none.mean()) if len(none) else float("nan"),
                    float(some.mean()), len(none), len(some)))
    return out


def dropped(x: np.ndarray, names: str) -> np.ndarray:
    """``x`` with the columns of ``names`` (comma-separated) zeroed: a constant column
    weighs nothing in the fit, and the rules' columns keep their places."""
    x = x.copy()
    for name in filter(None, names.split(",")):
        x[:, FEATURES.index(name)] = 0.0
    return x


def share(weak: np.ndarray, ok: np.ndarray) -> str:
    return f"abstained {weak[~ok].mean():.1%} of {(~ok).sum()}, wrongly {weak[ok].mean():.2%}"


def worst(weak: np.ndarray, ok: np.ndarray, sets: np.ndarray) -> str:
    """The seen set abstaining wrongly the most, and how much."""
    rows = [r for r in rows_of(weak, ok, sets) if not math.isnan(r[2])]
    name, _, wrong, *_ = max(rows, key=lambda r: r[2])
    return f"worst {wrong:.1%} ({abstain_cv.short(name)})"
