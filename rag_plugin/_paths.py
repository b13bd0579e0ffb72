"""Where the plugin keeps what it derives once per machine (exported ONNX graphs, word frequency tables)."""
from __future__ import annotations

import os

DEFAULT_CACHE_DIR = os.environ.get('RAG_PLUGIN_CACHE', os.path.join(os.path.expanduser('~'), '.cache', 'rag_plugin'))
"""str: the plugin's cache folder (env ``RAG_PLUGIN_CACHE``)."""
