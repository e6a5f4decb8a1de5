"""Benchmark: what caller rules cost the resolver and the gateway.

What is measured, and why
-------------------------
Rules per caller must not make the common paths slower than they are:

* Resolve (the catalog read once): an Actor of ``--tools`` Agent Skills in
  ``--skills`` skills (each included by a root skill), with ``--rules`` caller
  rules and one rate limit, resolved and rendered (``Resolver.resolve_actor``
  and the ToolSet text), with and without the rules: the rules' compile
  (globs over every tool's names and skill lineage) is the difference.
* Gateway listing: ``Listings.json`` for a caller whose view is kept (every
  request but the first of a set of matched rules: the rules' ``matched`` and a
  dictionary lookup), and for a new view (each of ``--rules`` callers matching a
  different rule: the decisions for the whole set).
* Gateway decision: ``caller_policy.decide`` for one call, and a token bucket's
  ``take``.

Each figure is the best of ``--repeat`` rounds (time.perf_counter; the machine
is shared, and the best is the least disturbed), printed with the input
sizes. Run: ``python bench/caller_rules.py``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from skillkit import actor, catalog, skill

from skillop.gateway.buckets import Buckets
from skillop.gateway.caller_policy import decide
from skillop.gateway.listing import Listings
from skillop.gateway.served import parse_served_set
from skillop.model.caller import caller_from_claims
from skillop.model.names import ObjectRef
from skillop.resolve.catalog import Catalog
from skillop.resolve.resolver import Resolver


def timed(work: Callable[[], Any], repeat: int) -> float:
    """The least seconds of ``work`` over ``repeat`` rounds."""
    rounds = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        rounds.append(time.perf_counter() - started)
    return min(rounds)


def docs(tools: int, skills: int, rules: int) -> list[Any]:
    per = tools // skills
    leaves = [skill(f"s{i}", agentSkills=[{"inline": _md(f"t{i}-{j}")} for j in range(per)])
              for i in range(skills)]
    root = skill("root", includes=[{"skill": f"s{i}"} for i in range(skills)])
    spec: dict[str, Any] = {}
    if rules:
        spec = {"skillAccessPolicy": {"callerRules": [
            {"callers": {"groups": [f"g{r}"]}, "effect": "Deny" if r % 2 else "Allow",
             "skills": [f"team-a/s{r % skills}"], "tools": [f"t{r % skills}-*"]}
            for r in range(rules)]},
            "rateLimits": [{"calls": 60, "perSeconds": 60, "tools": ["t0-*"]}]}
    return [*leaves, root, actor("bot", skills=["root"], **spec)]


def _md(name: str) -> str:
    return f"---\nname: {name}\ndescription: does {name}\n---\n# {name}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=600)
    parser.add_argument("--skills", type=int, default=20)
    parser.add_argument("--rules", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    ref = ObjectRef("team-a", "bot")
    texts = {}
    for rules in (0, args.rules):
        made = catalog(docs(args.tools, args.skills, rules))

        def resolve(made: Catalog = made) -> str:
            resolution = Resolver(made).resolve_actor(ref)
            assert resolution is not None and resolution.ok, resolution
            return resolution.text

        texts[rules] = resolve()
        print(f"resolve {args.tools} tools, {args.skills} skills, {rules} rules:"
              f" {timed(resolve, args.repeat) * 1e3:.2f} ms")
    served = parse_served_set(texts[args.rules])
    listings = Listings({})
    callers = [caller_from_claims({"sub": f"u{r}", "groups": [f"g{r}"]})
               for r in range(args.rules)]
    listings.json(served, "2025-11-25", caller=callers[0])
    kept = timed(lambda: listings.json(served, "2025-11-25", caller=callers[0]),
                 args.repeat * 50)
    print(f"listing JSON, kept view ({len(served.tools)} tools, {args.rules} rules):"
          f" {kept * 1e6:.1f} us")

    def new_views() -> None:
        fresh = Listings({})
        for caller in callers:
            fresh.view(served, caller)

    per_view = timed(new_views, args.repeat) / len(callers)
    print(f"listing view, made anew: {per_view * 1e3:.3f} ms per view")
    binding = next(iter(served.tools))
    one = timed(lambda: decide(served.caller_rules, callers[1], binding), args.repeat * 100)
    print(f"decide one call: {one * 1e6:.2f} us")
    buckets = Buckets()
    take = timed(lambda: buckets.take(served.rate_limits, callers[1], binding),
                 args.repeat * 100)
    print(f"take a token: {take * 1e6:.2f} us")


if __name__ == "__main__":
    main()
