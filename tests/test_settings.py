"""The RAG's settings are the properties of a ``rag`` section: a real bot of the installed framework loading its
properties file (BBF: a config.ini with a [rag] section; BAF: a config.yaml with a ``rag:`` mapping) configures the RAG,
environment variables override the file and constructor arguments override both."""
import configparser

import framework
import pytest
from conftest import ROOT
from helpers import build_rag

RAG_PROPERTIES = {
    'k': '7',
    'relevance_threshold': '0.31',
    'min_coverage': '0.4',
    'word_similarity': '0.8',
    'vocabulary_languages': 'en, es',
    'not_found_answer': 'Not in the guides (100% sure).',
    'trace_file': '{trace}',
    'answer_deadline': 'none',
    'llm_max_attempts': '5',
    'max_question_chars': '50',
    'rewrite_queries': 'false',
    'write_lock_timeout': '12.5',
}
"""dict[str, str]: the ``rag`` section of the test's properties file, as written in it."""

ORIGIN = "the bot's properties (config.ini)" if framework.NAME == 'bbf' else "the agent's properties"
"""str: how an error names a value read from the bot's (agent's) properties."""


def properties_file(folder, rag: dict) -> str:
    """Write the framework's properties file (BBF: config.ini; BAF: config.yaml, where YAML types the values) with
    ``nlp.language`` and this ``rag`` section; return its path."""
    if framework.NAME == 'bbf':
        path = folder / 'config.ini'
        path.write_text('[nlp]\nnlp.language = en\n\n[rag]\n' + ''.join(f'rag.{k} = {v}\n' for k, v in rag.items()))
    else:
        path = folder / 'config.yaml'
        path.write_text('nlp:\n  language: en\nrag:\n' + ''.join(f'  {k}: {v}\n' for k, v in rag.items()))
    return str(path)


def configured_bot(folder, rag: dict):
    """A real bot (agent) of the installed framework that loaded a properties file with this ``rag`` section, with the
    extractive answerer."""
    from rag_plugin import ExtractiveLLM
    bot = framework.new_owner('settings_bot')
    bot.load_properties(properties_file(folder, rag))
    ExtractiveLLM(bot)
    return bot


@pytest.fixture
def configured(tmp_path):
    """A real bot (agent) that loaded a properties file with the ``rag`` section of :data:`RAG_PROPERTIES`."""
    return configured_bot(tmp_path, {k: v.format(trace=tmp_path / 'file_trace.jsonl')
                                     for k, v in RAG_PROPERTIES.items()})


def make_rag(bot, embeddings, **kwargs):
    """A RAG of this bot on an in-memory store of its own, with an in-memory ledger."""
    from rag_plugin import default_vector_store
    store = default_vector_store(None, embeddings, collection_name=f'settings_{id(kwargs)}')
    return build_rag(store, bot=bot, ledger_path=':memory:', **kwargs)


def test_the_properties_file_is_read_then_env_then_arguments_override_it(configured, embeddings, tmp_path, monkeypatch):
    from rag_plugin.guard import DEFAULT_MAX_UNKNOWN
    from rag_plugin.settings import RAG_ANSWER_DEADLINE, RAG_K, RAG_RELEVANCE_THRESHOLD
    for env in ('RAG_PLUGIN_TRACE', 'RAG_PLUGIN_WRITE_LOCK_TIMEOUT'):
        monkeypatch.delenv(env, raising=False)
    # the framework's own getters read the section (the settings are its properties)
    assert configured.get_property(RAG_K) == 7 and configured.get_property(RAG_RELEVANCE_THRESHOLD) == 0.31

    # 1. the properties file over the defaults
    rag = make_rag(configured, embeddings)
    assert rag.k == 7
    assert (rag.guard.threshold, rag.guard.min_coverage, rag.guard.word_similarity) == (0.31, 0.4, 0.8)
    assert rag.guard.vocabulary_languages == ('en', 'es')
    assert rag.guard.max_unknown == DEFAULT_MAX_UNKNOWN  # not in the file: the default
    assert rag.not_found_answer == 'Not in the guides (100% sure).'  # read raw: no interpolation of '%'
    assert rag.tracer.path == str(tmp_path / 'file_trace.jsonl')
    assert rag.generator.deadline is None and RAG_ANSWER_DEADLINE.default_value == 20.0  # 'none': no deadline
    assert rag.generator.max_attempts == 5 and rag.max_question_chars == 50
    assert rag.rewriter.enabled is False
    assert rag.ingestor.write_lock.timeout == 12.5
    # ... and the RAG behaves accordingly: 7 chunks retrieved, the question cut at 50 characters in the trace
    for i in range(10):
        rag.add_text(f'Note {i}: the blue notebook number {i} syncs every {i + 1} minutes.', {'source_id': f'n{i}'})
    assert len(rag.run_retrieval('How often does the blue notebook sync?')) == 7
    message = rag.run(message='How often does the blue notebook sync? ' + 'Please answer. ' * 10)
    assert len(message.question) == 50
    assert (tmp_path / 'file_trace.jsonl').exists()

    # 2. environment variables over the properties file
    monkeypatch.setenv('RAG_PLUGIN_TRACE', str(tmp_path / 'env_trace.jsonl'))
    monkeypatch.setenv('RAG_PLUGIN_WRITE_LOCK_TIMEOUT', '3')
    rag = make_rag(configured, embeddings)
    assert rag.tracer.path == str(tmp_path / 'env_trace.jsonl') and rag.ingestor.write_lock.timeout == 3.0
    assert rag.k == 7  # no environment variable for k: still the file's

    # 3. constructor arguments over both, BBF's own defaults included when passed explicitly (k=4)
    rag = make_rag(configured, embeddings, k=4, relevance_threshold=0.5, trace_file=str(tmp_path / 'arg_trace.jsonl'),
                   answer_deadline=9.0, not_found_answer='No.')
    assert (rag.k, rag.guard.threshold, rag.generator.deadline, rag.not_found_answer) == (4, 0.5, 9.0, 'No.')
    assert rag.tracer.path == str(tmp_path / 'arg_trace.jsonl')
    assert make_rag(configured, embeddings, answer_deadline=None, llm_timeout=None).generator.timeout is None

    # 4. bot.set_property is the bot's configuration too (the framework's setter, like websocket.port)
    configured.set_property(RAG_K, 9)
    assert make_rag(configured, embeddings).k == 9


