"""What every tier shares: tests start from the settings' defaults.

A ``SKILLOP_*`` variable exported in the shell that runs pytest would change
what the operator, the gateway and the CLI under test do (an allow-list, a
refresh period, a log level), so each is dropped before any tier's conftest
sets its own (tests/operator/conftest.py sets the operator's). The helper kits
are importable from every tier through pyproject's ``pythonpath``.
"""

from __future__ import annotations

import os

for _name in [name for name in os.environ if name.startswith("SKILLOP_")]:
    del os.environ[_name]
# As the gateway sets it for itself (gateway/embedding.py), before any test imports
# numpy: a fork while OpenBLAS's worker threads compute can hang the test process.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# Hypothesis's per-example deadline measures the machine, not the code: on a loaded
# two-core runner a first example that imports a library takes hundreds of ms.
# Speed is measured in bench/, so no property test fails for being slow.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("skillop", deadline=None)
_hypothesis_settings.load_profile("skillop")
