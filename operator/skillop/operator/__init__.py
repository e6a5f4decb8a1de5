"""The skillop operator: kopf handlers over a pure store, cascade and planner.

``kopf run -m skillop.operator`` and ``skillop operator`` both load the handlers.
Only ``kube`` talks to the Kubernetes API; everything else is unit-tested pure.
"""

from skillop.operator import handlers as handlers  # registers the kopf handlers
