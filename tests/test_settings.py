"""The RAG's settings are BBF properties of a [rag] section: a real BBF bot loading a config.ini configures the RAG,
environment variables override the file and constructor arguments override both."""
import configparser

import pytest
from conftest import ROOT
from helpers import build_rag

CONFIG = """
[nlp]
nlp.language = en

[rag]
rag.k = 7
rag.relevance_threshold = 0.31
rag.min_coverage = 0.4
rag.word_similarity = 0.8
rag.vocabulary_languages = en, es
rag.not_found_answer = Not in the guides (100% sure).
rag.trace_file = {trace}
rag.answer_deadline = none
rag.llm_max_attempts = 5
rag.max_question_chars = 50
rag.rewrite_queries = false
rag.write_lock_timeout = 12.5
"""


@pytest.fixture
def bbf_bot(tmp_path):
    """A real BBF bot that loaded a config.ini with a [rag] section, with the extractive answerer."""
    from besser.bot.core.bot import Bot
    from rag_plugin import ExtractiveLLM
    path = tmp_path / 'config.ini'
    path.write_text(CONFIG.format(trace=tmp_path / 'file_trace.jsonl'))
    bot = Bot('settings_bot')
    bot.load_properties(str(path))
    ExtractiveLLM(bot)
    return bot


def make_rag(bot, embeddings, **kwargs):
    """A RAG of this bot on an in-memory store of its own, with an in-memory ledger."""
    from rag_plugin import default_vector_store
    store = default_vector_store(None, embeddings, collection_name=f'settings_{id(kwargs)}')
    return build_rag(store, bot=bot, ledger_path=':memory:', **kwargs)


@pytest.mark.bbf
def test_config_ini_is_read_then_env_then_arguments_override_it(bbf_bot, embeddings, tmp_path, monkeypatch):
    from rag_plugin.guard import DEFAULT_MAX_UNKNOWN
    from rag_plugin.settings import RAG_ANSWER_DEADLINE, RAG_K, RAG_RELEVANCE_THRESHOLD
    for env in ('RAG_PLUGIN_TRACE', 'RAG_PLUGIN_WRITE_LOCK_TIMEOUT'):
        monkeypatch.delenv(env, raising=False)
    # BBF's own getters read the section (the settings are BBF properties)
    assert bbf_bot.get_property(RAG_K) == 7 and bbf_bot.get_property(RAG_RELEVANCE_THRESHOLD) == 0.31

    # 1. config.ini over the defaults
    rag = make_rag(bbf_bot, embeddings)
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

    # 2. environment variables over config.ini
    monkeypatch.setenv('RAG_PLUGIN_TRACE', str(tmp_path / 'env_trace.jsonl'))
    monkeypatch.setenv('RAG_PLUGIN_WRITE_LOCK_TIMEOUT', '3')
    rag = make_rag(bbf_bot, embeddings)
    assert rag.tracer.path == str(tmp_path / 'env_trace.jsonl') and rag.ingestor.write_lock.timeout == 3.0
    assert rag.k == 7  # no environment variable for k: still the file's

    # 3. constructor arguments over both, BBF's own defaults included when passed explicitly (k=4)
    rag = make_rag(bbf_bot, embeddings, k=4, relevance_threshold=0.5, trace_file=str(tmp_path / 'arg_trace.jsonl'),
                   answer_deadline=9.0, not_found_answer='No.')
    assert (rag.k, rag.guard.threshold, rag.generator.deadline, rag.not_found_answer) == (4, 0.5, 9.0, 'No.')
    assert rag.tracer.path == str(tmp_path / 'arg_trace.jsonl')
    assert make_rag(bbf_bot, embeddings, answer_deadline=None, llm_timeout=None).generator.timeout is None

    # 4. bot.set_property is the bot's configuration too (BBF's setter, like websocket.port)
    bbf_bot.set_property(RAG_K, 9)
    assert make_rag(bbf_bot, embeddings).k == 9


@pytest.mark.bbf
def test_a_bad_value_names_the_property_and_where_it_came_from(bbf_bot, embeddings, monkeypatch):
    from rag_plugin.settings import RAG_K
    bbf_bot.config.set('rag', RAG_K.name, 'seven')
    with pytest.raises(ValueError, match=r"the bot's properties \(config.ini\): rag.k must be int, got 'seven'"):
        make_rag(bbf_bot, embeddings)
    monkeypatch.setenv('RAG_PLUGIN_WRITE_LOCK_TIMEOUT', 'soon')
    with pytest.raises(ValueError, match='environment variable RAG_PLUGIN_WRITE_LOCK_TIMEOUT: rag.write_lock_timeout'):
        make_rag(bbf_bot, embeddings, k=2)


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


@pytest.mark.bbf
def test_store_embeddings_and_llm_helpers_read_the_bot(bbf_bot, embeddings, tmp_path, monkeypatch):
    from rag_plugin import default_llm, default_vector_store
    from rag_plugin.generate.extractive import is_extractive
    from rag_plugin.settings import RAG_EMBEDDING_BACKEND, RAG_LLM, RAG_STORE
    monkeypatch.delenv('RAG_PLUGIN_STORE', raising=False)
    bbf_bot.set_property(RAG_STORE, str(tmp_path / 'from_config'))
    default_vector_store(embeddings=embeddings, bot=bbf_bot)
    assert (tmp_path / 'from_config' / 'chroma.sqlite3').exists()
    monkeypatch.setenv('RAG_PLUGIN_STORE', str(tmp_path / 'from_env'))
    default_vector_store(embeddings=embeddings, bot=bbf_bot)
    assert (tmp_path / 'from_env' / 'chroma.sqlite3').exists()
    # rag.llm = extractive wins over a configured OpenAI key (auto would pick OpenAI)
    monkeypatch.setenv('OPENAI_API_KEY', 'sk-test')
    bbf_bot.set_property(RAG_LLM, 'extractive')
    assert is_extractive(default_llm(bbf_bot))
    bbf_bot.set_property(RAG_EMBEDDING_BACKEND, 'gpu')
    monkeypatch.delenv('RAG_PLUGIN_EMBEDDING_BACKEND', raising=False)
    with pytest.raises(ValueError, match="unknown embedding backend 'gpu'"):
        default_vector_store(None, bot=bbf_bot)


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
