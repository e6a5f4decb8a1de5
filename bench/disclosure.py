"""Benchmark: disclosure by search over real MCP servers' tools.

What is measured, and why
-------------------------
An Actor with ``disclosure: {mode: Search}`` shows the model two tools of the
gateway's instead of its whole set; the model finds the rest with
``search_tools`` (BM25, gateway/search.py). That is worth it only if search
finds the right tools, if the listing really shrinks, and if a search is cheap.

* The set: the tools/list of 25 published MCP servers (bench/mcp_tools/servers,
  recorded by bench/mcp_tools/record.py, each with its package name, version
  and licence), one server per purpose: four more recordings that duplicate a
  purpose (a second GitLab, a second git, two more browser servers) are left out
  of the set so that the labels below can be complete, and are used only to
  reach 1,000 tools for the latency figure.
* The queries (bench/mcp_tools/queries.txt): what a user wants done ("restart
  a failed GitLab pipeline"), written from the tools' purposes, not from their
  descriptions, each labelled with every tool of the set that does it.
* recall@k for one query is |relevant in the top k| / min(k, |relevant|) (so a
  query with one answer scores 1 when that answer is anywhere in the top k);
  the figure is the mean over the queries. hit@k: some relevant tool in the top k.
* Tokens: what an LLM API is sent for the listing (name, description, input
  schema as canonical JSON, cl100k_base, as status.toolTokens counts), for the
  full set against the Search listing (no pins: search_tools and call_tool).
  o200k_base is counted too, to compare encodings.
* Latency: every query against an index of 1,000 tools, ``--repeat`` rounds,
  time.perf_counter per search; p50, p95, max. Index build time too.

Targets (issue 23): recall@5 >= 0.85, listing tokens cut >= 90%, search p95 < 20 ms
at 1,000 tools. The script prints the figures and whether each target is met.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from skillop.gateway.search import Document, SearchIndex
from skillop.gateway.served import (
    CALL_TOOL_DEFINITION,
    parameter_text,
    search_tool_definition,
)
from skillop.model.canonical import canonical_json
from skillop.resolve.tokens import ENCODING, encoding_counter

DATA = Path(__file__).resolve().parent / "mcp_tools"
#: Short names the queries use -> recorded server (file stem).
SERVERS = {
    "fs": "modelcontextprotocol__server-filesystem", "mem": "modelcontextprotocol__server-memory",
    "ev": "modelcontextprotocol__server-everything", "gh": "modelcontextprotocol__server-github",
    "slack": "modelcontextprotocol__server-slack",
    "maps": "modelcontextprotocol__server-google-maps",
    "brave": "modelcontextprotocol__server-brave-search",
    "seq": "modelcontextprotocol__server-sequential-thinking",
    "pg": "modelcontextprotocol__server-postgres", "git": "mcp-server-git",
    "fetch": "mcp-server-fetch", "dc": "wonderwhy-er__desktop-commander",
    "gl": "zereight__mcp-gitlab", "k8s": "mcp-server-kubernetes", "pw": "playwright__mcp",
    "cd": "chrome-devtools-mcp", "notion": "notionhq__notion-mcp-server",
    "mongo": "mongodb-mcp-server", "neon": "neondatabase__mcp-server-neon",
    "air": "airtable-mcp-server", "hs": "hubspot__mcp-server",
    "ci": "circleci__mcp-server-circleci", "fc": "firecrawl-mcp", "tav": "tavily-mcp",
    "exa": "exa-mcp-server",
}
#: Recorded, but a second server for a purpose already in the set.
DUPLICATES = ("modelcontextprotocol__server-gitlab", "cyanheads__git-mcp-server",
              "executeautomation__playwright-mcp-server", "modelcontextprotocol__server-puppeteer")
TARGET_RECALL, TARGET_CUT, TARGET_P95_MS, LATENCY_TOOLS = 0.85, 0.90, 20.0, 1000


def skill_name(stem: str) -> str:
    """What an operator would call the server's Skill: "zereight__mcp-gitlab" -> "gitlab"."""
    scope, _, name = stem.rpartition("__")
    for affix in ("mcp-server-", "server-", "mcp-"):
        name = name.removeprefix(affix)
    for affix in ("-mcp-server", "-mcp"):
        name = name.removesuffix(affix)
    return scope if name in ("mcp", "mcp-server", "server", "") else name


def load(stem: str) -> list[dict[str, object]]:
    data = json.loads((DATA / "servers" / f"{stem}.json").read_text())
    tools: list[dict[str, object]] = data["tools"]
    return tools


def document(short: str, stem: str, tool: dict[str, object]) -> Document:
    """The tool as the gateway indexes it (gateway/served.py: bindingName, title,
    description, capability tags, the skill's name)."""
    annotations = tool.get("annotations") or {}
    title = tool.get("title") or (annotations.get("title") if isinstance(annotations, dict)
                                  else None) or ""
    schema = tool.get("inputSchema")
    return Document(key=f"{short}/{tool['name']}", name=str(tool["name"]), title=str(title),
                    description=str(tool.get("description") or ""), skill=skill_name(stem),
                    parameters=parameter_text(schema) if isinstance(schema, dict) else "")


def listing_tokens(tools: list[dict[str, object]], encoding: str) -> int:
    count = encoding_counter(encoding)
    return sum(count(str(t["name"])) + count(str(t.get("description") or ""))
               + count(canonical_json(t.get("inputSchema") or {"type": "object"}))
               for t in tools)


