"""A missing extra is one line that names it ("install rag_plugin[server] for the HTTP API"), never an ImportError
traceback. Modules are made missing the way Python sees an uninstalled one: ``sys.modules[name] = None`` makes its
import raise ModuleNotFoundError."""
import runpy
import sys

import pytest
from conftest import ROOT
from ingest_fixtures import make_docx, make_text


@pytest.fixture
def without(monkeypatch):
    """Make modules (and everything under them) impossible to import, and forget the plugin modules that import them,
    as in a core install without the extras."""
    def hide(*modules: str) -> None:
        for name in list(sys.modules):
            if name.startswith(('rag_plugin.server', 'rag_plugin.evaluation')) or \
                    any(name == m or name.startswith(m + '.') for m in modules):
                monkeypatch.delitem(sys.modules, name)
        for m in modules:
            monkeypatch.setitem(sys.modules, m, None)
    return hide


def test_require_names_the_extra(without):
    from rag_plugin._extras import MissingExtra, require
    assert require('json', 'server', 'the HTTP API').__name__ == 'json'
    without('fastapi')
    with pytest.raises(MissingExtra) as raised:
        require('fastapi', 'server', 'the HTTP API')
    assert str(raised.value) == 'install rag_plugin[server] for the HTTP API'
    assert raised.value.__cause__ is None and raised.value.__suppress_context__  # no chained ImportError
    assert isinstance(raised.value, ImportError)  # `except ImportError` in a caller still works
    with pytest.raises(MissingExtra, match=r'^install rag_plugin\[server\] for the HTTP API$'):
        from rag_plugin import create_app  # noqa: F401


def test_cli_help_works_and_serve_says_which_extra(without, tmp_path, capsys):
    from rag_plugin.cli import main
    without('fastapi', 'uvicorn', 'matplotlib', 'docx')
    with pytest.raises(SystemExit) as exited:
        main(['--help'])
    assert exited.value.code == 0 and 'serve' in capsys.readouterr().out
    assert main(['serve', '--store', str(tmp_path / 'store')]) == 2
    assert capsys.readouterr().err == 'error: install rag_plugin[server] for the HTTP API\n'
    assert not (tmp_path / 'store').exists()  # refused before anything was opened


def test_eval_plot_is_refused_before_the_evaluation_runs(without, tmp_path, capsys):
    from rag_plugin.cli import main
    without('matplotlib')
    assert main(['eval', '--pdfs', str(tmp_path / 'none'), '--qa', str(tmp_path / 'qa.jsonl'),
                 '--plot', str(tmp_path / 'p.png'), '--cache', str(tmp_path / 'cache')]) == 2
    assert capsys.readouterr().err == 'error: install rag_plugin[eval] for the evaluation plots (--plot)\n'
    assert not (tmp_path / 'cache').exists()


def test_docx_without_the_extra_is_skipped_with_the_reason(without, tmp_path, embeddings):
    from rag_plugin.defaults import default_splitter, default_vector_store
    from rag_plugin.ingest import Ingestor
    from rag_plugin.store.ledger import Ledger
    folder = tmp_path / 'docs'
    make_docx(folder / 'guide.docx', 'Sync', ['Notes sync every five minutes.'])
    make_text(folder / 'notes.md', '# Trash\n\nDeleted notes stay in the trash for 30 days.\n')
    without('docx')
    store = default_vector_store(str(tmp_path / 'store'), embeddings)
    report = Ingestor(store, default_splitter(), Ledger()).ingest(folder)
    reasons = {f.source_id: (f.status, f.reason) for f in report.files}
    assert reasons['guide.docx'] == ('skipped', 'install rag_plugin[docx] for DOCX files')
    assert reasons['notes.md'][0] == 'added'  # the other files are ingested
    assert {m['source'] for m in store.get(include=['metadatas'])['metadatas']} == {'notes.md'}


def test_corpus_builder_says_which_extra(without):
    without('fpdf')
    with pytest.raises(SystemExit) as exited:
        runpy.run_path(str(ROOT / 'data' / 'build_pdfs.py'), run_name='__main__')
    assert exited.value.code == 'install rag_plugin[dev] for the sample corpus builder (fpdf2)'
