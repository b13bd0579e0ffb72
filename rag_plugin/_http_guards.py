"""What stands in front of the HTTP API (:mod:`rag_plugin.server`): a strict JSON reader, a ``Host`` check and a rate
limit.

- **Strict JSON**: Python's ``json`` reads ``NaN``, ``Infinity`` and ``1e400`` (an infinite float), numbers of
  thousands of digits, and nesting deep enough to exhaust the stack. :class:`StrictJSONRoute` refuses all of them when
  the body is read: a 422 with a short message that echoes nothing.
- **Host check** (:class:`HostCheck`): against DNS rebinding, where a web page's own name is made to point at
  127.0.0.1 and the browser then sends ``Host: evil.example`` to a keyless API on this machine.
- **Rate limit** (:class:`RateLimit`): token buckets per client address and per API key; a request with no token
  left gets 429 with ``Retry-After`` (seconds). A wrong or missing key costs its address
  :data:`~rag_plugin._api_defaults.FAILED_AUTH_COST` tokens (:func:`rag_plugin.server.create_app` charges them), so
  guessing keys slows down to one guess per that many requests' worth of time.
"""
from __future__ import annotations

import hmac
import json
import math
import threading
import time
from typing import Any, Callable, Iterable, Optional

from fastapi import HTTPException, Request
from fastapi.routing import APIRoute

from rag_plugin.errors import RAGPluginError

MAX_JSON_DEPTH = 16
"""int: the deepest a request body's objects and arrays may nest (the API's bodies have 3 levels)."""

MAX_TRACKED = 10_000
"""int: past this many buckets, those that have refilled completely are forgotten."""


async def send_json(send: Any, status: int, payload: Any, headers: Iterable[tuple[str, str]] = ()) -> None:
    """Send a small JSON reply through ASGI ``send`` (for middleware, which answers before FastAPI does)."""
    body = json.dumps(payload).encode()
    raw = [(b'content-type', b'application/json'), (b'content-length', str(len(body)).encode())]
    raw += [(name.lower().encode(), value.encode()) for name, value in headers]
    await send({'type': 'http.response.start', 'status': status, 'headers': raw})
    await send({'type': 'http.response.body', 'body': body})


# ---- strict JSON ----------------------------------------------------------------------------------------------------
class _NotAllowed(RAGPluginError, ValueError):
    """JSON that Python reads but the API refuses."""


def _no_constant(name: str) -> Any:
    raise _NotAllowed('a number in the body is not finite: send finite numbers only')


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotAllowed('a number in the body is not finite: send finite numbers only')
    return value