def queries(name: str) -> list[tuple[str, set[str]]]:
    out = []
    for line in (DATA / name).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            query, _, labels = line.partition("|")
            out.append((query.strip(), set(labels.split())))
    return out


def recall(found: list[str], relevant: set[str], k: int) -> float:
    return len(relevant & set(found[:k])) / min(k, len(relevant))


#: The queries the search was tuned on, then those written after it was fixed.
QUERY_FILES = ("queries.txt", "queries-heldout.txt")


def quality(index: SearchIndex, labelled: list[tuple[str, set[str]]],
            ) -> tuple[float, float, float, list[tuple[str, list[str], list[str]]]]:
    """Mean recall@5, recall@10, hit@5, and the queries not answered in full at 5."""
    r5, r10, h5, misses = [], [], [], []
    for query, relevant in labelled:
        found = [key for key, _ in index.search(query, limit=10)]
        r5.append(recall(found, relevant, 5))
        r10.append(recall(found, relevant, 10))
        h5.append(1.0 if relevant & set(found[:5]) else 0.0)
        if r5[-1] < 1:
            misses.append((query, sorted(relevant - set(found[:5])), found[:5]))
    return statistics.mean(r5), statistics.mean(r10), statistics.mean(h5), misses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--misses", action="store_true", help="print the queries missed at 5")
    args = parser.parse_args()

    tools = {short: load(stem) for short, stem in SERVERS.items()}
    docs = [document(short, SERVERS[short], t) for short, ts in tools.items() for t in ts]
    keys = {d.key for d in docs}
    sets = {name: queries(name) for name in QUERY_FILES}
    for name, labelled in sets.items():
        for query, relevant in labelled:
            if relevant - keys:
                raise SystemExit(f"{name}: {query!r} names tools not in the set:"
                                 f" {relevant - keys}")
    index = SearchIndex(docs)
    figures = {name: quality(index, labelled) for name, labelled in sets.items()}
    labelled = [q for qs in sets.values() for q in qs]

    flat = [t for ts in tools.values() for t in ts]
    meta = [json.loads(d.model_dump_json(by_alias=True, exclude_none=True))
            for d in (search_tool_definition(len(flat)), CALL_TOOL_DEFINITION)]
    full = {e: listing_tokens(flat, e) for e in (ENCODING, "o200k_base")}
    searching = {e: listing_tokens(meta, e) for e in (ENCODING, "o200k_base")}
    cut = 1 - searching[ENCODING] / full[ENCODING]

    # Latency at 1,000 tools: the set, the duplicate-purpose servers, then copies
    # of the set under other skills until there are 1,000.
    extra = [document(stem, stem, t) for stem in DUPLICATES for t in load(stem)]
    big = [*docs, *extra]
    copy = 2
    while len(big) < LATENCY_TOOLS:
        big += [Document(f"{d.key}#{copy}", d.name, d.title, d.description, d.tags,
                         f"{d.skill}-{copy}", d.parameters)
                for d in docs[: LATENCY_TOOLS - len(big)]]
        copy += 1
    started = time.perf_counter()
    large = SearchIndex(big)
    build_ms = (time.perf_counter() - started) * 1000
    times, cpu = [], []
    for _ in range(args.repeat):
        for query, _ in labelled:
            started, started_cpu = time.perf_counter(), time.thread_time()
            large.search(query, limit=5)
            times.append((time.perf_counter() - started) * 1000)
            cpu.append((time.thread_time() - started_cpu) * 1000)
    times.sort()
    cpu.sort()
    p95 = times[int(0.95 * (len(times) - 1))]

    print(f"set: {len(docs)} tools of {len(SERVERS)} MCP servers;"
          f" {len(labelled)} queries, {statistics.mean(len(r) for _, r in labelled):.2f}"
          " answering tools each")
    for name, (r5, r10, h5, _) in figures.items():
        print(f"{name} ({len(sets[name])} queries): recall@5 {r5:.3f}, recall@10 {r10:.3f},"
              f" hit@5 {h5:.3f}")
    r5_all = statistics.mean(r for name in QUERY_FILES for r in [figures[name][0]]
                             for _ in sets[name])
    print(f"all {len(labelled)} queries: recall@5 {r5_all:.3f}")
    print(f"listing tokens, full set:    {full[ENCODING]:,} ({ENCODING}),"
          f" {full['o200k_base']:,} (o200k_base)")
    print(f"listing tokens, Search mode: {searching[ENCODING]:,} ({ENCODING}),"
          f" {searching['o200k_base']:,} (o200k_base); cut {cut:.1%}")
    print(f"search at {len(big):,} tools: index built in {build_ms:.1f} ms; per query"
          f" p50 {times[len(times) // 2]:.3f} ms, p95 {p95:.3f} ms, max {times[-1]:.3f} ms"
          f" (CPU: p50 {cpu[len(cpu) // 2]:.3f} ms, p95 {cpu[int(0.95 * (len(cpu) - 1))]:.3f}"
          f" ms; {len(times)} searches)")
    met = {"recall@5": r5_all >= TARGET_RECALL, "tokens cut": cut >= TARGET_CUT,
           "p95": p95 < TARGET_P95_MS}
    print("targets: " + ", ".join(f"{name} {'met' if ok else 'NOT met'}"
                                  for name, ok in met.items()))
    if args.misses:
        for name in QUERY_FILES:
            for query, missed, top in figures[name][3]:
                print(f"  {name}: missed {missed} for {query!r}; top 5: {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
