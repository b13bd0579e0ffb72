"""The documentation holds together: a short README for users, every link and anchor leads somewhere, every section
the code cites exists, and the configuration table is the code's.

``docs/configuration.md``'s settings table is generated from :data:`rag_plugin.settings.SETTINGS`; after changing a
setting, regenerate it with ``python tests/test_docs.py --write``.
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / 'README.md'
DOCS = ROOT / 'docs'
CONFIGURATION = DOCS / 'configuration.md'
CODE_FOLDERS = ('rag_plugin', 'benchmarks', 'bots')

MAX_README_LINES = 300
SETUP_COMMANDS = [
    'make demo   # creates .venv, installs everything, starts the demo bot + web chat on the embedded default',
    'make test   # creates .venv (BBF) and .venv-baf (BAF), installs everything, runs the whole test suite on both',
]
TABLE_START = '<!-- Generated from rag_plugin.settings.SETTINGS'
TABLE_END = '<!-- End of the generated table. -->'
REGENERATE = 'python tests/test_docs.py --write'

_FENCE = re.compile(r'^(```|~~~).*?^\1[ \t]*$', re.M | re.S)
_HEADING = re.compile(r'^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$', re.M)
_LINK = re.compile(r'\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
# README, "Section" / README "Section" / README section "Section" / README.md, "Section"
_README_REFERENCE = re.compile(r'\bREADME(?:\.md)?,?(?:\s+section)?\s+"([^"]+)"')
# docs/page.md, optionally followed by a quoted section: docs/page.md, "Section" / docs/page.md "Section"
_DOCS_REFERENCE = re.compile(r'\bdocs/([\w.-]+\.md)(?:,?(?:\s+section)?\s+"([^"]+)")?')


def _pages() -> list:
    return [README, *sorted(DOCS.glob('*.md'))]


def _prose(text: str) -> str:
    """The text without fenced code blocks (a ``# comment`` in a block is no heading, a ``](x)`` in one no link)."""
    return _FENCE.sub(lambda block: '\n' * block.group(0).count('\n'), text)  # lines keep their numbers


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', heading).lower()
    return re.sub(r'[^\w\- ]', '', text).replace(' ', '-')


def _headings(path: Path) -> list:
    return [m.group(2) for m in _HEADING.finditer(_prose(path.read_text(encoding='utf-8')))]


def _anchors(path: Path) -> set:
    anchors, seen = set(), {}
    for heading in _headings(path):
        slug = _slug(heading)
        anchors.add(slug if slug not in seen else f'{slug}-{seen[slug]}')
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _section(text: str, title: str) -> str:
    start = text.index(f'\n## {title}\n')
    end = text.find('\n## ', start + 1)
    return text[start:end if end > 0 else None]


def _generated_table(text: str) -> str:
    start = text.index(TABLE_START)
    start = text.index('-->\n', start) + len('-->\n')
    return text[start:text.index(TABLE_END, start)]


def _line(text: str, offset: int) -> int:
    return text.count('\n', 0, offset) + 1


def test_the_readme_is_short_and_has_exactly_the_two_set_up_commands():
    text = README.read_text(encoding='utf-8')
    lines = text.splitlines()
    assert len(lines) <= MAX_README_LINES, f'README.md has {len(lines)} lines (at most {MAX_README_LINES}): ' \
                                           'move the details to a page of docs/'
    block = re.search(r'```bash\n(.*?)```', _section(text, 'Set-up (fresh machine, Python 3.11)'), re.S).group(1)
    assert block.splitlines() == SETUP_COMMANDS
    code = '\n'.join(m.group(0) for m in _FENCE.finditer(text))
    set_up = [line.strip() for line in code.splitlines()
              if re.match(r'\s*(make\b|pip3? install|python3?(\.\d+)? -m (pip|venv)\b)', line)]
    assert set_up == SETUP_COMMANDS, 'the README shows a set-up command besides make demo and make test'
    assert set(re.findall(r'\bmake ([\w-]+)', text)) == {'demo', 'test'}


def test_the_readme_keeps_what_other_tests_run():
    """tests/test_http_api.py runs the README's one curl line; tests/test_bbf_ui.py the first Python block of
    "Switching a BBF bot"."""
    text = README.read_text(encoding='utf-8')
    assert len([line for line in text.replace('\\\n', ' ').splitlines() if line.startswith('curl ')]) == 1
    snippet = re.search(r'```python\n(.*?)```', text[text.index('## Switching a BBF bot'):], re.S).group(1)
    assert 'from rag_plugin import RAG, RAGMessage' in snippet and 'bot.run()' in snippet


def test_the_languages_section_is_short_and_points_to_the_measurements():
    section = _section(README.read_text(encoding='utf-8'), 'Languages and embedding models').strip()
    assert len(section.splitlines()) <= 25, 'keep "Languages and embedding models" short: details in docs/embeddings.md'
    assert '(docs/embeddings.md)' in section


def test_every_docs_page_starts_with_a_title_and_a_paragraph_and_the_readme_links_it():
    readme = README.read_text(encoding='utf-8')
    for page in sorted(DOCS.glob('*.md')):
        lines = page.read_text(encoding='utf-8').splitlines()
        assert lines[0].startswith('# ') and lines[1] == '' and lines[2].strip(), page.name
        assert not lines[2].startswith(('#', '|', '```', '- ', '<!--')), f'{page.name}: a paragraph after the title'
        assert f'(docs/{page.name})' in readme, f'README.md does not link docs/{page.name}'


def test_every_relative_link_leads_to_a_file_and_heading_that_exist():
    broken = []
    for page in _pages():
        text = _prose(page.read_text(encoding='utf-8'))
        text = re.sub(r'`[^`\n]*`', '', text)  # a code span is no link
        for match in _LINK.finditer(text):
            target = match.group(1)
            if re.match(r'[a-z][a-z+.-]*:', target):  # https:, mailto:
                continue
            path, _, anchor = target.partition('#')
            where = f'{page.relative_to(ROOT)}:{_line(text, match.start())}: {target}'
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f'{where} (no such file)')
            elif anchor and linked.suffix == '.md' and anchor not in _anchors(linked):
                broken.append(f'{where} (no such heading in {linked.relative_to(ROOT)})')
    assert not broken, 'broken links:\n' + '\n'.join(broken)


