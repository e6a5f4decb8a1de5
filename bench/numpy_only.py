"""Run a benchmark with onnxruntime hidden, so that the gateway's numpy forward pass
serves, as in the image (the int8 runtime is the opt-in ``search-int8`` extra, which a
development venv installs):

    python bench/numpy_only.py bench/disclosure.py --hybrid --no-costs
"""

from __future__ import annotations

import runpy
import sys


def main() -> None:
    # A None entry makes ``import onnxruntime`` fail, which the encoder reads as
    # "not installed" (gateway/embedding_onnx.py).
    sys.modules["onnxruntime"] = None  # type: ignore[assignment]
    if len(sys.argv) < 2:
        raise SystemExit("usage: python bench/numpy_only.py SCRIPT [ARG ...]")
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
