"""A learned abstention ("nothing fits") against today's threshold and checks.

What is measured, and why
-------------------------
``search_tools`` answers "nothing fits" (gateway/search.py) when the query's best raw
cosine is under a threshold by its length, or when a check with no threshold fires
(gateway/abstain.py, gateway/products.py). This script asks whether a small logistic
model over evidence the search already computes per query decides better:

* the features (``FEATURES``), each meaning the same in a set of 10 tools as in 5,000
  as far as the search's own scores do: the best raw cosine and its margin over the
  length's threshold, its gaps to the 2nd and 5th cosine, the blend's best score and
  its gaps, the fused (linear + trees) best score and its gap to the 2nd, the fused
  best's word-match evidence (BM25 share, idf cover, whether it performs the asked
  verb or names what is acted on), the squashed best BM25, the query's length, whether
  it asks an operation, names a product or a skill, the log of the set's size (its
  visible tools), and each check as 0/1 (a product served elsewhere, the operation,
  the unnamed object, the named service's operation and object). No tool name, no
  query word.
* **one seen set left out at a time** (a fold each of bench/disclosure.py's ``SEEN`` and
  its two old sets; never ``FROZEN_FILES``), out of every pool of rows at once: the
  model is fitted on the other sets (L2-regularised logistic regression, numpy,
  standardised features), its operating point chosen on them so that their answerable
  queries are wrongly abstained on at ``--target``; the set left out is counted:
  abstained share of its unanswerable queries, wrong share of its answerable ones.
  Pooled and per set, beside today's decision (its threshold level chosen per fold
  as bench/abstain_cv.py chooses it).
* two learned decisions: the model alone (the checks are features), and the checks
  kept with the model in the cosine threshold's place ("checks OR model": fitted on
  the queries no check fires on, its point chosen for the combined decision).
* **set sizes**: every seen query is also searched in random subsets of the 551 tools
  (bench/abstain_cv.py's ``drawn``: an answerable query's subset keeps its labels),
  ``--sizes`` judged and ``--fit-sizes`` fitted on beside all the tools (a size's
  draws together count as one copy of the queries); with ``--sized-point`` the point
  is chosen at each fitted size and drawn as a line in the log of the size. Each size
  is judged left out, for the model fitted as shipped before (all the tools' rows,
  one point) and as configured.
* **skill names** (``--neutral NAME``): the same rows with every tool's skill named
  NAME (a user names a Skill as they like, and the name is in the embedded text);
  judged as a second condition, and with ``--mix`` fitted on too, each naming
  counting half, so that the model does not lean on the servers' names.

    PYTHONHASHSEED=0 python bench/numpy_only.py bench/abstain_learned.py
        [--sizes 15 60 200] [--fit-sizes 15 60 200] [--[no-]sized-point]
        [--neutral tools] [--[no-]mix] [--draws 3] [--target 0.025] [--write]
        [--cache DIR] [--query-vectors FILE] [--features FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import abstain_cv
import abstain_fit
from abstain_fit import (
    FEATURES,
    FULL,
    PLAIN,
    Pool,
    alone,
    banded,
    dropped,
    fit,
    fold_decisions,
    rows_of,
    ruled,
    share,
    today_folds,
    worst,
)

from skillop.gateway import abstain as abstain_module
from skillop.gateway import abstain_model
from skillop.gateway import search as search_module
from skillop.gateway.actions import named
from skillop.gateway.fusion import CANDIDATES, features
from skillop.gateway.fusion import FEATURES as FUSED
from skillop.gateway.ranker import ranked_scores
from skillop.gateway.search import SearchIndex, query_terms

if TYPE_CHECKING:
    import numpy as np

_WORD_EVIDENCE = ("bm25_share", "idf_cover", "cover", "name_covered", "verb_agrees",
                  "verb_differs", "object_agrees", "object_differs")
_CHECKS = ("OPERATION", "UNNAMED_OBJECT", "SERVICE_OPERATION", "SERVICE_OBJECT")
_AT = {name: n for n, name in enumerate(FUSED)}


@contextlib.contextmanager
def only(check: str | None) -> Iterator[None]:
    """gateway/abstain.py's checks all off but ``check``; the operation no close tool
    says (``UNSAID_OPERATION``, where the build has it) counts as the operation's."""
    names = [*_CHECKS, *(["UNSAID_OPERATION"] if hasattr(abstain_module, "UNSAID_OPERATION")
                         else [])]
    saved = {name: getattr(abstain_module, name) for name in names}
    try:
        for name in names:
            setattr(abstain_module, name, name == check or (
                name == "UNSAID_OPERATION" and check == "OPERATION"))
        yield
    finally:
        for name, value in saved.items():
            setattr(abstain_module, name, value)


