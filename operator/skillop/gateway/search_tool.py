"""``search_tools``, the gateway's own tool in Search mode: the best matches'
definitions, exactly as a full listing would show them, or the closest few
marked weak when nothing fits; and how they were ranked (``ranking``: "hybrid"
when the sentence model ranked too, else "lexical"), so that whoever reads an
answer can tell whether the model was used."""

from __future__ import annotations

import json
import time
from typing import Any, Final

import anyio
import mcp_types as types

from skillop.gateway.observe import NOTHING, Observer
from skillop.gateway.pipeline import CallRecord, Recorder, error_result
from skillop.gateway.served import MAX_MATCHES, ServedSet
from skillop.model.caller import ANONYMOUS, Caller
from skillop.model.toolset import SEARCH_TOOL
from skillop.model.wording import count

#: How many of the closest tools a search that found nothing fitting still shows.
MAX_WEAK: Final = 3


async def search_tools(served: ServedSet, arguments: dict[str, Any],
                       record: Recorder, *, observer: Observer = NOTHING,
                       caller: Caller = ANONYMOUS) -> types.CallToolResult:
    """The answer to ``search_tools`` in ``served`` (which has a search index), among
    the tools ``caller`` may call; ``observer`` counts it (matched, abstained or
    refused)."""
    started = time.perf_counter()
    query, limit = arguments.get("query"), arguments.get("limit", 5)
    assert served.search is not None
    if (not isinstance(query, str) or not query.strip() or isinstance(limit, bool)
            or not isinstance(limit, int) or not 1 <= limit <= MAX_MATCHES):
        observer.count(lambda m: m.searched("refused"))
        record(own_record(served, SEARCH_TOOL, started, "malformed search_tools arguments"))
        return error_result(f"refused: {SEARCH_TOOL} takes query (a non-empty string)"
                            f" and limit (1 to {MAX_MATCHES})")
    index = served.search
    # The model's forward pass costs ~15 ms of CPU; numpy lets go of the GIL, so in
    # a worker thread it does not hold up the loop's other requests. BM25 alone is
    # well under a millisecond once its tables are built (half a second at 5,000
    # tools, by the vectors' thread or else the first search): answered in place.
    rules = served.caller_rules
    hidden = (rules.hidden(rules.matched(caller), tuple(served.tools)) if rules.rules
              else frozenset())
    found = (await anyio.to_thread.run_sync(lambda: index.find(query, limit=limit,
                                                               hidden=hidden))
             if index.hybrid or not index.built
             else index.find(query, limit=limit, hidden=hidden))
    definitions = [served.tools[key].definition.model_dump(mode="json", by_alias=True,
                                                           exclude_none=True)
                   for key, _ in found.matches]
    answer: dict[str, Any] = {"tools": definitions, "ranking": found.ranking}
    if found.weak:
        answer = {"tools": [], "nothingFits": True, "note": _nothing_fits(served),
                  "closest": definitions[:MAX_WEAK], "ranking": found.ranking}
    observer.count(lambda m: m.searched("abstained" if found.weak else "matched"))
    record(own_record(served, SEARCH_TOOL, started, None))
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(
        answer, ensure_ascii=False))], structured_content=answer)


def own_record(served: ServedSet, name: str, started: float,
               refused: str | None) -> CallRecord:
    """The record of a call of the gateway's own tool ``name``: ok, or refused for
    the reason ``refused``."""
    return CallRecord(actor=served.actor, binding_name=name, upstream=None,
                      upstream_tool=None, outcome="ok" if refused is None else "refused",
                      reason=refused, approval=None, seconds=time.perf_counter() - started)


def _nothing_fits(served: ServedSet) -> str:
    return (f"None of this agent's {count(len(served.tools), 'tool')} fits the query. The"
            " closest are"
            " under 'closest', as weak matches: read their descriptions before calling one,"
            " or tell the user that this agent has no tool for it.")
