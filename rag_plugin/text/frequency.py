"""Word frequencies on wordfreq's Zipf scale, without wordfreq's frequency dictionary in every process.

``wordfreq.zipf_frequency`` keeps a dict of every word of a language in memory (about 320,000 English words: 30-47 MB
per process), and the guard, the lexical side, the PDF repair and the grounding check all ask it. Here the same words
and frequency buckets are kept as one sorted byte string with offsets (about 5 MB for English), written once per
wordfreq version and language into the plugin's cache folder by a child process (so that no bot process ever holds
the dict) and read by a binary search. :func:`zipf` gives ``zipf_frequency(word, lang)``'s exact value: the same
tokenisation, digit handling and rounding (wordfreq's own functions), only the lookup differs (tested against it).
"""
from __future__ import annotations

import logging
import math
import os
import subprocess
import sys
import tempfile
import threading
from array import array
from functools import lru_cache
from importlib import metadata
from typing import Optional

import numpy as np

from rag_plugin._paths import DEFAULT_CACHE_DIR

logger = logging.getLogger(__name__)

_tables: dict[str, Optional['FrequencyTable']] = {}
_lock = threading.Lock()


class FrequencyTable:
    """A language's words (sorted, UTF-8, newline-separated) and each one's frequency bucket (wordfreq's centibels).

    Args:
        blob (bytes): the words, sorted, each followed by a newline
        offsets (array): where each word starts in ``blob`` (one more at the end)
        buckets (np.ndarray): each word's bucket (its frequency is ``wordfreq.cB_to_freq(-bucket)``)
    """

    def __init__(self, blob: bytes, offsets: array, buckets: np.ndarray):
        self._blob, self._offsets, self._buckets = blob, offsets, buckets

    def bucket(self, word: str) -> Optional[int]:
        """The word's bucket, or None when wordfreq does not list it."""
        key, blob, offsets = word.encode('utf-8'), self._blob, self._offsets
        low, high = 0, len(offsets) - 1
        while low < high:
            mid = (low + high) // 2
            found = blob[offsets[mid]:offsets[mid + 1] - 1]
            if found < key:
                low = mid + 1
            elif found > key:
                high = mid
            else:
                return int(self._buckets[mid])
        return None

    @classmethod
    def from_wordfreq(cls, lang: str) -> 'FrequencyTable':
        """Build the table from wordfreq's list (loads it: done in a child process, see :func:`table`)."""
        from wordfreq import get_frequency_list
        pairs = sorted((w.encode('utf-8'), i) for i, bucket in enumerate(get_frequency_list(lang, 'best'))
                       for w in bucket)
        offsets = array('q', [0])
        for word, _ in pairs:
            offsets.append(offsets[-1] + len(word) + 1)
        return cls(b''.join(w + b'\n' for w, _ in pairs), offsets,
                   np.fromiter((i for _, i in pairs), dtype=np.uint16, count=len(pairs)))

    def save(self, path: str) -> None:
        """Write the table atomically (``.npz``)."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=os.path.dirname(path), suffix='.tmp.npz', delete=False) as f:
            np.savez(f, blob=np.frombuffer(self._blob, dtype=np.uint8), offsets=np.asarray(self._offsets),
                     buckets=self._buckets)
        os.replace(f.name, path)

    @classmethod
    def load(cls, path: str) -> 'FrequencyTable':
        """Read a saved table (OSError or ValueError when it is missing or damaged)."""
        with np.load(path) as saved:
            blob, offsets, buckets = saved['blob'].tobytes(), array('q', saved['offsets'].tolist()), saved['buckets']
        if len(offsets) != len(buckets) + 1 or offsets[-1] != len(blob):
            raise ValueError(f'{path}: a damaged word frequency table')
        return cls(blob, offsets, buckets)


def table_path(lang: str) -> str:
    """Where the table of a language is kept for the installed wordfreq."""
    return os.path.join(DEFAULT_CACHE_DIR, 'wordfreq', f'{lang}-{metadata.version("wordfreq")}.npz')


def table(lang: str) -> Optional[FrequencyTable]:
    """The language's table: read from the cache, else written there by a child process first (again when the one
    found is damaged); None when neither works (then :func:`zipf` asks wordfreq itself)."""
    with _lock:
        if lang in _tables:
            return _tables[lang]
        path, _tables[lang] = table_path(lang), None
        for attempt in range(2):
            if not os.path.exists(path):
                _write_in_child(lang, path)
            try:
                _tables[lang] = FrequencyTable.load(path)
                break
            except (OSError, ValueError, KeyError) as e:
                logger.info('word frequency table of %r not read (%s)', lang, e)
                if attempt == 0 and os.path.exists(path):
                    os.remove(path)  # damaged: written again
        return _tables[lang]


def _write_in_child(lang: str, path: str) -> None:
    code = ('import sys; from rag_plugin.text.frequency import FrequencyTable; '
            'FrequencyTable.from_wordfreq(sys.argv[1]).save(sys.argv[2])')
    try:
        subprocess.run([sys.executable, '-c', code, lang, path], check=True, timeout=120, capture_output=True,
                       env={**os.environ, 'PYTHONPATH': _package_root()})
    except (OSError, subprocess.SubprocessError) as e:
        logger.info('word frequency table of %r not written (%s): wordfreq answers in-process', lang, e)


def _package_root() -> str:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.pathsep.join([root] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p])


@lru_cache(maxsize=65536)
def zipf(word: str, lang: str = 'en') -> float:
    """``wordfreq.zipf_frequency(word, lang)``, from the compact table (see the module docstring)."""
    import wordfreq
    words = table(lang) if wordfreq.get_language_info(lang)['tokenizer'] != 'jieba' else None
    if words is None:
        return wordfreq.zipf_frequency(word, lang)
    minimum = wordfreq.zipf_to_freq(0.0)  # what zipf_frequency asks word_frequency for at least
    tokens = wordfreq.lossy_tokenize(word, lang)
    freq = minimum if not tokens else None
    one_over = 0.0
    for token in tokens:  # as wordfreq's _word_frequency combines tokens: 1/f = 1/f1 + 1/f2 + ...
        smashed = wordfreq.smash_numbers(token)
        bucket = words.bucket(smashed)
        if bucket is None:
            freq = minimum
            break
        part = wordfreq.cB_to_freq(-bucket)
        if smashed != token:
            part *= wordfreq.digit_freq(token)
        one_over += 1.0 / part
    unrounded = max(1.0 / one_over if freq is None else freq, minimum)
    rounded = round(unrounded, math.floor(-math.log(unrounded, 10)) + 3)
    return round(wordfreq.freq_to_zipf(rounded), 2)
