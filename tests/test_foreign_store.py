"""A store another tool filled, switched to this plugin: the installed framework's own RAG (BBF 1.5's ``load_pdfs`` in
``.venv``, BAF 4.5's ``load_documents`` and ``add_file`` in ``.venv-baf``, both on LangChain's community ``Chroma`` with
PyPDFLoader pages: 0-based ``page``, the loader's path in ``source``, no chunk ids of ours) and plain
``langchain_chroma.Chroma(...).add_documents``. It must answer at once with the file name and the 1-based page, say
that its chunks are not in the ledger, and ingesting the same files must adopt them: no duplicates (BBF and BAF add the
folder again on every start), no vector embedded again when the text is the same.

The stores are built in a child process: Chroma refuses a second client of one folder with other settings in a
process, as a bot that switched would never have both. The frameworks' RAG and these stores need
``langchain_community``: BBF's stack has it; BAF has it in its own ``extras`` (not in ``rag_plugin[baf]``), and
without it this module is skipped with that reason.
"""
import json
import subprocess
import sys
from pathlib import Path

import framework
import pytest

from conftest import PDFS, ROOT
from helpers import build_rag

pytest.importorskip('langchain_community', reason="the frameworks' own RAG and LangChain's Chroma need "
                                                  "langchain_community (BAF: pip install 'besser-agentic-framework"
                                                  "[extras]')")

BBF_SPLITTER = 'RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=100)'  # BBF's and BAF's example bots'

# RAG(...) inline: the framework's own RAG class filling a store, as its example bot does, is the point (not build_rag)
BUILD_WITH_FRAMEWORK = {'bbf': f'''
import sys
from langchain_community.vectorstores import Chroma
from langchain_text_splitters import RecursiveCharacterTextSplitter
from besser.bot.nlp.rag.rag import RAG
from rag_plugin import StandaloneBot, default_embeddings
store = Chroma(embedding_function=default_embeddings(), persist_directory=sys.argv[1])
rag = RAG(bot=StandaloneBot(), vector_store=store, splitter={BBF_SPLITTER}, llm_name='gpt')
for _ in range(int(sys.argv[3])):  # a BBF bot calls load_pdfs at every start: each start adds the folder again
    rag.load_pdfs(sys.argv[2])
print(store._collection.count())
''', 'baf': f'''
import sys
from langchain_community.vectorstores import Chroma
from langchain_text_splitters import RecursiveCharacterTextSplitter
from baf.core.agent import Agent
from baf.nlp.rag.rag import RAG
from rag_plugin import default_embeddings
store = Chroma(embedding_function=default_embeddings(), persist_directory=sys.argv[1])
rag = RAG(agent=Agent('store_builder'), vector_store=store, splitter={BBF_SPLITTER}, llm_name='gpt')
for _ in range(int(sys.argv[3])):  # BAF's example loads the folder at every start too: each start adds it again
    rag.load_documents(sys.argv[2], formats=['pdf'])
print(store._collection.count())
'''}

BUILD_WITH_BAF_UPLOAD = f'''
import base64
import sys
from langchain_community.vectorstores import Chroma
from langchain_text_splitters import RecursiveCharacterTextSplitter
from baf.core.agent import Agent
from baf.core.file import File
from baf.nlp.rag.rag import RAG
from rag_plugin import default_embeddings
store = Chroma(embedding_function=default_embeddings(), persist_directory=sys.argv[1])
rag = RAG(agent=Agent('store_builder'), vector_store=store, splitter={BBF_SPLITTER}, llm_name='gpt')
with open(sys.argv[2], 'rb') as pdf:  # a file a user uploaded in BAF's chat (BAF's example: rag.add_file)
    rag.add_file(File(file_name='troubleshooting.pdf', file_type='application/pdf',
                      file_base64=base64.b64encode(pdf.read()).decode()))
print(store._collection.count())
'''

BUILD_WITH_LANGCHAIN = '''
import sys
from langchain_chroma import Chroma
from langchain_community.document_loaders import PyPDFLoader
from langchain_text_splitters import RecursiveCharacterTextSplitter
from rag_plugin import default_embeddings
store = Chroma(collection_name=sys.argv[3], embedding_function=default_embeddings(), persist_directory=sys.argv[1])
pages = PyPDFLoader(sys.argv[2]).load()
store.add_documents(RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=100).split_documents(pages))
print(store._collection.count())
'''


