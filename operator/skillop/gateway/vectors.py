"""The served set's sentence vectors: computed once per definition, cached by digest.

Where: in the gateway, not the operator. A vector is 1.5 KiB (384 float32), and a
tool has two (its text's and its name's: gateway/search.py), so a set of 551 tools
has 1.6 MiB of them: they would not fit beside the set in the
Actor's ConfigMap (1 MiB for everything) and do not belong in etcd; and only the
gateway needs them. The cost is CPU: all-MiniLM-L6-v2 in numpy reads a tool's
description (up to 64 tokens) in about 20-30 ms of one core and its name in a
fifth of that, so a set of 551 tools takes 12-20 s (bench/disclosure.py measures
it). So:

* the vectors are computed in a background thread: ``search_tools`` ranks
  lexically until they are ready (the log says when), never waits for them;
* each vector is keyed by the SHA-256 of the text the model reads (the tool's
  skill, name, title and description; or its skill, name and title), so an
  unchanged tool is never read twice, whichever set it comes back in;
* the cache is a file in ``SKILLOP_SEARCH_CACHE_DIR`` (an ``emptyDir`` in a pod: it
  outlives a restart of the gateway's container), one per model, so a restart
  reads it (5,000 tools: 15 MiB, well under a second) instead of embedding the
  set again, and does not write it again when it already holds the set. A file
  that cannot be read, or whose vectors are not float32 rows of the model's width,
  is ignored: the vectors are computed again and the file rewritten;
* a query's vector is kept by its text (``QUERY_CACHE``): an agent that repeats a
  search does not wait for the model again.

Without the model (gateway/embedding.py says why), nothing here runs and the
gateway logs once that search is lexical only.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import threading
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from skillop.gateway.embedding import QUERY_TOKENS, Encoder, Unavailable, shared_encoder
from skillop.gateway.search import SearchIndex
from skillop.model.wording import count

if TYPE_CHECKING:
    from skillop.gateway.embedding import Matrix

#: Vectors kept in the cache file at most (the current set's first): 20,000 x 1.5 KiB,
#: two a tool (a set of more than 10,000 tools is partly read again after a restart).
MAX_CACHED = 20_000
#: Query vectors kept in memory, by the query's text (an agent repeats its searches,
#: and a retry after a timeout asks the same): 1,024 x 1.5 KiB.
QUERY_CACHE = 1024


def digest(text: str) -> bytes:
    """The key of the vector of ``text``."""
    return hashlib.sha256(text.encode("utf-8")).digest()


class VectorCache:
    """Vectors by digest, in memory and (when ``directory`` is given) in one file."""

    def __init__(self, directory: Path | None, model: str) -> None:
        name = hashlib.sha256(model.encode()).hexdigest()[:16]
        self.path = directory / f"vectors-{name}.npz" if directory is not None else None
        self._vectors: dict[bytes, Matrix] = {}
        self._loaded = False
        #: The keys the file holds (read or written): a set already in it is not
        #: written again (8 MiB at 5,000 tools, on every restart).
        self._on_disk: set[bytes] = set()
        self._on_disk_shape: set[tuple[int, ...]] = set()

    def get(self, key: bytes) -> Matrix | None:
        self._load()
        return self._vectors.get(key)

    def _load(self) -> None:
        if self._loaded or self.path is None:
            self._loaded = True
            return
        self._loaded = True
        import numpy as np

        try:
            with np.load(self.path, allow_pickle=False) as data:
                keys, rows = data["digests"], data["vectors"]
                if (keys.ndim != 2 or keys.shape[1] != 32 or rows.ndim != 2
                        or len(keys) != len(rows) or rows.dtype != np.float32):
                    return
                self._vectors.update((bytes(k), r) for k, r in zip(keys, rows, strict=True))
                self._on_disk, self._on_disk_shape = set(self._vectors), {rows.shape[1:]}
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            # No cache yet, or an unreadable one (a truncated file is a bad zip): the
            # vectors are computed again, then the file rewritten.
            return

    def store(self, current: dict[bytes, Matrix]) -> str | None:
        """Keep ``current`` (the served set's vectors) and write the file, the current
        set's vectors first; the reason when it cannot be written."""
        import numpy as np

        self._load()
        widths = {vector.shape for vector in current.values()}
        if current.keys() <= self._on_disk and widths == self._on_disk_shape:
            return None
        kept = {**current, **{k: v for k, v in self._vectors.items() if k not in current}}
        self._vectors = dict(list(kept.items())[:MAX_CACHED])
        if self.path is None or not self._vectors:
            return None
        keys = np.frombuffer(b"".join(self._vectors), dtype=np.uint8).reshape(-1, 32)
        rows = np.stack(list(self._vectors.values())).astype(np.float32)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with temporary.open("wb") as out:
                np.savez(out, digests=keys, vectors=rows)
            os.replace(temporary, self.path)
            self._on_disk, self._on_disk_shape = set(self._vectors), {rows.shape[1:]}
        except OSError as exc:
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)
            return f"cannot write {self.path}: {exc.strerror or exc}"
        return None