def _ordered(blended: Any, count: int) -> list[int]:
    import numpy as np

    top = np.argpartition(-blended, count - 1)[:count]
    result: list[int] = top[np.lexsort((top, -blended[top]))].tolist()
    return result


def evidence(index: SearchIndex, query: str) -> list[float]:
    """One row of ``FEATURES`` for ``query`` over ``index`` (hybrid, nothing hidden)."""
    import numpy as np

    weighted = query_terms(query)
    count = min(max(abstain_module.ACTION_CANDIDATES, CANDIDATES), len(index))
    skills = named(query, index._skills)
    ev, cosines = index._evidence(query, weighted)
    model = abstain_model.row(query, cosines, ev.plain or ev,
                              below=search_module.abstain_below(query), weighted=weighted,
                              idf=index._tables().idf, tools=index.documents,
                              words=index._words, skills=skills)
    closest = _ordered(ev.blended, count)
    rows = features(query, weighted, index._tables().idf, ev, closest[:CANDIDATES],
                    index.documents, index._words, skills)
    fused = ranked_scores(rows)
    lead = rows[int(np.argmax(fused))]
    flags = [float(index.elsewhere(query))]
    for check in _CHECKS:
        with only(check):
            flags.append(float(index._unable(query, closest[:abstain_module.ACTION_CANDIDATES],
                                             ev.blended, [])))
    return [*model, *flags, float(ev.ranked.max()), *_gaps(ev.blended[closest]),
            *_gaps(np.sort(fused)[::-1]), *(float(lead[_AT[name]]) for name in _WORD_EVIDENCE)]


def _gaps(values: Any) -> list[float]:
    """The best of ``values`` (best first) and its leads over the 2nd and 5th."""
    def at(k: int) -> float:
        return float(values[min(k, len(values) - 1)])
    return [at(0), at(0) - at(1), at(0) - at(4)]


