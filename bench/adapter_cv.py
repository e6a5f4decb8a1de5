"""Benchmark: a learned query adapter for the hybrid search's sentence vectors.

A user's request and a tool's description are written in different styles; the
adapter is a low-rank linear map applied to the query's vector only (no tool is
re-embedded): q' = normalize(q + B(Aq)), A: 384 -> r, B: r -> 384. It is fitted
in numpy on the seen query sets of bench/disclosure.py (never a frozen one) by a
softmax loss of each query's cosine (the one the blend ranks: the text's and the
name's, mixed as gateway/search.py mixes them) against every tool of the set, its
labelled tools positive, with an L2 penalty on A and B (towards the identity).

Every choice is judged two ways, over the whole set of 551 tools: the blend, and the
fused order (gateway/fusion.py's weights refitted in each fold on the training
queries' adapted cosines, and on their unadapted ones: the gateway's), without and
with the adapter:

* (a) one seen set left out at a time: adapter and fusion fitted on the others;
* (b) servers left out: the 25 servers in ``GROUPS`` groups; the adapter and the
  fusion fitted on the queries whose labelled tools all lie outside the held-out
  group (the adapter's softmax over those tools only), scored on those whose
  labelled tools all lie inside it. Only this shows whether the adapter learnt how
  requests are written rather than the bench's tools.

``--write``: fit on every seen set (every tool a candidate) and write
operator/skillop/gateway/adapter_weights.py (the gateway's fusion weights stay fitted
on the model's own cosines: bench/disclosure_cv.py).

    python bench/numpy_only.py bench/adapter_cv.py [--rank 32] [--penalty 0.01]
        [--temperature 20] [--steps 300] [--mode sets|servers|both] [--write] [--cache DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapter_fit import Settings, adapted, fit_adapter, server_splits
from disclosure import SERVERS
from disclosure_cv import (
    BLEND,
    Query,
    collected,
    fit,
    prepared_index,
    report,
    scored,
    seen_sets,
)

from skillop.gateway import fusion
from skillop.gateway.adapter import encoded
from skillop.gateway.search import NAME_WEIGHT, SearchIndex

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Array = npt.NDArray[np.float64]

WEIGHTS_FILE = (Path(__file__).resolve().parent.parent / "operator" / "skillop" / "gateway"
                / "adapter_weights.py")
#: How many groups the servers are split into for (b) (``server_splits``).
GROUPS = 5
Labelled = dict[str, list[tuple[str, str, set[str]]]]
Scores = dict[str, list[tuple[str, tuple[float, float, float]]]]


def training(index: SearchIndex, raw: Callable[[str], Any], labelled: Labelled,
             keys: Sequence[str]) -> tuple[Array, Array]:
    """The queries' raw vectors and their labelled tools, as arrays."""
    import numpy as np

    number = {key: n for n, key in enumerate(keys)}
    rows = [(raw(text), relevant) for part in labelled.values() for _, text, relevant in part]
    vectors = np.stack([v for v, _ in rows]).astype(np.float64)
    positive = np.zeros((len(rows), len(keys)))
    for i, (_, relevant) in enumerate(rows):
        positive[i, [number[k] for k in relevant]] = 1.0
    return vectors, positive


#: Which queries (by set and labelled tools) the adapter and fusion are fitted on, which
#: are judged, and which tools the adapter's fit sees (its softmax's candidates).
Split = tuple[Callable[[str, frozenset[str]], bool], Callable[[str, frozenset[str]], bool],
              Callable[[str], bool]]


def fold(index: SearchIndex, raw: Callable[[str], Any], parts: Labelled, split: Split,
         keys: Sequence[str], settings: Settings | None, tools: Array,
         plain: Sequence[Query]) -> tuple[Scores, Scores, Scores]:
    """The test queries' figures by the blend, by the fused order and by the fused
    order with the fusion fitted on ``plain``, the adapter
    (when ``settings``) and the fusion fitted on the training ones (``split``: which
    (set, labelled tools) train and which are judged); ``plain``: every query
    collected without an adapter (the training queries' cosines unadapted: adapted,
    they are in-sample, better than the judged queries' will be, and the fusion's fit
    learns to trust them too much)."""

    learns, judges, sees = split
    every = plain
    if settings is not None:
        train = {p: [q for q in qs if learns(p, frozenset(q[2]))] for p, qs in parts.items()}
        # A held-out server's tools are not among the fit's candidates: a fleet's
        # adapter never saw another fleet's tools (as negatives, it would learn to
        # push every query away from them).
        seen = [n for n, key in enumerate(keys) if sees(key)]
        queries_, positive = training(index, raw, train, keys)
        a, b = fit_adapter(queries_, positive[:, seen], tools[seen], settings)
        assert index._semantic is not None
        vectors = index._semantic[0]
        # The abstention's cosine moves too: only the ranking is scored here.
        index._semantic = (vectors, lambda text: adapted(raw(text), a, b))
        try:
            every = collected(index, parts)
        finally:
            index._semantic = (vectors, raw)
    judged = [q for q in every if judges(q.part, q.relevant)]
    weights = fit([q for q in every if learns(q.part, q.relevant)], keys, list(fusion.FEATURES))
    unadapted = (weights if every is plain else
                 fit([q for q in plain if learns(q.part, q.relevant)], keys,
                     list(fusion.FEATURES)))
    return (scored(judged, keys, lambda q: BLEND), scored(judged, keys, lambda q: weights),
            scored(judged, keys, lambda q: unadapted))


