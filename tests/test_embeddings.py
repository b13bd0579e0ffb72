"""The default embeddings: ONNX Runtime gives PyTorch's vectors, exported once and cached; the fallbacks hold."""
import numpy as np
import pytest

from rag_plugin.embeddings.minilm import SentenceTransformerEmbeddings

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


@pytest.fixture(scope='module')
def torch_model():
    return SentenceTransformerEmbeddings(backend='torch')._model


def test_graph_is_exported_and_checked_once_then_trusted(tmp_path, monkeypatch, torch_model):
    import json

    import rag_plugin.embeddings.onnx as onnx_encoder
    first = onnx_encoder.OnnxEncoder.export(torch_model, cache_dir=str(tmp_path))
    assert first.path.exists() and first.path.parent == tmp_path / 'onnx'
    manifest = json.loads(first.path.with_suffix('.json').read_text())
    assert manifest['agrees'] is True and manifest['difference'] < 1e-4 and manifest['pooling'] == 'mean'

    def no_export(*args, **kwargs):
        raise AssertionError('exported again')
    monkeypatch.setattr(onnx_encoder, '_export_graph', no_export)
    again = onnx_encoder.OnnxEncoder.from_cache(torch_model[0].auto_model.config._name_or_path, str(tmp_path))
    assert again.path == first.path
    assert np.abs(again.encode(TEXTS) - first.encode(TEXTS)).max() == 0
    assert onnx_encoder.OnnxEncoder.from_cache(str(tmp_path / 'no-model'), str(tmp_path)) is None


def test_torch_free_path_gives_pytorchs_vectors_within_1e_5(tmp_path, torch_model):
    """The cached graph, the model's tokenizer and numpy pooling: the vectors of PyTorch's sentence-transformers."""
    import rag_plugin.embeddings.onnx as onnx_encoder
    onnx_encoder.OnnxEncoder.export(torch_model, cache_dir=str(tmp_path))
    encoder = onnx_encoder.OnnxEncoder.from_cache(torch_model[0].auto_model.config._name_or_path, str(tmp_path))
    texts = TEXTS + ['  Leading and trailing spaces  ', 'UPPER case and ünïcödé — “quotes”', 'word ' * 400,
                     'Page 2', '日本語のテキスト', 'a\n\nb\tc']
    ours = encoder.encode(texts, batch_size=3)
    reference = torch_model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    assert np.abs(ours - reference).max() < 1e-5


def test_a_cached_graph_embeds_without_importing_torch(tmp_path, torch_model):
    import json
    import subprocess
    import sys

    from helpers import subprocess_env

    import rag_plugin.embeddings.onnx as onnx_encoder
    onnx_encoder.OnnxEncoder.export(torch_model, cache_dir=str(tmp_path))
    code = ('import sys, json; from rag_plugin.defaults import default_embeddings; e = default_embeddings(); '
            'v = e.embed_query("hello"); print(json.dumps([e.backend, "torch" in sys.modules, '
            '"sentence_transformers" in sys.modules, v]))')
    env = subprocess_env(RAG_PLUGIN_CACHE=str(tmp_path))
    out = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, timeout=300)
    backend, torch_loaded, st_loaded, vector = json.loads(out.stdout.strip().splitlines()[-1])
    assert (backend, torch_loaded, st_loaded) == ('onnx', False, False), out.stderr
    reference = torch_model.encode(['hello'], normalize_embeddings=True, convert_to_numpy=True)[0]
    assert np.abs(np.array(vector) - reference).max() < 1e-5


def test_a_graph_that_disagrees_is_not_used_nor_exported_again(tmp_path, monkeypatch, torch_model):
    import json

    import rag_plugin.embeddings.onnx as onnx_encoder
    first = onnx_encoder.OnnxEncoder.export(torch_model, cache_dir=str(tmp_path))
    manifest = first.path.with_suffix('.json')
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), 'agrees': False, 'difference': 0.3}))
    monkeypatch.setattr(onnx_encoder, 'DEFAULT_CACHE_DIR', str(tmp_path))
    monkeypatch.setattr(SentenceTransformerEmbeddings, '_cache', {})
    with pytest.raises(ValueError, match='differ'):
        onnx_encoder.OnnxEncoder.from_cache(torch_model[0].auto_model.config._name_or_path, str(tmp_path))
    assert SentenceTransformerEmbeddings().backend == 'torch'  # auto: PyTorch, the bot keeps working
    with pytest.raises(RuntimeError, match='ONNX backend is not available'):
        SentenceTransformerEmbeddings(backend='onnx')


def test_unknown_backend_and_failed_onnx_are_clear(monkeypatch):
    with pytest.raises(ValueError, match='unknown embedding backend'):
        SentenceTransformerEmbeddings(backend='tpu')
    import rag_plugin.embeddings.onnx as onnx_encoder

    class Broken:
        @classmethod
        def from_cache(cls, *args, **kwargs):
            return None

        @classmethod
        def export(cls, *args, **kwargs):
            raise ImportError('no onnxruntime here')
    monkeypatch.setattr(onnx_encoder, 'OnnxEncoder', Broken)
    monkeypatch.setattr(SentenceTransformerEmbeddings, '_cache', {})
    assert SentenceTransformerEmbeddings().backend == 'torch'  # auto: falls back, the bot keeps working
    with pytest.raises(RuntimeError, match='ONNX backend is not available'):
        SentenceTransformerEmbeddings(backend='onnx')


def test_int8_variant_is_an_option_kept_apart_and_recorded_by_the_store(tmp_path, embeddings, torch_model):
    import rag_plugin.embeddings.onnx as onnx_encoder
    from rag_plugin import default_splitter, default_vector_store
    from rag_plugin.ingest import Ingestor, ledger_for
    float_encoder = onnx_encoder.OnnxEncoder.export(torch_model, cache_dir=str(tmp_path))
    int8 = float_encoder.quantized()
    assert int8.path.name.endswith('.int8.onnx') and int8.path.exists() and int8.settings['variant'] == 'int8'
    assert int8.path.stat().st_size < float_encoder.path.stat().st_size / 2  # 8-bit weights
    assert float_encoder.quantized().path == int8.path  # quantised once, then reused
    ours, close = float_encoder.encode(TEXTS[:3]), int8.encode(TEXTS[:3])
    cosines = (ours * close).sum(axis=1)
    assert (cosines > 0.9).all() and (cosines < 0.99999).any()  # close, not the same vectors
    assert embeddings.variant == 'float32'
    with pytest.raises(ValueError, match='int8'):
        SentenceTransformerEmbeddings(backend='torch', variant='int8')
    with pytest.raises(ValueError, match='variant'):
        SentenceTransformerEmbeddings(variant='int4')
    quantised = SentenceTransformerEmbeddings(variant='int8')
    store = default_vector_store(str(tmp_path / 'store'), quantised)
    ingestor = Ingestor(store, default_splitter(), ledger_for(store))
    assert ingestor.store_settings()['embedding'] == {'model': 'sentence-transformers/all-MiniLM-L6-v2',
                                                      'variant': 'int8'}