def table(index: SearchIndex, queries: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Every query's ``FEATURES`` row, and ``weak`` with the cosine's threshold (the
    search's constants) in the model's place."""
    import numpy as np

    rows = np.array([evidence(index, q) for q in queries])
    with abstain_cv.threshold():
        today = np.array([index.find(q, limit=3).weak for q in queries])
    return rows, today


def subset_tables(docs: Any, vectors: Any, names: Any, encode: Any, labelled: Any,
                  size: int, draws: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows, today's ``weak`` and answerable, over ``draws`` random subsets of ``size``
    tools (drawn as bench/abstain_cv.py draws them)."""
    import numpy as np

    rows, today, ok = [], [], []
    for index, query, relevant in abstain_cv.drawn(docs, vectors, names, encode, labelled,
                                                   size, draws):
        rows.append(evidence(index, query))
        with abstain_cv.threshold():
            today.append(index.find(query, limit=3).weak)
        ok.append(bool(relevant))
    return np.array(rows), np.array(today), np.array(ok)


def rows(args: argparse.Namespace, labelled: Any, sizes: list[int], *,
         skill: str | None) -> dict[str, Any]:
    """The rows of every seen query over all the tools and over ``sizes``' subsets, the
    skills named ``skill`` (None: their servers' names); kept in ``--features``."""
    file = args.features
    if file is not None and skill is not None:
        file = file.with_name(f"{file.stem}-{skill}{file.suffix}")
    kept: dict[str, Any] = {}
    if file is not None and file.exists():
        kept = pickle.loads(file.read_bytes())
    if "full" not in kept or any(f"size{s}" not in kept for s in sizes):
        docs, vectors, names, encode = abstain_cv.model_index(
            args.cache, args.query_vectors, [q for _, _, q, _ in labelled], skill=skill)
        index = abstain_cv.indexed(docs, vectors, names, encode, list(range(len(docs))))
        for key in ("full", *(f"size{size}" for size in sizes)):
            if key in kept:
                continue
            kept[key] = (table(index, [q for _, _, q, _ in labelled]) if key == "full" else
                         subset_tables(docs, vectors, names, encode, labelled,
                                       int(key.removeprefix("size")), args.draws))
            if file is not None:
                file.write_bytes(pickle.dumps(kept))
    return kept


def pools(kept: dict[str, Any], sizes: list[int], ok: Any, sets: Any, *, width: int,
          drop: str, draws: int, weight: float = 1.0) -> dict[int, Pool]:
    """One pool per size (``FULL`` first) from ``rows``' tables."""
    import numpy as np

    x, today = kept["full"]
    out = {FULL: Pool(FULL, dropped(x[:, :width], drop), ok, sets, today, weight)}
    for size in sizes:
        xs, today_s, ok_s = kept[f"size{size}"]
        out[size] = Pool(size, dropped(xs[:, :width], drop), ok_s, np.tile(sets, draws),
                         today_s, weight / draws)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[15, 60, 200],
                        help="the subset sizes judged (one seen set left out of each)")
    parser.add_argument("--fit-sizes", type=int, nargs="*", default=[15, 60, 200],
                        help="the subset sizes whose rows the model is fitted on, beside"
                             " all the tools' (none: all the tools' only)")
    parser.add_argument("--sized-point", action=argparse.BooleanOptionalAction, default=True,
                        help="the operating point chosen per fitted size, a line in the"
                             " log of the size (else: on all the tools' rows)")
    parser.add_argument("--neutral", default="",
                        help="also judge with every skill named so (empty: not)")
    parser.add_argument("--mix", action=argparse.BooleanOptionalAction, default=False,
                        help="fit on both namings of the skills, each counting half")
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--target", type=float, nargs="*", default=[],
                        help="the wrong shares to point at (default: today's pooled)")
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--learned-ranking", action="store_true",
                        help="also the features read from the adapter and the fused order"
                             " (fitted on the sets left out: an upper bound)")
    parser.add_argument("--write", action="store_true",
                        help="fit checks-or-model on every seen set at the first --target"
                             " and write gateway/abstain_weights.py")
    parser.add_argument("--band", type=float, default=abstain_model.BAND,
                        help="the model decides only within this of the cosine's threshold"
                             " (0: everywhere; default: gateway/abstain_model.py's)")
    parser.add_argument("--band-under", type=float, default=abstain_model.BAND_UNDER,
                        help="the band's lower half: how far under the threshold the model"
                             " decides (default: gateway/abstain_model.py's)")
    parser.add_argument("--drop", default="",
                        help="comma-separated features left out (their column zeroed)")
    abstain_cv.vector_options(parser)
    parser.add_argument("--features", type=Path, default=None,
                        help="keep the computed rows in this file (and read them back;"
                             " the neutral naming's beside it)")
    args = parser.parse_args()
    if args.write and os.environ.get("PYTHONHASHSEED") != "0":
        # A query's terms come from a set: their order, and with it BM25's last bits.
        raise SystemExit("--write: run with PYTHONHASHSEED=0, so the file reproduces")
    import numpy as np

    abstain_fit.BAND = args.band or None
    abstain_fit.BAND_UNDER = args.band_under if args.band else None
    labelled = abstain_cv.seen()
    sets = np.array([name for name, *_ in labelled])
    ok = np.array([bool(r) for *_, r in labelled])
    sizes = sorted(set(args.sizes) | set(args.fit_sizes))
    width = len(FEATURES) if args.learned_ranking else len(PLAIN)
    namings = {"own": rows(args, labelled, sizes, skill=None)}
    if args.neutral:
        namings[args.neutral] = rows(args, labelled, sizes, skill=args.neutral)
    judged = {name: pools(kept, sizes, ok, sets, width=width, drop=args.drop,
                          draws=args.draws) for name, kept in namings.items()}
    half = 0.5 if args.mix and len(namings) > 1 else 1.0
    fitted = [pool for name, kept in namings.items() if name == "own" or half < 1
              for size, pool in pools(kept, sizes, ok, sets, width=width, drop=args.drop,
                                      draws=args.draws, weight=half).items()
              if size == FULL or size in args.fit_sizes]
    x, today_const = namings["own"]["full"]
    x = dropped(x[:, :width], args.drop)
    print(f"{len(labelled)} seen queries, {(~ok).sum()} unanswerable, {width} features;"
          f" {len(set(sets.tolist()))} folds (one seen set left out); fitted on"
          f" {sorted({p.size for p in fitted})} tools, skills named"
          f" {'both ways' if half < 1 else 'by server'}, point"
          f" {'by size' if args.sized_point else 'at all the tools'}")
    print(f"today's constants, all 551 tools (not left out): {share(today_const, ok)}")
    today = today_folds(x, ok, sets)
    abstain_cv.print_folds("today (threshold per fold + checks)", rows_of(today, ok, sets))
    targets = args.target or [float(today[ok].mean())]
    for target in targets:
        print(f"operating point: {target:.2%} of the training folds' answerable wrongly;"
              f" l2 {args.l2}")
        compare(judged, fitted, today, target=target, l2=args.l2, sized=args.sized_point)
    if args.write:
        write(fitted, target=targets[0], l2=args.l2, sized=args.sized_point, mixed=half < 1)
    return 0


