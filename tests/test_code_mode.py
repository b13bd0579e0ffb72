"""Code mode: source trees are split by language, each chunk knows its file, 1-based line range and enclosing
symbol, and a question about one function gets the right file, function and lines."""
from pathlib import Path

import pytest
from conftest import ROOT
from helpers import build_rag

TREE = ROOT / 'tests' / 'fixtures' / 'code_tree'
CODE_FILES = {'billing/__init__.py', 'billing/invoice.py', 'web/utils.js', 'Main.java', 'server.go'}


def span(relative: str, starts_with: str) -> tuple[int, int]:
    """The 1-based lines of the block that starts with ``starts_with`` in a fixture file (by indentation)."""
    lines = (TREE / relative).read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.strip().startswith(starts_with))
    indent = len(lines[first]) - len(lines[first].lstrip())
    last = first
    for j in range(first + 1, len(lines)):
        if not lines[j].strip():
            continue
        if len(lines[j]) - len(lines[j].lstrip()) <= indent:
            last = j if lines[j].strip()[0] in '})' else last
            break
        last = j
    return first + 1, last + 1


@pytest.fixture(scope='module')
def code_rag(tmp_path_factory, embeddings):
    """A RAG over the fixture tree, ingested once for this module (tests only read it)."""
    from rag_plugin import default_vector_store
    rag = build_rag(default_vector_store(str(tmp_path_factory.mktemp('code') / 'store'), embeddings))
    report = rag.ingest(str(TREE))
    assert not report.skipped, report
    return rag


def chunks(rag) -> list[tuple[str, dict]]:
    data = rag.vector_store.get(include=['documents', 'metadatas'])
    return sorted(zip(data['documents'], data['metadatas']), key=lambda p: (p[1]['source_id'], p[1]['chunk_index']))


def test_every_chunk_knows_its_file_exact_lines_and_section(code_rag):
    seen = set()
    for text, m in chunks(code_rag):
        seen.add(m['source_id'])
        assert 'page' not in m, 'code and Markdown have no pages'
        lines = (TREE / m['source_id']).read_text().splitlines()
        assert 1 <= m['line_start'] <= m['line_end'] <= len(lines)
        assert text == '\n'.join(lines[m['line_start'] - 1:m['line_end']]).strip(), m
    assert seen == CODE_FILES | {'README.md'}
    by_section = {(m['source_id'], m.get('section')) for _, m in chunks(code_rag)}
    assert {('billing/invoice.py', 'apply_discount'), ('billing/invoice.py', 'Invoice'),
            ('web/utils.js', 'formatPrice'), ('Main.java', 'Main'), ('server.go', 'Server'),
            ('README.md', 'Shop services')} <= by_section
    languages = {m['source_id']: m.get('language') for _, m in chunks(code_rag)}
    assert languages['billing/invoice.py'] == 'python' and languages['server.go'] == 'go'
    assert languages['web/utils.js'] == 'js' and languages['Main.java'] == 'java' and languages['README.md'] is None


def test_declarations_and_enclosing_symbols_per_language():
    from langchain_text_splitters import Language

    from rag_plugin.ingest.code import enclosing, find_declarations
    python = ('import x\n\n\nclass A:\n    """Doc."""\n\n    @property\n    def b(self):\n        return 1\n\n\n'
              'def c():\n    def inner():\n        pass\n    return inner\n\nVALUE = 1\n')
    found = {d.name: (d.line, d.end) for d in find_declarations(python, Language.PYTHON)}
    assert found == {'A': (4, 9), 'A.b': (8, 9), 'c': (12, 15), 'c.inner': (13, 14)}
    declarations = find_declarations(python, Language.PYTHON)
    assert enclosing(declarations, 9, 8).name == 'A.b'
    assert enclosing(declarations, 14, 8).name == 'c.inner'
    assert enclosing(declarations, 17, 0) is None
    go = 'package main\n\nfunc (s *Server) Handle(w http.ResponseWriter) {\n\tfmt.Println("x")\n}\n'
    assert [(d.name, d.line, d.end) for d in find_declarations(go, Language.GO)] == [('Server.Handle', 3, 5)]
    java = ('class A {\n    public int size() {\n        return items.size();\n    }\n'
            '    void run() throws IOException {\n        if (x) {\n            call(y);\n        }\n    }\n}\n')
    assert [d.name for d in find_declarations(java, Language.JAVA)] == ['A', 'A.size', 'A.run']
    ts = 'export const load = async (id: string): Promise<Item> => {\n  return get(id);\n};\n' \
         'export interface Item {\n  id: string;\n}\n'
    assert [d.name for d in find_declarations(ts, Language.TS)] == ['load', 'Item']