def test_a_bad_value_names_the_property_and_where_it_came_from(tmp_path, embeddings, monkeypatch):
    import re
    bot = configured_bot(tmp_path, {'k': 'seven'})
    with pytest.raises(ValueError, match=re.escape(f"{ORIGIN}: rag.k must be int, got 'seven'")):
        make_rag(bot, embeddings)
    monkeypatch.setenv('RAG_PLUGIN_WRITE_LOCK_TIMEOUT', 'soon')
    with pytest.raises(ValueError, match='environment variable RAG_PLUGIN_WRITE_LOCK_TIMEOUT: rag.write_lock_timeout'):
        make_rag(bot, embeddings, k=2)


def test_defaults_without_a_config_are_the_documented_ones(embeddings, monkeypatch):
    """A StandaloneBot (CLI, scripts) has no config: environment, else the defaults, as before the settings."""
    from rag_plugin import ExtractiveLLM, StandaloneBot
    from rag_plugin.settings import SETTINGS
    for setting in SETTINGS.values():
        if setting.env:
            monkeypatch.delenv(setting.env, raising=False)
    bot = StandaloneBot()
    ExtractiveLLM(bot)
    rag = make_rag(bot, embeddings)
    assert rag.k == SETTINGS['k'].default_value == 4 and rag.num_previous_messages == 0
    assert SETTINGS['relevance_threshold'].default_value is None  # none: the embedding model's calibration
    from rag_plugin.embeddings.calibration import MINILM
    assert rag.calibration == MINILM and rag.guard.threshold == MINILM.relevance_threshold == 0.2
    assert rag.guard.word_similarity == MINILM.word_similarity and rag.guard.coverage_below == MINILM.coverage_below
    assert rag.generator.deadline == SETTINGS['answer_deadline'].default_value
    assert rag.tracer is None and rag.ingestor.write_lock.timeout == 300.0
    monkeypatch.setenv('RAG_PLUGIN_TRACE', 'some_trace.jsonl')
    assert make_rag(bot, embeddings).tracer.path == 'some_trace.jsonl'


def test_store_embeddings_and_llm_helpers_read_the_bot(configured, embeddings, tmp_path, monkeypatch):
    from rag_plugin import default_llm, default_vector_store
    from rag_plugin.generate.extractive import is_extractive
    from rag_plugin.settings import RAG_EMBEDDING_BACKEND, RAG_LLM, RAG_STORE
    monkeypatch.delenv('RAG_PLUGIN_STORE', raising=False)
    configured.set_property(RAG_STORE, str(tmp_path / 'from_config'))
    default_vector_store(embeddings=embeddings, bot=configured)
    assert (tmp_path / 'from_config' / 'chroma.sqlite3').exists()
    monkeypatch.setenv('RAG_PLUGIN_STORE', str(tmp_path / 'from_env'))
    default_vector_store(embeddings=embeddings, bot=configured)
    assert (tmp_path / 'from_env' / 'chroma.sqlite3').exists()
    # rag.llm = extractive wins over a configured OpenAI key (auto would pick OpenAI)
    monkeypatch.setenv('OPENAI_API_KEY', 'sk-test')
    configured.set_property(RAG_LLM, 'extractive')
    assert is_extractive(default_llm(configured))
    configured.set_property(RAG_EMBEDDING_BACKEND, 'gpu')
    monkeypatch.delenv('RAG_PLUGIN_EMBEDDING_BACKEND', raising=False)
    with pytest.raises(ValueError, match="unknown embedding backend 'gpu'"):
        default_vector_store(None, bot=configured)


def test_the_demo_config_shows_every_setting_at_its_default():
    """bots/config.ini has the [rag] section with every setting commented at its default (the demo's history: 6)."""
    from rag_plugin.settings import SETTINGS, config_section
    for name in ('config.ini', 'telegram_config.ini'):
        text = (ROOT / 'bots' / name).read_text()
        lines = text.splitlines()
        for setting in SETTINGS.values():
            default = 'none' if setting.default_value is None else str(setting.default_value)
            if setting.short_name == 'num_previous_messages':
                assert f'{setting.name} = 6' in lines, name
            elif setting.short_name == 'answer_cache' and name == 'config.ini':
                assert f'{setting.name} = memory' in lines, name  # the demo bot has the answer cache on
            else:
                assert f'# {setting.name} = {default}' in lines, (name, setting.name)
        config = configparser.ConfigParser()
        config.read_string(text)
        demo = {'rag.answer_cache': 'memory'} if name == 'config.ini' else {}
        assert dict(config['rag']) == {'rag.num_previous_messages': '6', **demo}
        # the whole section is what the settings table generates (descriptions included)
        values = {'num_previous_messages': 6, **({'answer_cache': 'memory'} if demo else {})}
        section = text[text.index('[rag]'):].split('\n[', 1)[0].strip()
        assert section == config_section(values).strip(), f'{name}: regenerate its [rag] section with config_section'