def test_every_section_the_code_names_exists():
    """A docstring or comment that sends the reader to README "Section" (or docs/page.md "Section") finds that
    heading: in README.md or any page of docs/ (a section moved from the README to docs/ still counts)."""
    headings = set()
    for page in _pages():
        for heading in _headings(page):
            headings.update({heading, heading.replace('`', '')})
    missing = []
    for folder in CODE_FOLDERS:
        for source in sorted((ROOT / folder).rglob('*.py')):
            text = source.read_text(encoding='utf-8')
            where = source.relative_to(ROOT)
            for match in _README_REFERENCE.finditer(text):
                title = re.sub(r'\s*\n\s*(?:#\s*)?', ' ', match.group(1)).strip()
                if title not in headings:
                    missing.append(f'{where}:{_line(text, match.start())}: README "{title}" (no such heading)')
            for match in _DOCS_REFERENCE.finditer(text):
                page, title = DOCS / match.group(1), match.group(2)
                if not page.exists():
                    missing.append(f'{where}:{_line(text, match.start())}: docs/{match.group(1)} (no such file)')
                elif title:
                    title = re.sub(r'\s*\n\s*(?:#\s*)?', ' ', title).strip()
                    if title not in {h for heading in _headings(page) for h in (heading, heading.replace('`', ''))}:
                        missing.append(f'{where}:{_line(text, match.start())}: docs/{match.group(1)} "{title}" '
                                       '(no such heading)')
    assert not missing, 'sections named by the code that no page has:\n' + '\n'.join(missing)


def test_the_configuration_page_is_current():
    from rag_plugin.settings import markdown_table
    assert _generated_table(CONFIGURATION.read_text(encoding='utf-8')) == markdown_table(), \
        f'docs/configuration.md is out of date with rag_plugin.settings.SETTINGS: run `{REGENERATE}`'


def write_configuration_table() -> None:
    """Regenerate the settings table of docs/configuration.md from the code."""
    from rag_plugin.settings import markdown_table
    text = CONFIGURATION.read_text(encoding='utf-8')
    old = _generated_table(text)
    CONFIGURATION.write_text(text.replace(old, markdown_table(), 1), encoding='utf-8')


if __name__ == '__main__':
    if sys.argv[1:] != ['--write']:
        sys.exit(f'usage: {REGENERATE}')
    sys.path.insert(0, str(ROOT))
    write_configuration_table()
    print(f'wrote {CONFIGURATION.relative_to(ROOT)}')
