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

DEFAULT_RATE_LIMIT = 120
"""int: requests a minute per client address and per API key (each may burst that many at once); more get 429 with
``Retry-After``; 0 turns the limit off."""

FAILED_AUTH_COST = 10
"""int: the requests a wrong or missing API key costs its client address under the rate limit (so key guessing slows
down tenfold)."""

LOCAL_HOSTS = ('localhost', '127.0.0.1', '::1')
"""tuple[str, ...]: the ``Host`` names (any port) a keyless API answers, besides those allowed by name; the only
addresses ``serve --no-auth`` binds."""
