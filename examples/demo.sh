#!/usr/bin/env bash
# The demo: the operator against the current kube-context when one answers,
# otherwise the offline CLI over examples/ (the same resolver).
set -euo pipefail
cd "$(dirname "$0")/.."
run() { printf '\n$ %s\n' "$*"; "$@"; }

if command -v kubectl >/dev/null 2>&1 && kubectl version --request-timeout=3s >/dev/null 2>&1; then
  exec python examples/demo_cluster.py
fi

echo "No reachable Kubernetes cluster: running the offline CLI over examples/."
echo "(With a cluster in your kube-context, 'make demo' installs the CRDs, runs the"
echo " operator, applies examples/ and prints each Actor's tool set.)"
run skillop validate -f examples
run skillop tree team-a/developer -f examples
run skillop tools team-a/developer -f examples -o table
run skillop tools team-a/reviewer -f examples -o table
run skillop explain team-a/reviewer write_file -f examples
run skillop explain team-a/developer push_image -f examples
# The ClusterSkillPolicy in examples/10-policies.yaml, in effect: team-a's Actors get
# delete_file only with requiresApproval, though file-ops ships it without.
run skillop explain team-a/developer delete_file -f examples