def compare(judged: dict[str, dict[int, Pool]], fitted: list[Pool], today: np.ndarray, *,
            target: float, l2: float, sized: bool) -> None:
    """The learned decisions' left-out figures at all the tools, per set, then by size
    and naming: the model fitted on all the tools' rows only (as shipped) and as
    configured."""
    import numpy as np

    full = judged["own"][FULL]
    ok, sets = full.ok, full.sets
    weak = np.zeros(len(full.x), dtype=bool)
    for name in dict.fromkeys(sets.tolist()):
        held = sets == name
        weak[held] = alone(full.x[~held], (~ok[~held]).astype(float), full.x[held],
                           target=target, l2=l2)
    abstain_cv.print_folds("learned, alone (all the tools)", rows_of(weak, ok, sets))
    shipped = [full]
    namings = [naming for naming, pools in judged.items() for _ in pools]
    tested = [pool for pools in judged.values() for pool in pools.values()]
    for label, train, by_size in (("as shipped", shipped, False), ("this fit", fitted, sized)):
        decided = fold_decisions(train, tested, target=target, l2=l2, sized=by_size)
        abstain_cv.print_folds(f"learned, checks-or-model, {label}",
                               rows_of(decided[0], ok, sets))
        ups, downs = (sum(1 for a, b in zip(rows_of(decided[0], ok, sets),
                                            rows_of(today, ok, sets), strict=True)
                          if a[3] and cmp(a[1], b[1])) for cmp in (float.__gt__, float.__lt__))
        print(f"  sets abstaining more than today's threshold: {ups}, less: {downs}")
        for naming, pool, weak_t in zip(namings, tested, decided, strict=True):
            print(f"  {label}, {pool.size} tools, skills {naming}: {share(weak_t, pool.ok)},"
                  f" {worst(weak_t, pool.ok, pool.sets)}; threshold {share(pool.today, pool.ok)}")


WEIGHTS_FILE = (Path(__file__).resolve().parent.parent / "operator" / "skillop" / "gateway"
                / "abstain_weights.py")
_HEAD = '''"""The weights of gateway/abstain_model.py's logistic score, one per feature, its
operating point folded into the bias (the model says nothing fits above 0).

Written by ``PYTHONHASHSEED=0 python bench/numpy_only.py bench/abstain_learned.py
--target {target} --write``, which fits them on the seen queries no check abstains on
whose best cosine is at most ``abstain_model.BAND`` over the length's threshold and
``BAND_UNDER`` under it, over all the recorded tools and random subsets of {sizes}
of them, the skills named by their servers{naming} ({rows} rows, {none} unanswerable); the
point leaves {target:.1%} of the answerable queries wrongly abstained on with the
checks{by_size}. Do not edit by hand.
"""

'''


def write(fitted: list[Pool], *, target: float, l2: float, sized: bool, mixed: bool,
          ) -> None:
    """Fit checks-or-model on every row and write ``WEIGHTS_FILE`` (raw units)."""
    import numpy as np

    model = fit(fitted, target=target, l2=l2, sized=sized)
    keep = [FEATURES.index(name) for name in abstain_model.FEATURES]
    weights = model.model.w[1:] / model.model.scale
    weights[abstain_model.FEATURES.index("tools")] -= model.slope
    bias = float(model.model.w[0] - (model.model.w[1:] * model.model.mean
                                     / model.model.scale).sum() - model.cut)
    x = np.vstack([p.x for p in fitted])
    inside = ~ruled(x) & banded(x)[1]
    none = int((~np.concatenate([p.ok for p in fitted]))[inside].sum())
    assert len(keep) == len(weights)
    body = "".join(f"    \"{name}\": {float(w):.9g},\n"
                   for name, w in zip(abstain_model.FEATURES, weights, strict=True))
    sizes = ", ".join(map(str, sorted({p.size for p in fitted} - {FULL}))) or "none"
    WEIGHTS_FILE.write_text(_HEAD.format(
        target=target, sizes=sizes, rows=int(inside.sum()), none=none,
        naming=" and by one neutral name" if mixed else "",
        by_size=", chosen at each size\n(a line in the log of the size)" if sized else "")
        + f"BIAS: float = {bias:.9g}\nWEIGHTS: dict[str, float] = {{\n{body}}}\n")
    print(f"wrote {WEIGHTS_FILE.name}: bias {bias:+.4f}, " + ", ".join(
        f"{name} {float(w):+.3f}" for name, w in zip(abstain_model.FEATURES, weights,
                                                      strict=True)))


if __name__ == "__main__":
    sys.exit(main())
