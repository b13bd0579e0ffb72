"""Word frequencies from the compact table (rag_plugin.text.frequency): wordfreq's own values, without wordfreq's
dict of every word in the bot's process (30-47 MB there)."""
import json
import random
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT
from helpers import subprocess_env

ODD = ['2024', 'e-4012', 'NN-7720', '3.5', '1,000', 'prior-authorization', "can't", "l'alta", '', '   ', 'Hello',
       'CAFÉ', 'café', 'año', 'què', 'helth', 'zzqqx', '401k', 'x86_64', 'in-network', 'pwd', '2fa', 'covid-19', '½']


@pytest.mark.parametrize('lang', ['en', 'es', 'ca'])
def test_the_table_gives_wordfreqs_own_values(lang):
    from wordfreq import get_frequency_list, zipf_frequency
    from rag_plugin.text.frequency import zipf
    words = [w for bucket in get_frequency_list(lang) for w in bucket]
    sample = random.Random(7).sample(words, 1500) + words[:50] + words[-50:] + ODD
    wrong = [(w, zipf(w, lang), zipf_frequency(w, lang)) for w in sample if zipf(w, lang) != zipf_frequency(w, lang)]
    assert not wrong


ASK = textwrap.dedent('''
    import json, sys
    import wordfreq
    from helpers import build_rag
    from rag_plugin import default_vector_store
    rag = build_rag(default_vector_store(sys.argv[1]))
    rag.add_text('Reset your VPN password from the portal; the helpdesk answers within 2 days.', {'source_id': 'it.txt'})
    message = rag.run('how do i reset my vpn pasword')
    from rag_plugin.text import is_common_english
    print(json.dumps({'outcome': message.outcome, 'common': is_common_english('password'),
                      'typo': is_common_english('pasword'), 'dict': wordfreq.get_frequency_dict.cache_info().currsize}))
''')


def test_a_bot_answers_without_wordfreqs_dict_in_its_process(tmp_path):
    done = subprocess.run([sys.executable, '-c', ASK, str(tmp_path / 'store')], capture_output=True, text=True,
                          cwd=str(ROOT / 'tests'), env=subprocess_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got == {'outcome': 'answer', 'common': True, 'typo': False, 'dict': 0}


def test_a_damaged_table_is_written_again(tmp_path, monkeypatch):
    from rag_plugin.text import frequency
    monkeypatch.setattr(frequency, 'DEFAULT_CACHE_DIR', str(tmp_path))
    monkeypatch.setattr(frequency, '_tables', {})
    path = frequency.table_path('ca')
    assert path.startswith(str(tmp_path))
    assert frequency.table('ca').bucket('casa') is not None  # written by a child process
    with open(path, 'wb') as f:
        f.write(b'not a table')
    monkeypatch.setattr(frequency, '_tables', {})
    assert frequency.table('ca').bucket('casa') is not None
    monkeypatch.setattr(frequency, '_tables', {})
    with open(path, 'wb') as f:
        f.write(b'not a table')
    monkeypatch.setattr(frequency, '_write_in_child', lambda lang, path: open(path, 'wb').write(b'still broken'))
    assert frequency.table('ca') is None  # cannot be written: wordfreq answers in-process, nothing breaks
    assert frequency.zipf.__wrapped__('casa', 'ca') > 5