def vectors_for(index: SearchIndex, encoder: Encoder, cache: VectorCache,
                ) -> tuple[Matrix, Matrix, list[bytes], int]:
    """The unit vectors of ``index``'s documents' texts and of their names, each in
    order, the keys of both (texts first), and how many were computed (the rest came
    from ``cache``)."""
    import numpy as np

    texts = [doc.sentence() for doc in index.documents]
    texts += [doc.label() for doc in index.documents]
    keys = [digest(text) for text in texts]
    found: dict[bytes, Matrix] = {}
    for key in keys:
        vector = cache.get(key)
        if vector is not None and vector.shape == (encoder.dimension,):
            found[key] = vector
    missing = sorted({key: text for key, text in zip(keys, texts, strict=True)
                      if key not in found}.items())
    if missing:
        computed = encoder.encode([text for _, text in missing])
        found.update((key, computed[i]) for i, (key, _) in enumerate(missing))
    matrix = (np.stack([found[key] for key in keys]).astype(np.float32) if keys
              else np.zeros((0, encoder.dimension), dtype=np.float32))
    half = len(index.documents)
    return matrix[:half], matrix[half:], keys, len(missing)


class SemanticRanker:
    """Attaches sentence vectors to each served set's index, in one background
    thread; loads the model once, on first use."""

    def __init__(self, cache_dir: Path | None, say: Callable[[str], None], *,
                 loader: Callable[[], Encoder | Unavailable] = shared_encoder) -> None:
        self._cache_dir = cache_dir
        self._say = say
        self._loader = loader
        self._encoder: Encoder | Unavailable | None = None
        self._cache: VectorCache | None = None
        self._pending: SearchIndex | None = None
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        #: The query's vector by its text, computed once (read-only: shared by calls).
        self.query_vector = functools.lru_cache(maxsize=QUERY_CACHE)(self._query_vector)

    def _query_vector(self, query: str) -> Matrix:
        encoder = self._load()
        assert not isinstance(encoder, Unavailable)
        vector: Matrix = encoder.encode([query], tokens=QUERY_TOKENS)[0]
        vector.flags.writeable = False
        return vector

    def submit(self, index: SearchIndex) -> None:
        """Rank ``index`` hybrid once its vectors are ready (a later submit
        supersedes one not started yet)."""
        with self._wake:
            self._pending = index
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="skillop-vectors",
                                                daemon=True)
                self._thread.start()
            self._wake.notify()

    def prepare(self, index: SearchIndex) -> bool:
        """Attach ``index``'s vectors now, in this thread; False when there is no model.
        The index's lexical tables are built first, model or not (not on the way
        to serving: the gateway submits each set to this thread)."""
        index.build()
        encoder = self._load()
        if isinstance(encoder, Unavailable):
            return False
        assert self._cache is not None
        started = time.perf_counter()
        vectors, names, keys, computed = vectors_for(index, encoder, self._cache)
        index.attach_vectors(vectors, self.query_vector, names=names)
        problem = self._cache.store(dict(zip(keys, [*vectors, *names], strict=True)))
        if problem:
            self._say(f"search vectors are not cached: {problem}")
        self._say(f"search_tools ranks {count(len(index), 'tool')} hybrid (lexical and"
                  f" {encoder.identity.partition('@')[0]}): {count(computed, 'text')} read by"
                  f" the model, {len(keys) - computed} from the cache (two a tool: its text"
                  " and its name), in"
                  f" {time.perf_counter() - started:.1f} s")
        return True

    def _load(self) -> Encoder | Unavailable:
        if self._encoder is None:
            self._encoder = self._loader()
            if isinstance(self._encoder, Unavailable):
                self._say(f"search_tools ranks lexically only (BM25): {self._encoder.reason}")
            else:
                self._cache = VectorCache(self._cache_dir, self._encoder.identity)
        return self._encoder

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._pending is None:
                    self._wake.wait()
                index, self._pending = self._pending, None
            try:
                self.prepare(index)
            except Exception as exc:  # the lexical ranking goes on serving
                self._say(f"search vectors failed ({type(exc).__name__}: {exc});"
                          " search_tools ranks lexically")
