"""``make demo`` with a cluster: install the CRDs, run the operator, apply the
examples, wait for every Actor to be Ready and print each one's tool set.

Uses ``kubectl`` for what a person would type, and the operator exactly as
``skillop operator`` runs it (a child process, stopped at the end).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ACTORS = ("team-a/developer", "team-a/reviewer")


def kubectl(*args: str, check: bool = True) -> str:
    print("$ kubectl " + " ".join(args), flush=True)
    done = subprocess.run(["kubectl", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise SystemExit(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def ready(actor: str) -> dict[str, object] | None:
    ns, name = actor.split("/")
    out = kubectl("get", "actor", name, "-n", ns, "-o", "json", check=False)
    if not out:
        return None
    status = json.loads(out).get("status") or {}
    cond = next((c for c in status.get("conditions", []) if c.get("type") == "Ready"), None)
    return status if cond and cond.get("status") == "True" else None


def main() -> int:
    kubectl("apply", "-f", str(ROOT / "crds"))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    operator = subprocess.Popen([sys.executable, "-m", "skillop.cli.main", "operator"])
    try:
        # One command, as a person types it: the numbered files apply in order.
        kubectl("apply", "-f", str(ROOT / "examples"))
        deadline = time.monotonic() + 60
        while not all(ready(a) for a in ACTORS):
            if time.monotonic() > deadline:
                raise SystemExit("actors did not become Ready within 60s; see the operator log")
            time.sleep(1)
        print(kubectl("get", "skills,actors,clusterskillpolicies", "-A"))
        for actor in ACTORS:
            ns, name = actor.split("/")
            status = ready(actor) or {}
            cm = str(status.get("configMapName"))
            doc = json.loads(kubectl("get", "configmap", cm, "-n", ns, "-o",
                                     "jsonpath={.data.tools\\.json}"))
            print(f"\n{actor}: {len(doc['tools'])} tools, {doc['hash'][:19]}...")
            applied = ", ".join(f"{p['kind']} {p['name']}" for p in status.get("policies") or [])
            print(f"  policies applied: {applied or 'none'}")
            for tool in doc["tools"]:
                approve = " (requires approval)" if tool["capabilities"].get(
                    "requiresApproval") else ""
                print(f"  {tool['name']:<40} {tool['source']:<12} {tool['skill']}{approve}")
    finally:
        operator.terminate()
        operator.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