def merged(into: Scores, more: Scores, name: str | None = None) -> None:
    for part, rows in more.items():
        into.setdefault(name or part, []).extend(rows)


def by_sets(parts: Labelled) -> list[tuple[str, Split]]:
    """One split per seen set left out."""
    return [(out, (lambda p, r, out=out: p != out, lambda p, r, out=out: p == out,
                   lambda key: True)) for out in parts]


def by_servers() -> list[tuple[str, Split]]:
    """One split per group of servers held out (``server_splits``)."""
    return [(name, (lambda p, r, f=outside: f(r), lambda p, r, f=inside: f(r),
                    lambda key, f=outside: f(frozenset({key}))))
            for name, (outside, inside) in server_splits(list(SERVERS), GROUPS)]


def evaluate(index: SearchIndex, raw: Callable[[str], Any], parts: Labelled,
             keys: Sequence[str], settings: Settings, tools: Array, *, mode: str) -> None:
    splits = by_sets(parts) if mode == "sets" else by_servers()
    fused: dict[str, Scores] = {"without": {}, "with": {}, "raw fusion": {}}
    blend: dict[str, Scores] = {"without": {}, "with": {}}
    started = time.process_time()
    plain = collected(index, parts)
    for name, split in splits:
        for label, chosen in (("without", None), ("with", settings)):
            b, f, u = fold(index, raw, parts, split, keys, chosen, tools, plain)
            print(f"  fold {name} {label}: {time.process_time() - started:.0f} s CPU",
                  file=sys.stderr, flush=True)
            merged(blend[label], b, None if mode == "sets" else name)
            merged(fused[label], f, None if mode == "sets" else name)
            if chosen is not None:
                merged(fused["raw fusion"], u, None if mode == "sets" else name)
    title = "(a) one seen set left out" if mode == "sets" else "(b) servers left out"
    sys.stdout.flush()
    print(f"{title} ({time.process_time() - started:.0f} s CPU); blend, without -> with"
          " the adapter:")
    report(blend["without"], blend["with"])
    print(f"{title}; fused (fusion refitted per fold), without -> with the adapter:")
    report(fused["without"], fused["with"])
    print(f"{title}; fused, without -> with the adapter, the fusion fitted on the training"
          " queries' unadapted cosines:")
    report(fused["without"], fused["raw fusion"])
    sys.stdout.flush()


def setup(cache: Path) -> tuple[SearchIndex, list[str], Callable[[str], Any], Any]:
    index, docs = prepared_index(cache)
    assert index._semantic is not None and index._names is not None
    vectors, raw = index._semantic
    tools = ((1 - NAME_WEIGHT) * vectors.astype("float64")
             + NAME_WEIGHT * index._names.astype("float64"))
    return index, [d.key for d in docs], raw, tools


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rank", type=int, default=32)
    parser.add_argument("--penalty", type=float, default=0.01)
    parser.add_argument("--temperature", type=float, default=20.0)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--mode", choices=("sets", "servers", "both"), default="both")
    parser.add_argument("--write", action="store_true",
                        help="fit on every seen set and write gateway/adapter_weights.py")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/skillop-bench-vectors"))
    args = parser.parse_args()
    settings = Settings(args.rank, args.penalty, args.temperature, args.steps)
    index, keys, raw, tools = setup(args.cache)
    parts = seen_sets()
    print(f"set: {len(keys)} tools; {sum(map(len, parts.values()))} answerable queries of"
          f" {len(parts)} seen sets; adapter rank {settings.rank}, penalty {settings.penalty},"
          f" temperature {settings.temperature}, {settings.steps} steps")
    if args.write:
        a, b = fit_adapter(*training(index, raw, parts, keys), tools, settings)
        write(a.astype("float32"), b.astype("float32"))
        return 0
    for mode in ("sets", "servers") if args.mode == "both" else (args.mode,):
        evaluate(index, raw, parts, keys, settings, tools, mode=mode)
    return 0


def write(a: Any, b: Any) -> None:
    """The module gateway/adapter.py reads: the weights in base64 lines of 88."""
    text = WEIGHTS_FILE.read_text()
    body = [f"RANK = {a.shape[0]}", f"WIDTH = {a.shape[1]}"]
    for name, matrix in (("A", a), ("B", b)):
        data = encoded(matrix)
        lines = [f'    "{data[i:i + 88]}"' for i in range(0, len(data), 88)]
        body.append(f"{name} = (\n" + "\n".join(lines) + "\n)")
    WEIGHTS_FILE.write_text(text[:text.index("RANK = ")] + "\n".join(body) + "\n")
    digest = hashlib.sha256(WEIGHTS_FILE.read_bytes()).hexdigest()[:16]
    print(f"wrote {WEIGHTS_FILE} (rank {a.shape[0]}, sha256 {digest})")


if __name__ == "__main__":
    sys.exit(main())

