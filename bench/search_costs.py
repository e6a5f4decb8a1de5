"""The hybrid search's costs at 551, 2,000 and 5,000 tools (bench/disclosure.py --hybrid).

* Search latency: every query text against an index of each size, vectors
  attached (the recorded set, the duplicate-purpose servers, then copies under
  renamed skills, each copy with its original's vector: the search's cost does not
  depend on the values). Each search first with the query's vector not cached (what
  a new query costs: the model's forward pass), then again (an agent repeating a
  search: the vector from the gateway's cache). Wall and CPU (thread) time.
* Gateway ready at 5,000 tools in Search mode: ``skillop gateway`` started on the
  set laid out as the kubelet mounts it (bench/largesets.py) until a real SDK
  client has listed it (search_tools and call_tool), with the cache of the set's
  vectors filled as a previous run of the gateway leaves it; its memory then and
  once it ranks hybrid (the model loaded, the cached vectors attached); and,
  in process, what a restart costs to rank hybrid again (the model loaded, the
  5,000 vectors read from the cache and attached). Its CPU is the whole
  process's (the background thread that attaches the vectors included) and the
  main thread's (the event loop's: what holds up serving). ``--runs N`` starts
  the gateway N times on the same set (wall times on a shared machine vary).

    python bench/search_costs.py [--ready-only] [--runs N (0: latency only)] [--repeat N]

(or through ``bench/disclosure.py --hybrid``, after the quality figures).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from skillop.gateway.search import Document, SearchIndex

if TYPE_CHECKING:
    import largesets

    from skillop.gateway.embedding import Encoder, Matrix

SIZES = (551, 2000, 5000)
READY_TOOLS = 5000
TARGET_P95_MS, TARGET_READY_S = 20.0, 3.0


def scaled(docs: list[Document], extra: list[Document], vectors: Matrix,
           size: int) -> tuple[list[Document], Matrix]:
    """``size`` documents: ``docs``, then ``extra``, then renamed copies of ``docs``;
    each with a vector (``extra`` borrows the first one, a copy its original's)."""
    import numpy as np

    big, rows = list(docs[:size]), list(vectors[:size])
    for doc in extra[: size - len(big)]:
        big.append(doc)
        rows.append(vectors[0])
    copy = 2
    while len(big) < size:
        take = docs[: size - len(big)]
        big += [Document(f"{d.key}#{copy}", d.name, d.title, d.description, d.tags,
                         f"{d.skill}-{copy}", d.parameters) for d in take]
        rows += list(vectors[: len(take)])
        copy += 1
    return big, np.stack(rows)


def _percentiles(values: list[float]) -> str:
    values = sorted(values)
    return (f"p50 {values[len(values) // 2]:.1f} ms, p95"
            f" {values[int(0.95 * (len(values) - 1))]:.1f} ms")


def latency(docs: list[Document], extra: list[Document], vectors: Matrix, names: Matrix,
            encoder: Encoder, texts: list[str], *, repeat: int) -> bool:
    """Search latency at each of SIZES, each tool with its text's and its name's vector;
    True when p95 (new queries) is under target."""
    import functools

    from skillop.gateway.embedding import QUERY_TOKENS

    def forward(query: str) -> Matrix:
        return encoder.encode([query], tokens=QUERY_TOKENS)[0]

    met = True
    for size in SIZES:
        big, rows = scaled(docs, extra, vectors, size)
        index = SearchIndex(big)
        cached = functools.lru_cache(maxsize=None)(forward)
        index.attach_vectors(rows, cached, names=scaled(docs, extra, names, size)[1])
        new: dict[str, list[float]] = {"wall": [], "cpu": []}
        again: dict[str, list[float]] = {"wall": [], "cpu": []}
        for _ in range(repeat):
            cached.cache_clear()
            for text in texts:
                search = functools.partial(index.find, text, limit=5)
                _time(search, new)
                _time(search, again)
        p95 = sorted(new["wall"])[int(0.95 * (len(new["wall"]) - 1))]
        met = met and (size != READY_TOOLS or p95 < TARGET_P95_MS)
        print(f"  {size:,} tools ({len(new['wall'])} searches, load"
              f" {os.getloadavg()[0]:.1f}): a new query {_percentiles(new['wall'])}"
              f" (CPU {_percentiles(new['cpu'])}); repeated (vector cached)"
              f" {_percentiles(again['wall'])} (CPU {_percentiles(again['cpu'])})")
    return met


def _time(run: Callable[[], object], into: dict[str, list[float]]) -> None:
    started, started_cpu = time.perf_counter(), time.thread_time()
    run()
    into["wall"].append((time.perf_counter() - started) * 1000)
    into["cpu"].append((time.thread_time() - started_cpu) * 1000)


def ready(encoder: Encoder, vectors: Matrix, *, runs: int = 1) -> bool:
    """Gateway start-up to ready at READY_TOOLS tools in Search mode, the vector cache
    filled, ``runs`` times; True when the median is under target."""
    import largesets

    from skillop.gateway.served import load_served_set
    from skillop.gateway.vectors import SemanticRanker, VectorCache, digest
    from skillop.resolve.toolset import configmap_layout

    docs = largesets.manifests(READY_TOOLS)
    docs[-1]["spec"]["disclosure"] = {"mode": "Search"}
    resolution = largesets.resolve(docs)
    layout = configmap_layout(f"{largesets.ACTOR}-tools", resolution.text, resolution.hash,
                              resolution.tools)
    with tempfile.TemporaryDirectory() as tmp:
        directory, cache_dir = Path(tmp) / "tools", Path(tmp) / "search"
        largesets.lay_out(layout, directory)
        index = load_served_set(directory).search
        assert index is not None
        # The cache as the gateway's first run leaves it (the values do not matter).
        VectorCache(cache_dir, encoder.identity).store(
            {digest(text): vectors[i % len(vectors)]
             for i, d in enumerate(index.documents) for text in (d.sentence(), d.label())})
        os.environ["SKILLOP_SEARCH_CACHE_DIR"] = str(cache_dir)
        started_runs = []
        try:
            for _ in range(runs):
                started_runs.append(largesets.gateway(directory, 2,
                                                      settled="search_tools ranks"))
                print(_started(started_runs[-1]))
        finally:
            del os.environ["SKILLOP_SEARCH_CACHE_DIR"]
        said: list[str] = []
        restarted = load_served_set(directory).search
        assert restarted is not None
        started = time.perf_counter()
        SemanticRanker(cache_dir, said.append, loader=lambda: encoder).prepare(restarted)
        attach = time.perf_counter() - started
    up = sorted(run.ready[0] for run in started_runs)[len(started_runs) // 2]
    print(f"  gateway, {len(index):,} tools in Search mode: median ready {up:.2f} s of"
          f" {len(started_runs)} starts; target ready < {TARGET_READY_S:.0f} s"
          f" {'met' if up < TARGET_READY_S else 'NOT met'}")
    print(f"  a restart ranks hybrid again after the model's load and {attach:.2f} s"
          f" (in process: {said[-1].partition('): ')[2]})")
    return up < TARGET_READY_S


def _started(run: largesets.GatewayRun) -> str:
    (up, up_cpu), memory, hybrid = run.ready, run.memory, run.settled_memory or {}
    return (f"  gateway started (load {os.getloadavg()[0]:.1f}): ready (tools/list answered)"
            f" {up:.2f} s after start, {up_cpu:.2f} s CPU of which {run.ready_main_cpu:.2f} s"
            f" on the main thread; memory then VmHWM {memory['VmHWM'] / 1024:.0f} MiB, VmRSS"
            f" {memory['VmRSS'] / 1024:.0f} MiB; once hybrid VmHWM"
            f" {hybrid.get('VmHWM', 0) / 1024:.0f} MiB, VmRSS {hybrid.get('VmRSS', 0) / 1024:.0f}"
            " MiB")


def main() -> int:
    """The costs alone, without bench/disclosure.py's quality figures."""
    import disclosure

    from skillop.gateway.embedding import Unavailable, shared_encoder
    from skillop.gateway.vectors import SemanticRanker

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="latency: rounds of the texts")
    parser.add_argument("--runs", type=int, default=3, help="gateway starts (0: none)")
    parser.add_argument("--ready-only", action="store_true", help="no latency figures")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/skillop-bench-vectors"),
                        help="where the 551 recorded tools' vectors are cached")
    args = parser.parse_args()
    encoder = shared_encoder()
    if isinstance(encoder, Unavailable):
        raise SystemExit(f"no sentence model: {encoder.reason}")
    servers = disclosure.SERVERS
    docs = [disclosure.document(short, servers[short], t)
            for short in servers for t in disclosure.load(servers[short])]
    index = SearchIndex(docs)
    SemanticRanker(args.cache, lambda _: None, loader=lambda: encoder).prepare(index)
    assert index._semantic is not None and index._names is not None
    vectors, names = index._semantic[0], index._names
    met = True
    if not args.ready_only:
        extra = [disclosure.document(stem, stem, t) for stem in disclosure.DUPLICATES
                 for t in disclosure.load(stem)]
        texts = [q for name, _ in disclosure.LATENCY_SETS
                 for _, q, _ in disclosure.kinded_queries(name)]
        met = latency(docs, extra, vectors, names, encoder, texts, repeat=args.repeat)
        print(f"target: search p95 < {TARGET_P95_MS:.0f} ms at {READY_TOOLS:,} tools"
              f" {'met' if met else 'NOT met'}")
    if args.runs:
        ready(encoder, vectors, runs=args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
