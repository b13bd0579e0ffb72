"""The README and the docs say what the code does: every default they quote is the code's, and the commands a user
copies from a clone of the repository use only what the repository ships. Each check reads the page that now holds
the section (the README's details moved to docs/)."""
import re

from conftest import ROOT

DOCS = ROOT / 'docs'


def _section(page: str, title: str) -> str:
    text = (ROOT / page).read_text(encoding='utf-8')
    start = text.index(f'\n## {title}\n')
    end = text.find('\n## ', start + 1)
    return text[start:end if end > 0 else None]


def _shown(value) -> str:
    return 'none' if value is None else str(value)


def test_the_configuration_table_shows_every_settings_default():
    from rag_plugin.settings import SETTINGS
    rows = dict(re.findall(r'^\| `rag\.(\w+)` \| `([^`]*)` \|', _section('docs/configuration.md', 'Settings'), re.M))
    assert set(rows) == set(SETTINGS)
    for name, setting in SETTINGS.items():
        assert rows[name] == _shown(setting.default_value), name


def test_the_guard_section_quotes_the_defaults_of_the_code():
    from rag_plugin.settings import SETTINGS
    quoted = re.findall(r'`(\w+)` \(default \*\*([\d.]+)\*\*',
                        _section('docs/guard-and-outcomes.md', 'The guard and graded answers'))
    assert {name for name, _ in quoted} >= {'relevance_threshold', 'max_unknown', 'min_coverage'}
    from rag_plugin.embeddings.calibration import MINILM
    for name, value in quoted:
        if name in SETTINGS:  # a threshold without a default of its own is the bundled model's calibration
            default = SETTINGS[name].default_value
            assert float(value) == (getattr(MINILM, name) if default is None else default), name


def test_the_first_evaluation_commands_run_on_what_the_repository_ships():
    text = (DOCS / 'retrieval-quality.md').read_text(encoding='utf-8')
    block = re.search(r'```bash\n(.*?)```', text, re.S).group(1)
    paths = re.findall(r'--(?:pdfs|qa) (\S+)', block)
    assert paths and all((ROOT / p).exists() for p in paths), paths


def test_the_readme_commands_run_on_what_the_repository_ships():
    block = re.search(r'```bash\n(.*?)```', _section('README.md', 'Command line and HTTP API'), re.S).group(1)
    paths = re.findall(r'python -m rag_plugin ingest (\S+)', block)
    assert paths and all((ROOT / p).exists() for p in paths), paths
