"""The default embeddings: ONNX Runtime gives PyTorch's vectors, exported once and cached; the fallbacks hold."""
import numpy as np
import pytest

from rag_plugin.defaults import SentenceTransformerEmbeddings

TEXTS = ['How do I reset my password?', 'Error E-4012 means the sync token expired.' * 5, 'Dental plan', '']


def test_default_runs_on_onnx_with_pytorchs_vectors(embeddings):
    assert embeddings.backend == 'onnx'
    torch_side = SentenceTransformerEmbeddings(backend='torch')
    assert torch_side.backend == 'torch'
    ours, reference = np.array(embeddings.embed_documents(TEXTS)), np.array(torch_side.embed_documents(TEXTS))
    assert ours.shape == reference.shape == (len(TEXTS), 384)
    assert np.abs(ours - reference).max() < 1e-4
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)  # normalised, as the retrieval scores assume
    # the order of the input is kept although batches are sorted by length
    assert np.allclose(ours[1], embeddings.embed_query(TEXTS[1]), atol=1e-5)


def test_a_texts_vector_does_not_depend_on_its_batch(embeddings):
    # the extractive answerer's fragment cache and the RAG's query memory rely on it for identical answers
    alone = np.array([embeddings.embed_query(text) for text in TEXTS])
    assert (np.array(embeddings.embed_documents(TEXTS)) == alone).all()
    assert (np.array(embeddings.embed_documents(TEXTS[::-1]))[::-1] == alone).all()


def test_graph_is_exported_once_into_the_cache(tmp_path, monkeypatch, embeddings):
    import rag_plugin.onnx_encoder as onnx_encoder
    model = embeddings._model
    first = onnx_encoder.OnnxEncoder(model, cache_dir=str(tmp_path))
    assert first.path.exists() and first.path.parent == tmp_path / 'onnx'
    assert first.agrees_with(model) is not None

    def no_export(*args, **kwargs):
        raise AssertionError('exported again')
    monkeypatch.setattr(onnx_encoder, '_export', no_export)
    again = onnx_encoder.OnnxEncoder(model, cache_dir=str(tmp_path))
    assert again.path == first.path
    assert np.abs(again.encode(TEXTS) - first.encode(TEXTS)).max() == 0


def test_unknown_backend_and_failed_onnx_are_clear(monkeypatch):
    with pytest.raises(ValueError, match='unknown embedding backend'):
        SentenceTransformerEmbeddings(backend='tpu')
    import rag_plugin.onnx_encoder as onnx_encoder

    class Broken:
        def __init__(self, *args, **kwargs):
            raise ImportError('no onnxruntime here')
    monkeypatch.setattr(onnx_encoder, 'OnnxEncoder', Broken)
    monkeypatch.setattr(SentenceTransformerEmbeddings, '_cache', {})
    assert SentenceTransformerEmbeddings().backend == 'torch'  # auto: falls back, the bot keeps working
    with pytest.raises(RuntimeError, match='ONNX backend is not available'):
        SentenceTransformerEmbeddings(backend='onnx')