def _build(script: str, *args) -> int:
    done = subprocess.run([sys.executable, '-c', script, *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return int(done.stdout.strip().splitlines()[-1])


def _page_of(pdf: Path, text: str) -> int:
    import pypdf
    return next(i + 1 for i, page in enumerate(pypdf.PdfReader(str(pdf)).pages) if text in page.extract_text())


@pytest.fixture(scope='module')
def framework_store(tmp_path_factory) -> tuple[Path, int]:
    """A store filled by the installed framework's own RAG on data/pdfs (BBF 1.5's load_pdfs, BAF 4.5's
    load_documents), started twice (every chunk twice)."""
    folder = tmp_path_factory.mktemp(framework.NAME) / 'vector_store'
    total = _build(BUILD_WITH_FRAMEWORK[framework.NAME], folder, PDFS, 2)
    return folder, total


def _copy(store: tuple[Path, int], tmp_path: Path) -> Path:
    import shutil
    folder = tmp_path / 'vector_store'
    shutil.copytree(store[0], folder)
    return folder


class CountingEmbeddings:
    """The default embeddings, counting the texts they embed for documents."""

    def __init__(self, inner):
        self.inner, self.documents = inner, 0
        self.model_id, self.variant = inner.model_id, inner.variant

    def embed_documents(self, texts):
        self.documents += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


def _rag(store, splitter=None):
    """A RAG on a store another tool filled, splitting as BBF's example bot does unless told otherwise."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    return build_rag(store, splitter=splitter or RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=100))


def _assert_cites_nn7720(rag):
    message = rag.run(message='What does error NN-7720 mean?')
    assert not message.abstained, message.answer
    assert 'integrity check of the local offline cache failed' in message.answer
    cited = [s for s in message.sources if s['cited']]
    page = _page_of(PDFS / 'troubleshooting.pdf', 'NN-7720')
    assert cited and all(s['source'] == 'troubleshooting.pdf' and s['page'] == page for s in cited), message.sources
    assert all(isinstance(s['chunk_id'], str) and s['chunk_id'] for s in message.sources)
    # BBF's UI shows the docs' metadata: the file name and the page a person opens
    for doc in message.to_dict()['docs']:
        assert doc['metadata']['source'].endswith('.pdf') and '/' not in doc['metadata']['source']
        assert doc['metadata']['page'] >= 1
    return message


def _unique_chunks(vector_store) -> int:
    got = vector_store._collection.get(include=['documents', 'metadatas'])
    return len({(m.get('source'), m.get('page'), d) for d, m in zip(got['documents'], got['metadatas'])})


def test_a_framework_store_opened_by_folder_answers_at_once_and_ingesting_its_files_adopts_it(framework_store, tmp_path,
                                                                                             embeddings):
    from rag_plugin import default_vector_store
    folder = _copy(framework_store, tmp_path)
    counting = CountingEmbeddings(embeddings)
    store = default_vector_store(str(folder), counting)
    assert store._collection.name == 'langchain' and store._collection.count() == framework_store[1]
    assert not store._collection.metadata  # the framework's collection settings (l2) are kept, not overwritten
    rag = _rag(store)
    before = _assert_cites_nn7720(rag)
    check = rag.ingestor.check_store(detail=True)
    assert check.ok and len(check.foreign) == framework_store[1] and 'not in the ledger' in check.summary()

    unique = _unique_chunks(store)
    assert unique * 2 == framework_store[1]  # every chunk twice: the bot started twice
    counting.documents = 0  # (the extractive answer embedded its fragments' sentences)
    report = rag.load_pdfs(str(PDFS))
    assert store._collection.count() == unique  # one copy of each chunk, now ours
    assert report == unique and counting.documents == 0  # the same texts: every vector reused, none embedded
    check = rag.ingestor.check_store(detail=True)
    assert check.ok and not check.foreign and check.ledger == unique
    after = _assert_cites_nn7720(rag)
    assert [s['score'] for s in after.sources] == [s['score'] for s in before.sources]
    assert all(s['chunk_id'].count('-') == 1 for s in after.sources)  # our ids: <document_id>-<position>

    counting.documents = 0
    again = rag.ingest(str(PDFS))
    assert again.chunks_added == 0 and again.chunks_unchanged == unique and counting.documents == 0


def test_a_framework_store_passed_as_the_users_chroma_object_answers_and_is_adopted(framework_store, tmp_path,
                                                                                     embeddings):
    from langchain_community.vectorstores import Chroma
    folder = _copy(framework_store, tmp_path)
    store = Chroma(embedding_function=embeddings, persist_directory=str(folder))  # as in BBF's and BAF's examples
    rag = _rag(store)
    assert rag.run_retrieval('What does error NN-7720 mean?')  # was: ValueError: Expected ID to be a str, got None
    _assert_cites_nn7720(rag)
    unique = _unique_chunks(store)
    rag.load_pdfs(str(PDFS))
    assert store._collection.count() == unique
    _assert_cites_nn7720(rag)


def test_another_splitter_replaces_the_foreign_chunks_with_its_own(framework_store, tmp_path, embeddings):
    """The plugin's own splitter cuts other chunks: they are embedded, and the foreign ones go (no mix of both)."""
    from rag_plugin import default_splitter, default_vector_store
    folder = _copy(framework_store, tmp_path)
    store = default_vector_store(str(folder), embeddings)
    rag = _rag(store, default_splitter())
    report = rag.ingest(str(PDFS))
    assert report.chunks_adopted == framework_store[1]
    assert store._collection.count() == report.chunks_added
    assert rag.ingestor.check_store(detail=True).ok
    _assert_cites_nn7720(rag)


def test_a_langchain_chroma_store_is_found_answered_and_adopted(tmp_path, embeddings):
    from rag_plugin import default_vector_store
    folder = tmp_path / 'lc'
    n = _build(BUILD_WITH_LANGCHAIN, folder, PDFS / 'troubleshooting.pdf', 'docs')
    store = default_vector_store(str(folder), embeddings)
    assert store._collection.name == 'docs' and store._collection.count() == n
    rag = _rag(store)
    _assert_cites_nn7720(rag)
    rag.ingest(str(PDFS / 'troubleshooting.pdf'))
    assert store._collection.count() == n and rag.ingestor.check_store(detail=True).ok


def test_stats_says_the_chunks_are_not_in_the_ledger(framework_store, tmp_path):
    folder = _copy(framework_store, tmp_path)
    for command in (['stats'], ['stats', '--check'], ['stats', '--json']):
        done = subprocess.run([sys.executable, '-m', 'rag_plugin', *command, '--store', str(folder)],
                              capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert done.returncode == 0, done.stderr
        if command[-1] == '--json':
            assert json.loads(done.stdout)['chunks_in_store'] == framework_store[1]
        else:
            assert f'{framework_store[1]} chunk(s)' in done.stdout and 'not in the ledger' in done.stdout, done.stdout
            assert 'INCONSISTENT' not in done.stdout


def test_a_store_of_another_embedding_size_is_refused_with_one_line(tmp_path, embeddings):
    """BBF's example bot embeds with OpenAI (1536 dimensions): opened with the bundled model, every question would
    fail with "I can't search the documents right now"."""
    script = '''
import sys
import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_community.vectorstores import Chroma
class Wide(Embeddings):
    def embed_documents(self, texts): return [self.embed_query(t) for t in texts]
    def embed_query(self, text):
        v = np.random.default_rng(len(text)).normal(size=1536)
        return list(v / np.linalg.norm(v))
store = Chroma(embedding_function=Wide(), persist_directory=sys.argv[1])
store.add_texts(['Error NN-7720 means that the local cache is damaged.'], metadatas=[{'source': 'a.pdf', 'page': 0}])
print(1)
'''
    folder = tmp_path / 'wide'
    _build(script, folder)
    from rag_plugin import default_vector_store
    from rag_plugin.ingest.fingerprint import SettingsChanged
    with pytest.raises(SettingsChanged, match='1536-dimensional vectors'):
        _rag(default_vector_store(str(folder), embeddings))
    done = subprocess.run([sys.executable, '-m', 'rag_plugin', 'ask', 'What does NN-7720 mean?', '--store',
                           str(folder)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 2 and 'Traceback' not in done.stderr
    assert done.stderr.strip().count('\n') == 0 and '1536-dimensional' in done.stderr


def test_a_folder_with_several_filled_collections_asks_which_one(tmp_path, embeddings):
    folder = tmp_path / 'two'
    _build(BUILD_WITH_LANGCHAIN, folder, PDFS / 'troubleshooting.pdf', 'first')
    _build(BUILD_WITH_LANGCHAIN, folder, PDFS / 'getting_started.pdf', 'second')
    from rag_plugin import default_vector_store
    with pytest.raises(ValueError, match="'first'.*'second'.*collection_name"):
        default_vector_store(str(folder), embeddings)
    store = default_vector_store(str(folder), embeddings, collection_name='second')
    assert store._collection.name == 'second' and store._collection.count() > 0


@pytest.mark.baf
def test_a_store_filled_by_bafs_add_file_answers_with_the_page(tmp_path, embeddings):
    """BAF's ``add_file`` (a file uploaded in BAF's chat) loads it from a temporary file, so its chunks' ``source`` is
    that temporary file's path, not the upload's name: the plugin answers from them with the page, and can only name
    the file BAF stored."""
    from rag_plugin import default_vector_store
    folder = tmp_path / 'uploaded'
    n = _build(BUILD_WITH_BAF_UPLOAD, folder, PDFS / 'troubleshooting.pdf')
    store = default_vector_store(str(folder), embeddings)
    assert store._collection.count() == n > 0
    rag = _rag(store)
    message = rag.run(message='What does error NN-7720 mean?')
    assert 'integrity check of the local offline cache failed' in message.answer and not message.abstained
    cited = [s for s in message.sources if s['cited']]
    assert cited and cited[0]['page'] == _page_of(PDFS / 'troubleshooting.pdf', 'NN-7720')
    stored = store._collection.get(limit=1, include=['metadatas'])['metadatas'][0]['source']
    assert cited[0]['source'] == Path(stored).name and stored.endswith('.pdf')