def test_a_question_about_a_function_gets_its_file_name_and_lines(code_rag):
    start, end = span('billing/invoice.py', 'def apply_discount')
    package = code_rag.retrieve_context('What does the function apply_discount do?')
    assert (package['mode'], package['intent']) == ('codigo', 'specific')
    top = package['items'][0]
    assert top['source_id'] == 'billing/invoice.py' and top['section'] == 'apply_discount'
    assert top['line_start'] <= start and end <= top['line_end'] and 'page' not in top
    assert top['focus'] == {'symbol': 'apply_discount', 'lineStart': start, 'lineEnd': end}
    assert any('apply_discount' in p and 'never' in p for p in package['critical_points'])
    result = code_rag.answer_context('What does the function apply_discount do?')
    citation = result['citations'][0]
    assert (citation['source_id'], citation['sectionTitle'], citation['lineStart'], citation['lineEnd']) == (
        'billing/invoice.py', 'apply_discount', start, end)
    assert f'apply_discount in billing/invoice.py, lines {start}-{end} [1]' in result['answer']
    assert 'def apply_discount(amount: float, percent: float)' in result['answer']


@pytest.mark.parametrize('question, source_id, symbol, starts_with', [
    ('What does Cart.countItems() return?', 'web/utils.js', 'Cart.countItems', 'countItems()'),
    ('What does the placeOrder method do with a blank SKU?', 'Main.java', 'Main.placeOrder', 'public void placeOrder'),
    ('What does HandleHealth write to the response?', 'server.go', 'Server.HandleHealth',
     'func (s *Server) HandleHealth'),
    ('How is add_tax computed?', 'billing/invoice.py', 'add_tax', 'def add_tax'),
])
def test_functions_in_every_language(code_rag, question, source_id, symbol, starts_with):
    result = code_rag.answer_context(question)
    assert result['mode'] == 'codigo'
    citation = result['citations'][0]
    assert (citation['source_id'], citation['sectionTitle']) == (source_id, symbol)
    assert (citation['lineStart'], citation['lineEnd']) == span(source_id, starts_with)


def test_auto_mode_and_code_bootstrap(code_rag, make_rag):
    assert code_rag.retrieve_context('How are orders placed?')['mode'] == 'codigo'  # a code tree: code mode
    assert code_rag.retrieve_context('What does the README say?', mode='documental')['mode'] == 'documental'
    bootstrap = code_rag.retrieve_context('')
    assert (bootstrap['mode'], bootstrap['intent']) == ('codigo', 'bootstrap')
    assert {i['source_id'] for i in bootstrap['items']} == CODE_FILES | {'README.md'}
    assert {'apply_discount', 'Main', 'formatPrice'} & set(bootstrap['topics'])
    rag = make_rag()  # documents only: questions with code-ish words stay documental
    assert rag.retrieve_context('Which payment methods are accepted?')['mode'] == 'documental'


def test_mixed_store_picks_the_mode_from_the_question(make_rag):
    rag = make_rag()
    rag.ingest(str(TREE / 'billing'))
    assert rag.retrieve_context('How much does the Team plan cost?')['mode'] == 'documental'
    package = rag.retrieve_context('What does apply_discount() do?')
    assert package['mode'] == 'codigo' and package['items'][0]['source_id'] == 'invoice.py'
    scoped = rag.retrieve_context('', source_id='invoice.py')
    assert scoped['mode'] == 'codigo' and {i['source_id'] for i in scoped['items']} == {'invoice.py'}


def test_code_scope_by_folder(code_rag):
    package = code_rag.retrieve_context('How is the total of an invoice computed?', source_ref='billing/', k=10)
    assert package['items'] and {i['source_id'] for i in package['items']} <= {'billing/invoice.py',
                                                                                 'billing/__init__.py'}
    bootstrap = code_rag.retrieve_context('', source_ref='web/')
    assert {i['source_id'] for i in bootstrap['items']} == {'web/utils.js'}


def test_markdown_front_matter_and_lines():
    from rag_plugin.ingest.loaders import load_markdown
    loaded = load_markdown(Path('rules.md'), b'---\ncritical: true\ntags: [rules, Team Policy]\ntitle: House rules\n'
                                             b'---\n# Rules\n\nNever push to main.\n')
    page = loaded.pages[0]
    assert loaded.title == 'House rules' and page.page_content.startswith('# Rules')
    assert page.metadata['line_start'] == 6 and page.metadata['critical'] is True
    assert page.metadata['tags'] == 'rules,Team_Policy' and page.metadata['tag:Team_Policy'] is True
    plain = load_markdown(Path('x.md'), b'# Title\n\ntext\n').pages[0].metadata
    assert plain['line_start'] == 1 and 'critical' not in plain and 'tags' not in plain
