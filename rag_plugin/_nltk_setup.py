"""Offline NLTK ``punkt`` for BBF.

BBF 1.5 tokenises every user message with ``nltk.word_tokenize``, which needs the ``punkt`` sentence model, and
tries to download it at import time. Our machines (and many production ones) have no internet beyond package
registries, so the download fails with a printed error and the bot later fails on the first message.

``python -m rag_plugin setup-nltk`` writes a Punkt model into the environment's own ``nltk_data`` folder
(``<sys.prefix>/nltk_data``, which NLTK searches by default), so BBF finds it and never downloads. The model is
NLTK's own :class:`~nltk.tokenize.punkt.PunktSentenceTokenizer` with its default parameters (the Punkt algorithm
without learned abbreviation lists): sentence and word boundaries are found correctly for ordinary text; the
downloadable model additionally knows abbreviations such as "e.g." learned from newswire. Set ``NLTK_DATA`` to use
a real downloaded copy instead; this never overwrites an existing model.
"""
from __future__ import annotations

import os
import pickle
import sys

LANGUAGES = ('english', 'spanish', 'french', 'italian', 'german', 'dutch', 'portuguese', 'catalan', 'luxembourgish')


def punkt_dir(prefix: str = sys.prefix) -> str:
    """The folder where the model is written: ``<prefix>/nltk_data/tokenizers/punkt``."""
    return os.path.join(prefix, 'nltk_data', 'tokenizers', 'punkt')


def ensure_punkt(prefix: str = sys.prefix) -> list[str]:
    """Write the Punkt model for BBF's languages unless one is already there.

    Returns:
        list[str]: the files written (empty when everything was there)
    """
    from nltk.tokenize.punkt import PunktSentenceTokenizer
    written = []
    for folder in (punkt_dir(prefix), os.path.join(punkt_dir(prefix), 'PY3')):
        os.makedirs(folder, exist_ok=True)
        for language in LANGUAGES:
            path = os.path.join(folder, f'{language}.pickle')
            if not os.path.exists(path):
                with open(path, 'wb') as f:
                    pickle.dump(PunktSentenceTokenizer(), f)
                written.append(path)
    return written
