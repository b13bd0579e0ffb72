"""``eval --baseline`` evaluates the installed framework's own RAG: BBF 1.5's ``RAG`` in the BBF venv, BAF 4.5's
``RAG`` and ``HybridRAG`` in the BAF venv, each its own row, on the same corpus and embeddings as ours. Runs in both
venvs; only the BAF-specific part is marked."""
import importlib.util
import json
from pathlib import Path

import pytest

import framework
from helpers import ROOT
from rag_plugin.evaluation import baseline_names, baseline_retrievers, baselines, run_evaluation

PDFS = ROOT / 'data' / 'pdfs'
EXPECTED = {'bbf': ['BBF 1.5'], 'baf': ['BAF 4.5 RAG', 'BAF 4.5 HybridRAG']}
BAF_RAG_MISSING = [m for m in baselines.BAF_RAG_NEEDS if importlib.util.find_spec(m) is None]
needs_baf_rag = pytest.mark.skipif(framework.NAME == 'baf' and bool(BAF_RAG_MISSING),
                                   reason=f"BAF's RAG dependencies are not installed: {baselines.BAF_RAG_INSTALL}")


def _tiny_qa(path: Path) -> Path:
    """The first four answerable questions of nimbus_qa.jsonl and its first unanswerable one."""
    lines = (ROOT / 'data' / 'eval' / 'nimbus_qa.jsonl').read_text(encoding='utf-8').splitlines()
    items = [json.loads(line) for line in lines if line.strip()]
    answerable = [i for i in items if i.get('answerable', True)]
    chosen = answerable[:4] + [i for i in items if not i.get('answerable', True)][:1]
    path.write_text(''.join(json.dumps(i) + '\n' for i in chosen), encoding='utf-8')
    return path


def test_the_baseline_rows_are_the_installed_frameworks_own():
    assert baseline_names() == EXPECTED[framework.NAME]
    assert [f.package for f in baselines.installed_frameworks()] == [framework.PACKAGE]


@pytest.fixture(scope='module')
def tiny_eval(tmp_path_factory):
    folder = tmp_path_factory.mktemp('eval')
    cache = folder / 'cache'
    results = run_evaluation(str(PDFS), [str(_tiny_qa(folder / 'qa.jsonl'))], ks=(1, 4, 10),
                             configs=('hybrid-convex',), baseline=True, cache_dir=str(cache), progress=False)
    return results, cache


@needs_baf_rag
def test_a_tiny_eval_with_baseline_has_the_frameworks_rows_first_and_they_retrieve(tiny_eval):
    results, cache = tiny_eval
    assert [r.name for r in results] == EXPECTED[framework.NAME] + ['hybrid-convex']
    for r in results:
        assert (r.n_answerable, r.n_unanswerable) == (4, 1)
        # the frameworks' pages are 1-based like ours: each finds the cited page of most questions in its top 4
        assert r.hit_doc[4] >= 0.75 and r.hit_page[4] >= 0.75, r
    for r in results[:-1]:  # a framework's RAG gives no scores: no abstention to report
        assert r.false_abstention is None and r.sweep == []
    # each framework's store is its own, beside ours, in the cache
    stores = {p.name for p in cache.glob('*/*')}  # named for the model too: ``auto`` (the default) has its own
    assert {f'{framework.NAME}-auto', 'rag_plugin-auto'} <= stores, stores


@pytest.mark.baf
@needs_baf_rag
def test_bafs_rows_are_its_rag_and_hybrid_rag_on_its_own_chunks(tiny_eval, embeddings):
    from baf.nlp.rag.rag import RAG, HybridRAG
    _, cache = tiny_eval
    folder = next(cache.glob('*/baf-auto'))
    rag, hybrid = baselines.baf_rags(PDFS, embeddings, folder)  # the cached store: opened, nothing loaded again
    assert type(rag) is RAG and type(hybrid) is HybridRAG
    chunks = rag.vector_store.get()
    assert not rag.is_empty() and len(chunks['ids']) == len(set(chunks['documents']))
    # BAF's example splitter (1000 characters) and LangChain's PDF loader (0-based pages, the file's path)
    assert max(len(text) for text in chunks['documents']) <= baselines.BAF_SPLITTER['chunk_size']
    assert {m['page'] for m in chunks['metadatas']} >= {0}
    question = 'What does error NN-4012 mean?'
    assert len(hybrid.run_retrieval(question, k=10)) <= 8  # two lists of its k=4, fused
    assert len(rag.run_retrieval(question, k=10)) == 10


@pytest.mark.baf
def test_baf_baseline_without_its_rag_dependencies_says_what_to_install(monkeypatch, tmp_path, capsys):
    from rag_plugin.cli import main
    monkeypatch.setattr(baselines, 'BAF_RAG_NEEDS', baselines.BAF_RAG_NEEDS + ('no_such_module_for_the_test',))
    with pytest.raises(baselines.BaselineUnavailable, match='no_such_module_for_the_test'):
        baseline_retrievers(PDFS, tmp_path, None)
    code = main(['eval', '--pdfs', str(PDFS), '--qa', str(_tiny_qa(tmp_path / 'qa.jsonl')), '--baseline',
                 '--configs', 'dense', '--cache', str(tmp_path / 'cache'), '--json-only'])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith('error: ') and 'pip install' in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / 'cache').exists()  # said before anything was ingested
