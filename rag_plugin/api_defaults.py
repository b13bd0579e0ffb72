"""The HTTP API's defaults, importable without FastAPI (the command line's help shows them without the ``server``
extra)."""

DEFAULT_HOST = '127.0.0.1'
"""str: the address ``serve`` binds by default (only this machine can connect)."""

DEFAULT_PORT = 8000
"""int: the port ``serve`` listens on by default."""

DEFAULT_MAX_BODY_BYTES = 64_000
"""int: larger request bodies get 413."""

API_KEY_ENV = 'RAG_PLUGIN_API_KEY'
"""str: the environment variable ``serve`` reads the API key from."""