def _depth(value: Any) -> int:
    """How deep ``value``'s lists and dicts nest (iteratively: no depth is too deep to measure)."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, depth)
            pending.extend((inner, depth + 1) for inner in (item.values() if isinstance(item, dict) else item))
    return deepest


def read_json(body: bytes) -> Any:
    """Decode a request body as strict JSON.

    Raises:
        json.JSONDecodeError: on a syntax error (FastAPI answers it with a 422)
        HTTPException: 422 for a number that is not finite or too long to read, nesting deeper than
            :data:`MAX_JSON_DEPTH`, or bytes that are not UTF-8
    """
    try:
        value = json.loads(body, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError:
        raise
    except _NotAllowed as e:
        reason = str(e)
    except RecursionError:
        reason = f'the body nests deeper than {MAX_JSON_DEPTH} levels'
    except UnicodeDecodeError:
        reason = 'the body is not UTF-8 text'
    except ValueError:  # int() refuses numbers of over 4,300 digits
        reason = 'a number in the body is too long'
    else:
        if _depth(value) <= MAX_JSON_DEPTH:
            return value
        reason = f'the body nests deeper than {MAX_JSON_DEPTH} levels'
    raise HTTPException(status_code=422, detail=[{'loc': ['body'], 'msg': reason, 'type': 'json_invalid'}])


class StrictJSONRequest(Request):
    """A request whose :meth:`json` is :func:`read_json`."""

    async def json(self) -> Any:
        if not hasattr(self, '_json'):
            self._json = read_json(await self.body())
        return self._json


class StrictJSONRoute(APIRoute):
    """A route that reads its JSON body with :func:`read_json` (``app.router.route_class = StrictJSONRoute``)."""

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()

        async def strict_handler(request: Request) -> Any:
            return await handler(StrictJSONRequest(request.scope, request.receive))
        return strict_handler


# ---- Host check ----------------------------------------------------------------------------------------------------
def host_name(header: str) -> Optional[str]:
    """The name in a ``Host`` header, lower-case and without its port (``[::1]:8000`` -> ``::1``); None when the
    header is malformed or empty."""
    header = header.strip().lower()
    if header.startswith('['):
        name, bracket, rest = header[1:].partition(']')
        if not bracket:
            return None
        port = rest[1:] if rest.startswith(':') else rest
    else:
        name, _, port = header.partition(':')
    if not name or (port and not port.isdigit()):
        return None
    return name


class HostCheck:
    """ASGI middleware: 400 for a request whose ``Host`` header names none of ``allowed`` (any port).

    Args:
        app: the ASGI application
        allowed (Iterable[str]): host names and addresses (``localhost``, ``127.0.0.1``, ``::1``, ``rag.internal``)
    """

    def __init__(self, app: Any, allowed: Iterable[str]):
        self.app = app
        self.allowed = frozenset(name.lower().strip('[]') for name in allowed)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope['type'] == 'http':
            header = dict(scope.get('headers') or []).get(b'host', b'').decode('latin-1')
            if host_name(header) not in self.allowed:
                await send_json(send, 400, {'detail': 'this Host is not allowed: the API answers requests for '
                                                      f'{", ".join(sorted(self.allowed))} only'})
                return
        await self.app(scope, receive, send)


# ---- rate limit ----------------------------------------------------------------------------------------------------
class TokenBuckets:
    """Token buckets by name: each holds up to ``per_minute`` tokens and refills at ``per_minute`` tokens a minute.

    Args:
        per_minute (int): the sustained rate and the burst
        clock (Callable[[], float]): seconds, monotonic
    """

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic):
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # name -> (tokens, when)
        self._lock = threading.Lock()

    def _tokens(self, name: str, now: float) -> float:
        tokens, when = self._buckets.get(name, (self.capacity, now))
        return min(self.capacity, tokens + (now - when) * self.rate)

    def take(self, name: str) -> float:
        """Take a token from the bucket ``name``.

        Returns:
            float: 0.0 when a token was taken; else the seconds until one will be there (nothing is taken)
        """
        with self._lock:
            now = self.clock()
            tokens = self._tokens(name, now)
            if tokens < 1:
                return (1 - tokens) / self.rate
            if len(self._buckets) >= MAX_TRACKED and name not in self._buckets:
                self._forget_full(now)
            self._buckets[name] = (tokens - 1, now)
            return 0.0

    def charge(self, name: str, tokens: float) -> None:
        """Take ``tokens`` from the bucket ``name``, into debt if need be (its next request then waits longer)."""
        with self._lock:
            now = self.clock()
            self._buckets[name] = (self._tokens(name, now) - tokens, now)

    def _forget_full(self, now: float) -> None:
        for name in [n for n in self._buckets if self._tokens(n, now) >= self.capacity]:
            del self._buckets[name]


def key_matches(given: Optional[str], key: str) -> bool:
    """Whether the API key ``given`` is ``key`` (in constant time)."""
    return bool(given) and hmac.compare_digest(given.encode(), key.encode())


def address_bucket(scope: dict) -> str:
    """The rate-limit bucket of a request's client address (behind a proxy: the proxy's, unless uvicorn's
    ``--forwarded-allow-ips`` trusts it)."""
    client = scope.get('client')
    return f'address {client[0] if client else "unknown"}'


class RateLimit:
    """ASGI middleware: a token from the client address's bucket and, with the right API key, one from the key's;
    429 with ``Retry-After`` when either is empty.

    Args:
        app: the ASGI application
        buckets (TokenBuckets): the buckets
        api_key (str | None): the server's key (None: keyless, addresses only)
    """

    def __init__(self, app: Any, buckets: TokenBuckets, api_key: Optional[str]):
        self.app = app
        self.buckets = buckets
        self.api_key = api_key

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope['type'] == 'http':
            names = [address_bucket(scope)]
            given = dict(scope.get('headers') or []).get(b'x-api-key', b'').decode('latin-1')
            if self.api_key and key_matches(given, self.api_key):
                names.append('key')
            for name in names:
                wait = self.buckets.take(name)
                if wait:
                    seconds = max(1, math.ceil(wait))
                    await send_json(send, 429, {'detail': f'too many requests: try again in {seconds} s'},
                                    [('Retry-After', str(seconds))])
                    return
        await self.app(scope, receive, send)
