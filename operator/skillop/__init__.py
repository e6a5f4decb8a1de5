"""skillop: resolve reusable Skills into the exact, policy-checked tool set of each Actor.

Layers, inner to outer: ``model`` (CRD specs as pydantic models), ``sources`` (where
tools come from), ``resolve`` (the pure resolver), then ``cli`` and ``operator``, which
only feed manifests in and write results out.
"""

__version__ = "0.1.0"
