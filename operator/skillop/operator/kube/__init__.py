"""The one place that talks to the Kubernetes API (besides kopf's own watching).

``client`` holds every call the operator makes (``Kube``), ``lease`` the Lease
calls of leader election, ``errors`` what they fail with. Nothing else in
skillop imports the Kubernetes client (``.importlinter``).
"""

from skillop.operator.kube.client import Kube
from skillop.operator.kube.errors import (
    Gone,
    LeaseConflict,
    LeaseUnavailable,
    NotLeader,
    Refused,
    WriteFailed,
)
from skillop.operator.kube.lease import MICRO_TIME, LeaseRecord

__all__ = ["MICRO_TIME", "Gone", "Kube", "LeaseConflict", "LeaseRecord",
           "LeaseUnavailable", "NotLeader", "Refused", "WriteFailed"]
