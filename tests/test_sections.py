"""The section shown for a snippet is the section the snippet is in: a chunk is labelled by the section holding most
of its text, and one that runs through several sections knows where each starts."""
from pathlib import Path

from conftest import PDFS

from rag_plugin.channels.webchat_ui import render
from rag_plugin.ingest.chunking import chunk_section, main_section, section_spans
from rag_plugin._section_spans import encode_spans, parse_spans, section_at


def test_a_chunk_is_labelled_by_the_section_holding_most_of_its_text():
    headings = [(0, 'A'), (300, 'B'), (1000, 'C')]
    spans = section_spans(250, 600, headings, None)  # 250..850: 50 characters of A, then B
    assert spans == [(0, 'A'), (50, 'B')] and main_section(spans, 600) == 'B'
    assert section_spans(280, 600, headings, None) == [(0, 'B')]  # a heading near the top names the chunk
    assert main_section(section_spans(0, 500, headings, None), 500) == 'A'  # 300 of A, 200 of B
    assert section_spans(0, 200, [(100, 'A')], 'Carried') == [(0, 'Carried'), (100, 'A')]
    assert main_section([(0, None), (400, 'A')], 500) is None  # mostly text before any heading
    # a chunk that starts with a heading is named by it (a document's title heading names its first chunk)
    assert chunk_section(0, 900, [(0, 'Title'), (100, 'Layout')], None) == 'Title'
    assert chunk_section(250, 600, headings, None) == 'B'


def test_the_section_at_an_offset_comes_from_the_spans():
    metadata = {'section': 'B', 'section_spans': encode_spans([(0, 'A'), (50, 'B'), (70, None)])}
    assert parse_spans(metadata['section_spans']) == [(0, 'A'), (50, 'B')]
    assert [section_at(metadata, o) for o in (0, 49, 50, 500)] == ['A', 'A', 'B', 'B']
    assert section_at({'section': 'Only'}, 300) == 'Only'  # chunks stored before spans existed
    assert section_at({'section': 'X', 'section_spans': '[[10, "Y"]]'}, 5) is None
    assert parse_spans('not json') == [] and parse_spans('[[true, "x"], ["1", "y"], [3]]') == []


def troubleshooting_chunks():
    from rag_plugin.defaults import default_splitter
    from rag_plugin.ingest.loaders import load_file
    from rag_plugin.ingest.pipeline import Ingestor
    ingestor = Ingestor.__new__(Ingestor)  # only its chunker: no store, no ledger
    ingestor.splitter = default_splitter()
    return ingestor.chunk(load_file(Path(PDFS / 'troubleshooting.pdf')), 'troubleshooting.pdf', 'doc')


def test_the_nn_7720_chunk_is_labelled_nn_7720_and_its_snippets_by_where_they_start():
    chunk = next(c for c in troubleshooting_chunks() if 'Error NN-7720 means' in c.page_content)
    assert chunk.page_content.lstrip().startswith('usually because it contains a very large pasted table')
    assert chunk.metadata['section'] == 'NN-7720: local cache damaged'  # was 'NN-4090: note too large to sync'
    doc = {'content': chunk.page_content, 'metadata': chunk.metadata}
    answer = 'Open Settings > Advanced and select Rebuild local cache [1].'
    cited = render.source_html(1, doc, cited=True, focus=answer)
    assert 'Rebuild local cache' in cited and '§ NN-7720: local cache damaged' in cited
    uncited = render.source_html(2, doc, cited=False)  # the snippet starts at the chunk's start: NN-4090's text
    assert 'usually because it contains a very large pasted table' in uncited
    assert '§ NN-4090: note too large to sync' in uncited


def test_the_web_chat_shows_the_section_of_the_cited_snippet_end_to_end(make_rag):
    rag = make_rag()
    result = rag.run(message='How do I fix error NN-7720?')
    assert not result.abstained
    message = result.to_dict()
    html = render.sources_html(message)
    cited = [d for n, d in enumerate(message['docs'], start=1) if n in message['cited']]
    assert any('Rebuild local cache' in d['content'] for d in cited)
    assert '§ NN-7720: local cache damaged' in html
    assert '§ NN-4090' not in html.split('Rebuild local cache')[0].rsplit('rag-source-head', 1)[-1]
    # every heading a chunk runs through is a topic of its document, NN-4012 and NN-7720 included
    sections = rag.context.catalog.documents()['troubleshooting.pdf'].sections
    assert {'NN-4012: sync conflict', 'NN-4090: note too large to sync', 'NN-7720: local cache damaged'} <= set(sections)
    assert sections.index('NN-4012: sync conflict') < sections.index('NN-4090: note too large to sync') < \
        sections.index('NN-7720: local cache damaged')


def test_markdown_chunks_know_their_sections_too(make_rag):
    rag = make_rag()
    text = ('# Field guide\n\n' + 'Intro line about the field guide. ' * 3 + '\n\n## Ferns\n\n'
            + 'Ferns like shade and damp soil; water them twice a week in summer. ' * 7)
    rag.add_text(text, {'source_id': 'field_guide.md'})
    got = rag.vector_store.get(where={'source_id': 'field_guide.md'}, include=['metadatas', 'documents'])
    first = min(zip(got['metadatas'], got['documents']), key=lambda pair: pair[0]['chunk_index'])
    metadata, content = first
    assert metadata['section'] == 'Field guide'  # the title heading at its top names it
    assert [h for _, h in parse_spans(metadata['section_spans'])] == ['Field guide', 'Ferns']
    doc = {'content': content, 'metadata': metadata}
    assert '§ Field guide' in render.source_html(1, doc, False)
    assert '§ Ferns' in render.source_html(1, doc, True, focus='Water ferns twice a week in summer [1].')
