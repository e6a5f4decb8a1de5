"""Run a benchmark with onnxruntime hidden, so that the gateway's numpy forward pass
serves, as in the image (the int8 runtime is the opt-in ``search-int8`` extra, which a
development venv installs), in this process and in the gateways it starts:

    python bench/numpy_only.py bench/disclosure.py --hybrid --no-costs
"""

from __future__ import annotations

import os
import runpy
import sys
import tempfile
from pathlib import Path

#: An ``onnxruntime`` that fails to import, found before the installed one: the
#: encoder reads the failure as "not installed" (gateway/embedding_onnx.py).
_HIDING = 'raise ImportError("onnxruntime hidden by bench/numpy_only.py")\n'


def hide_onnxruntime(directory: Path) -> None:
    """Put a failing ``onnxruntime`` first on this process's path and its children's."""
    package = directory / "onnxruntime"
    package.mkdir()
    (package / "__init__.py").write_text(_HIDING)
    sys.path.insert(0, str(directory))
    paths = [str(directory), *filter(None, [os.environ.get("PYTHONPATH")])]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: python bench/numpy_only.py SCRIPT [ARG ...]")
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    with tempfile.TemporaryDirectory(prefix="skillop-numpy-only-") as directory:
        hide_onnxruntime(Path(directory))
        runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
