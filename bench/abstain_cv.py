"""Abstention ("nothing fits") cross-validated over the seen query sets, and on smaller sets.

What is measured, and why
-------------------------
``search_tools`` answers "nothing fits" (gateway/search.py, gateway/abstain.py) when
the query's best cosine is under a threshold by its length, or when a check with no
threshold says the set cannot do it (a product it does not serve, an operation none
of the closest tools performs on what the query names). Every change of that
decision is judged here, on the seen sets only (bench/disclosure.py's ``SEEN`` and
its two old sets; never ``FROZEN_FILES``):

* **one seen set left out at a time**: the threshold's level is chosen on the other
  sets as the search's was chosen (the highest leaving ``CALIBRATED_WRONG`` of their
  answerable queries under it, by length), the checks added as they are; the set
  left out is counted: its share of unanswerable queries abstained on, and of
  answerable ones wrongly. Pooled over the left-out sets, and the worst set.
  The folds score the cosine's threshold with the checks: the learned model that
  stands in the threshold's place near it (gateway/abstain_model.py) is off there,
  and is scored by bench/abstain_learned.py; the smaller sets and the last line
  score the search as it ships, the model on.
* **the checks one by one** (``--ablate``): each of this module's ``CHECKS`` turned
  off in turn, so that what each adds is printed beside the whole.
* **smaller sets** (``--sizes``): every query against random subsets of the 551 tools
  (``--draws`` of each size; an answerable query's subset keeps its labelled tools),
  with the search's own constants: a rule whose evidence depends on the set's size
  would abstain wrongly much more often on a small set.

* **what is left** (``--misses``): each left-out set's unanswerable queries that do not
  abstain (with the closest three tools), and its answerable ones wrongly abstained
  on, with what fired (the threshold, or each check whose switch alone, turned off,
  undoes it; "together" when none alone does).
* **which ranking the checks read** (``--adapter-folds``): the adapted one or the
  model's own, each left-out set searched with an adapter fitted without it
  (bench/abstain_adapter.py).

    python bench/numpy_only.py bench/abstain_cv.py [--sizes 60 200] [--draws 3] [--ablate]
        [--misses] [--adapter-folds [--fit-only | --subsets-only]]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import pickle
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import disclosure

from skillop.gateway import search as search_module
from skillop.gateway.search import Document, SearchIndex

if TYPE_CHECKING:
    import numpy as np

    from skillop.gateway.embedding import Matrix

#: (set, kind, query, labels): labels empty for a query no tool answers.
Labelled = list[tuple[str, str, str, set[str]]]
#: Each check of the decision, as a switch the ablation turns off (the attribute of
#: gateway/abstain.py that says whether it runs; none in a build before that module,
#: so that this script scores an older build too).
try:
    from skillop.gateway import abstain as abstain_module
    CHECKS: tuple[str, ...] = abstain_module.SWITCHES
except ImportError:  # a build before gateway/abstain.py
    CHECKS = ()
try:
    from skillop.gateway import abstain_model as learned
except ImportError:  # a build before the learned model
    learned = None  # type: ignore[assignment]


def seen() -> Labelled:
    """Every seen query: the kinded sets (``SEEN``) and the two old ones."""
    out: Labelled = [(name, *q) for name, _ in disclosure.SEEN
                     for q in disclosure.kinded_queries(name)]
    out += [(name, "old", q, r) for name in disclosure.QUERY_FILES
            for q, r in disclosure.queries(name)]
    return out


def model_index(cache: Path, vectors_file: Path, texts: list[str], *, skill: str | None = None,
                ) -> tuple[list[Document], Matrix, Matrix, Callable[[str], Matrix]]:
    """The set's documents, their text and name vectors, and the queries' vectors
    (computed once and kept in ``vectors_file``: the model's pass is the slow part);
    with ``skill``, every tool's skill named so in place of its server's name."""
    from skillop.gateway.embedding import Unavailable, shared_encoder
    from skillop.gateway.vectors import SemanticRanker

    encoder = shared_encoder()
    if isinstance(encoder, Unavailable):
        raise SystemExit(f"no sentence model: {encoder.reason}")
    docs = [disclosure.document(short, stem, tool) for short, stem in disclosure.SERVERS.items()
            for tool in disclosure.load(stem)]
    if skill is not None:
        docs = [dataclasses.replace(doc, skill=skill) for doc in docs]
    index = SearchIndex(docs)
    ranker = SemanticRanker(cache, lambda _: None, loader=lambda: encoder)
    ranker.prepare(index)
    assert index._semantic is not None and index._names is not None
    known: dict[str, Matrix] = {}
    with contextlib.suppress(OSError, pickle.UnpicklingError, EOFError):
        known = pickle.loads(vectors_file.read_bytes())
        if not isinstance(known, dict):
            known = {}
    wanted = [t[:search_module.MAX_QUERY_CHARS] for t in texts]
    missing = [t for t in dict.fromkeys(wanted) if t not in known]
    for text in missing:
        known[text] = ranker.query_vector(text)
    if missing:
        vectors_file.write_bytes(pickle.dumps(known))
    return docs, index._semantic[0], index._names, known.__getitem__


def indexed(docs: list[Document], vectors: Matrix, names: Matrix,
            encode: Callable[[str], Matrix], numbers: list[int]) -> SearchIndex:
    """A hybrid index of the documents numbered ``numbers``."""
    index = SearchIndex([docs[n] for n in numbers])
    index.attach_vectors(vectors[numbers], encode, names=names[numbers])
    return index


@contextlib.contextmanager
def checks_only() -> Iterator[None]:
    """``find``'s ``weak`` is the checks' alone (the threshold's level set below any
    cosine), so that the level can be chosen apart on each fold."""
    saved = search_module.ABSTAIN_BELOW
    search_module.ABSTAIN_BELOW = -2.0
    with threshold():
        try:
            yield
        finally:
            search_module.ABSTAIN_BELOW = saved


@contextlib.contextmanager
def threshold() -> Iterator[None]:
    """The cosine's threshold in the learned model's place (gateway/abstain_model.py),
    when the build has one."""
    if learned is None:
        yield
        return
    saved = learned.LEARNED
    learned.LEARNED = False
    try:
        yield
    finally:
        learned.LEARNED = saved


def switched_off(name: str | None) -> contextlib.AbstractContextManager[None]:
    """The check ``name`` (one of ``CHECKS``) off, or nothing changed."""
    return disclosure.switched_off(*(() if name is None else (name,)))


def verdicts(index: SearchIndex, labelled: Labelled,
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per query: the best cosine less its threshold's lift for length, and whether
    the checks alone say nothing fits; answerable or not."""
    import numpy as np

    level, checked, answerable = [], [], []
    with checks_only():
        for _, _, query, relevant in labelled:
            found = index.find(query, limit=3)
            assert found.confidence is not None
            lift = search_module.abstain_below(query) - search_module.ABSTAIN_BELOW
            level.append(found.confidence - lift)
            checked.append(found.weak)
            answerable.append(bool(relevant))
    return np.array(level), np.array(checked), np.array(answerable)


def chosen_levels(level: np.ndarray, ok: np.ndarray, sets: np.ndarray) -> dict[str, float]:
    """Each seen set -> the threshold's level chosen on the other sets."""
    import numpy as np

    out = {}
    for name in dict.fromkeys(sets.tolist()):
        train = np.sort(level[(sets != name) & ok])
        out[name] = float(train[int(disclosure.CALIBRATED_WRONG * len(train))])
    return out


def left_out(level: np.ndarray, checked: np.ndarray, ok: np.ndarray,
             sets: np.ndarray) -> list[tuple[str, float, float, int, int]]:
    """One seen set left out at a time: (set, abstained, wrongly, unanswerable,
    answerable), the threshold's level chosen on the others."""
    out = []
    for name, chosen in chosen_levels(level, ok, sets).items():
        held = sets == name
        weak = (level[held] < chosen) | checked[held]
        none, some = weak[~ok[held]], weak[ok[held]]
        out.append((name, float(none.mean()) if len(none) else float("nan"),
                    float(some.mean()), len(none), len(some)))
    return out


def fired(index: SearchIndex, query: str) -> str:
    """Which checks make ``query`` abstain: each whose switch alone, turned off,
    undoes it, or "together" when none alone does."""
    with checks_only():
        alone = []
        for name in CHECKS:
            with switched_off(name):
                if not index.find(query, limit=3).weak:
                    alone.append(name)
    return ", ".join(alone) or "together"


def print_misses(index: SearchIndex, labelled: Labelled, level: np.ndarray,
                 checked: np.ndarray, ok: np.ndarray, sets: np.ndarray) -> None:
    """Each left-out set's unanswerable queries not abstained on (the closest three),
    and its answerable ones abstained on (what fired)."""
    chosen = chosen_levels(level, ok, sets)
    for n, (name, kind, query, _) in enumerate(labelled):
        under = bool(level[n] < chosen[name])
        if not ok[n] and not under and not checked[n]:
            top = [key for key, _ in index.find(query, limit=3).matches]
            print(f"  answered   {short(name)} {kind} | {query} | {' '.join(top)}")
        elif ok[n] and (under or checked[n]):
            why = "threshold" if under else fired(index, query)
            print(f"  abstained  {short(name)} {kind} | {query} | {why}")


def short(name: str) -> str:
    return name.removeprefix("queries-").removesuffix(".txt").removesuffix("-frozen")


def print_folds(label: str, rows: list[tuple[str, float, float, int, int]]) -> None:
    abstained = sum(a * n for _, a, _, n, _ in rows if n)
    none = sum(n for *_, n, _ in rows)
    wrong = sum(w * m for _, _, w, _, m in rows)
    some = sum(m for *_, m in rows)
    worst = max(rows, key=lambda row: row[2])
    print(f"{label}: abstained {abstained / none:.1%} of {none}, wrongly {wrong / some:.2%}"
          f" of {some}; worst set {short(worst[0])} {worst[2]:.1%}")
    print("  " + "; ".join(f"{short(n)} {'-' if not m else f'{a:.0%}'} / {w:.1%}"
                           for n, a, w, m, _ in rows))


def drawn(docs: list[Document], vectors: Matrix, names: Matrix,
          encode: Callable[[str], Matrix], labelled: Labelled, size: int, draws: int,
          ) -> Iterator[tuple[SearchIndex, str, frozenset[str]]]:
    """Each query of ``labelled`` with the index of its random subset of ``size`` tools,
    ``draws`` times (an answerable query's subset keeps its labelled tools; the same
    draws for every caller of a size)."""
    keys = {doc.key: n for n, doc in enumerate(docs)}
    rng = random.Random(size)
    for _ in range(draws):
        base = rng.sample(range(len(docs)), size)
        built: dict[frozenset[str], SearchIndex] = {}
        for _, _, query, relevant in labelled:
            labels = frozenset(relevant)
            index = built.get(labels)
            if index is None:
                numbers = sorted(set(base[:size - len(labels)]) | {keys[k] for k in labels})
                index = built[labels] = indexed(docs, vectors, names, encode, numbers)
            yield index, query, labels


def subsets(docs: list[Document], vectors: Matrix, names: Matrix,
            encode: Callable[[str], Matrix], labelled: Labelled, size: int, draws: int,
            ) -> tuple[float, float, float]:
    """Abstained, wrongly, and the checks' wrong share, with the search's constants,
    on ``draws`` random subsets of ``size`` tools (``drawn``)."""
    none_weak, some_weak, checks_weak = [], [], []
    for index, query, relevant in drawn(docs, vectors, names, encode, labelled, size, draws):
        found = index.find(query, limit=3)
        if relevant:
            some_weak.append(found.weak)
            with checks_only():
                checks_weak.append(index.find(query, limit=3).weak)
        else:
            none_weak.append(found.weak)
    return (sum(none_weak) / len(none_weak), sum(some_weak) / len(some_weak),
            sum(checks_weak) / len(checks_weak))


def vector_options(parser: argparse.ArgumentParser) -> None:
    """``--cache`` (the set's vectors) and ``--query-vectors`` (the seen queries'),
    where ``model_index`` keeps them between runs."""
    parser.add_argument("--cache", type=Path, default=Path("/tmp/skillop-bench-vectors"))
    parser.add_argument("--query-vectors", type=Path,
                        default=Path("/tmp/skillop-bench-query-vectors.pkl"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[60, 200])
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--ablate", action="store_true",
                        help="each check of abstain.SWITCHES turned off in turn")
    parser.add_argument("--misses", action="store_true",
                        help="list the left-out queries abstention gets wrong")
    parser.add_argument("--adapter-folds", action="store_true",
                        help="the checks on the adapted ranking or the raw one, each set's"
                        " queries with an adapter fitted without it (bench/abstain_adapter.py)")
    parser.add_argument("--adapter-folds-kept", type=Path,
                        default=Path("/tmp/skillop-bench-adapter-folds"),
                        help="where --adapter-folds keeps each fold's adapter")
    parser.add_argument("--fit-only", action="store_true",
                        help="--adapter-folds: fit and keep the folds' adapters only, the"
                        " last first (a second process's share)")
    parser.add_argument("--adapter-groups", type=int, default=18,
                        help="--adapter-folds: the seen sets dealt into this many groups,"
                        " each group's adapter fitted without it (18: each set alone)")
    parser.add_argument("--subsets-only", action="store_true",
                        help="--adapter-folds: the --sizes subsets only, not the whole set")
    vector_options(parser)
    args = parser.parse_args()
    import numpy as np

    labelled = seen()
    docs, vectors, names, encode = model_index(args.cache, args.query_vectors,
                                               [q for _, _, q, _ in labelled])
    print(f"set: {len(docs)} tools; {len(labelled)} seen queries,"
          f" {sum(1 for *_, r in labelled if not r)} unanswerable; threshold chosen at"
          f" <= {disclosure.CALIBRATED_WRONG:.0%} wrong on the sets not left out")
    if args.adapter_folds:
        import abstain_adapter

        abstain_adapter.compare(docs, vectors, names, encode, labelled, args.sizes,
                                args.draws, args.adapter_folds_kept, groups=args.adapter_groups,
                                fit_only=args.fit_only,
                                full=not args.subsets_only)
        return 0
    index = indexed(docs, vectors, names, encode, list(range(len(docs))))
    sets = np.array([name for name, *_ in labelled])
    level, checked, ok = verdicts(index, labelled)
    print_folds("one set left out, everything", left_out(level, checked, ok, sets))
    print(f"  the checks alone: abstained {checked[~ok].mean():.1%}, wrongly"
          f" {checked[ok].mean():.2%}")
    if args.misses:
        print_misses(index, labelled, level, checked, ok, sets)
    for name in CHECKS if args.ablate else ():
        with switched_off(name):
            level, checked, ok = verdicts(index, labelled)
        print_folds(f"one set left out, without {name}", left_out(level, checked, ok, sets))
    for size in args.sizes:
        none, some, checks = subsets(docs, vectors, names, encode, labelled, size, args.draws)
        print(f"random subsets of {size} tools ({args.draws} draws, the search's constants):"
              f" abstained {none:.1%} of unanswerable, wrongly {some:.2%} of answerable"
              f" (the checks alone {checks:.2%})")
    full_weak = [index.find(q, limit=3).weak for _, _, q, _ in labelled]
    flags = np.array(full_weak)
    print(f"all {len(docs)} tools, the search's constants: abstained {flags[~ok].mean():.1%},"
          f" wrongly {flags[ok].mean():.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
