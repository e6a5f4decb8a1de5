"""The learned query adapter: a query's sentence vector moved towards how tools are described.

A user asks "open a merge request"; a tool says "Creates a new merge request in a
GitLab project". The sentence model maps both into the same space, but requests and
descriptions are written in different styles. The adapter is a low-rank linear map
of the query's vector only, ``q' = normalize(q + B(A q))`` (A: 384 -> ``RANK``,
B: ``RANK`` -> 384), so no tool is read again and the vector cache is untouched; it
applies after either runtime's forward pass (numpy or int8 ONNX), one small
multiplication a query. The ranking's cosine reads ``q'``; the abstention reads the
query's own vector, as its threshold was calibrated.

The weights (``adapter_weights``: float16, base64) are fitted on the seen query sets
by bench/adapter_cv.py ``--write``; without them (``RANK`` 0) the query's vector
ranks as it is.
"""

from __future__ import annotations

import base64
import functools
from typing import TYPE_CHECKING

from skillop.gateway import adapter_weights

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from skillop.gateway.embedding import Matrix

    Pair = tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]


def decoded(text: str, shape: tuple[int, int]) -> npt.NDArray[np.float32]:
    """A float16 matrix of ``shape`` from its base64 text, as float32."""
    import numpy as np

    raw = np.frombuffer(base64.b64decode("".join(text.split())), dtype="<f2")
    return raw.reshape(shape).astype(np.float32)


def encoded(matrix: npt.NDArray[np.float32]) -> str:
    """``matrix`` as float16, little-endian, in base64 (``decoded``'s inverse)."""
    import numpy as np

    return base64.b64encode(np.ascontiguousarray(matrix, dtype="<f2").tobytes()).decode()


@functools.cache
def packaged() -> Pair | None:
    """The shipped weights (A, B), or None when the file holds none."""
    rank, width = adapter_weights.RANK, adapter_weights.WIDTH
    if rank == 0:
        return None
    return decoded(adapter_weights.A, (rank, width)), decoded(adapter_weights.B, (width, rank))


def adapted(vector: Matrix, weights: Pair | None = None) -> Matrix:
    """``vector`` (a query's unit vector) moved by the adapter (``weights``, by
    default the packaged ones), at unit length; ``vector`` itself when there are none
    or their width is not the vector's (another model)."""
    import numpy as np

    weights = packaged() if weights is None else weights
    if weights is None or weights[0].shape[1] != vector.shape[-1]:
        return vector
    a, b = weights
    moved = vector + b @ (a @ vector)
    moved /= max(float(np.linalg.norm(moved)), 1e-12)
    result: Matrix = moved.astype(np.float32)
    return result


def unadapted(vector: Matrix) -> Matrix:
    """``vector`` as it is (an index that ranks by the model's own vectors)."""
    return vector
