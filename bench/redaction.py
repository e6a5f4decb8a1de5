"""Benchmark: what redaction costs an answer (sources/redaction.py).

What is measured, and why
-------------------------
Every answer an upstream gives through the gateway (a result's strings, an
error, a stdio server's stderr line) and every listing discovery keeps is
searched for every credential mounted in the gateway, in every form the
``Redactor`` knows (each character as it is, JSON-escaped or percent-encoded,
letters in any case; twice-escaped JSON; base64). A gateway whose upstreams need
no credentials pays nothing (no pattern); one with credentials pays this on
every call. Printed, for ``--secrets`` values of ``--length`` characters (a
``Bearer`` token, the others plain), best of ``--rounds``:

* the time to build the redactor (once per upstream connection);
* per call of a small answer (a tool result of about 100 characters, no secret);
* per MB of text without a secret (a large result: the worst case per byte);
* per MB of text holding a secret every 10 KB (each replaced).

    .venv/bin/python bench/redaction.py [--secrets 3] [--length 40] [--rounds 5]
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from skillop.sources.redaction import REDACTED, Redactor

SMALL = '{"content": [{"type": "text", "text": "build 1432 passed: 212 tests in 3.1 s"}]}'


def _best(rounds: int, work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--secrets", type=int, default=3)
    parser.add_argument("--length", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits + "+/=-_"
    values = ["".join(rng.choice(alphabet) for _ in range(args.length))
              for _ in range(args.secrets)]
    values[0] = "Bearer " + values[0]
    text = "".join(rng.choice(string.printable) for _ in range(1_000_000))
    with_secrets = "".join(text[i:i + 10_000] + values[i // 10_000 % len(values)]
                           for i in range(0, len(text), 10_000))

    build = _best(args.rounds, lambda: Redactor(values))
    redact = Redactor(values)
    assert redact(with_secrets).count(REDACTED) == 100
    calls = 10_000
    small = _best(args.rounds, lambda: [redact(SMALL) for _ in range(calls)]) / calls
    clean = _best(args.rounds, lambda: redact(text))
    dirty = _best(args.rounds, lambda: redact(with_secrets))
    print(f"{args.secrets} secrets of {args.length} characters (the first a Bearer token);"
          f" best of {args.rounds} rounds")
    print(f"build the redactor:             {build * 1e3:8.2f} ms")
    print(f"a small answer ({len(SMALL)} chars):     {small * 1e6:8.2f} us")
    print(f"1 MB without a secret:          {clean * 1e3:8.2f} ms")
    print(f"1 MB with a secret every 10 KB: {dirty * 1e3:8.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
