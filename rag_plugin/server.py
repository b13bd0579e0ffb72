"""HTTP API for agents: ``POST /retrieve`` and ``POST /answer`` return the JSON of
:meth:`rag_plugin.RAG.retrieve_context` and :meth:`rag_plugin.RAG.answer_context` (camelCase keys, with 0.1.0's
snake_case aliases: :mod:`rag_plugin.context.models`); ``POST /ask`` returns the RAG's own
answer (:meth:`rag_plugin.RAG.run`, as a bot gets it: guard, sources, confidence, the answer cache when it is on) as
:meth:`rag_plugin.RAGMessage.to_dict`; ``GET /health``; OpenAPI docs at ``/docs``.

Safe by default: an API key (header ``X-API-Key``; 401 when it is missing or wrong) unless a keyless API is asked
for, and then only for this machine (the ``Host`` must be a localhost name: DNS rebinding); a rate limit per client
address and per key (429 with ``Retry-After``); no CORS unless origins are given; ``/docs`` and ``/openapi.json``
behind the key; a request-size limit (413, checked on ``Content-Length`` and on the body actually received); and
127.0.0.1 as the default address (see :mod:`rag_plugin._http_guards`). Errors by kind: a caller's mistake is a 4xx
with a short message (a body not sent as ``Content-Type: application/json`` is a 415 saying so; a 422 names the
fields and never echoes what was sent; NaN, Infinity, deep nesting and oversized lists are 422s); a part that is down
(the store, the embedding model) is a 503 that names it, on every endpoint that needs it; never a 500. Text is
cleaned of invalid Unicode on the way in (:func:`rag_plugin._inputs.clean_text`); a question over 4,000 characters is
cut, as everywhere, and the reply's ``note`` says so::

    python -m rag_plugin serve --port 8000 --api-key "$KEY"      # or env RAG_PLUGIN_API_KEY
    curl -s http://127.0.0.1:8000/ask -H "X-API-Key: $KEY" -H 'Content-Type: application/json' \\
        -d '{"question": "What is the API rate limit?"}'
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated, Any, Callable, Iterable, Literal, Optional, Union

from rag_plugin._extras import require

require('fastapi', 'server', 'the HTTP API')  # one line naming the extra when FastAPI is not installed

from fastapi import Depends, FastAPI, HTTPException, Request  # noqa: E402
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.middleware.cors import CORSMiddleware  # noqa: E402
from fastapi.openapi.docs import get_swagger_ui_html  # noqa: E402
from fastapi.responses import HTMLResponse, JSONResponse  # noqa: E402
from fastapi.security import APIKeyHeader  # noqa: E402
from pydantic import BaseModel, ConfigDict, Field, model_validator  # noqa: E402

from rag_plugin._api_defaults import (API_KEY_ENV, DEFAULT_HOST, DEFAULT_MAX_BODY_BYTES, DEFAULT_PORT,  # noqa: E402,F401
                                     DEFAULT_RATE_LIMIT, FAILED_AUTH_COST, LOCAL_HOSTS)
from rag_plugin._http_guards import (HostCheck, RateLimit, StrictJSONRoute, TokenBuckets, address_bucket,  # noqa: E402
                                    key_matches, send_json)
from rag_plugin._inputs import clean_text  # noqa: E402
from rag_plugin.settings import DEFAULT_MAX_QUESTION_CHARS  # noqa: E402
from rag_plugin.store import corpus_store, scope_filter  # noqa: E402

if TYPE_CHECKING:
    from rag_plugin.rag import RAG

logger = logging.getLogger(__name__)

MAX_ERRORS_SHOWN = 5
"""int: a 422 lists at most this many validation errors (a list of 20,000 bad tags made a 2 MB reply)."""

MAX_SCOPE_TAGS = 100
"""int: the most tags a request's scope may name (800 overflowed the store's query: see
:data:`rag_plugin._inputs.MAX_FILTER_CLAUSES`)."""

MAX_SCOPE_SOURCES = 1000
"""int: the most source ids a request's scope may list."""

SourceIds = Optional[Union[str, Annotated[list[str], Field(max_length=MAX_SCOPE_SOURCES)]]]
Tags = Optional[Annotated[list[str], Field(max_length=MAX_SCOPE_TAGS)]]


def _clean(value: Any) -> Any:
    """Clean every string of a decoded JSON body (before validation: its error messages echo the input)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    return value


class ScopeBody(BaseModel):
    """What a request may see: one or more sources, a ``source_id`` prefix (a workspace or project folder), tags."""
    model_config = ConfigDict(extra='forbid')
    sourceId: SourceIds = Field(None, description=f'exact source id(s) (at most {MAX_SCOPE_SOURCES})')
    sourceRef: Optional[str] = Field(None, description='a source_id prefix: a workspace or project folder')
    tags: Tags = Field(None, description=f'every chunk must carry all these tags (at most {MAX_SCOPE_TAGS})')


class ContextBody(BaseModel):
    """A context request."""
    model_config = ConfigDict(extra='forbid')
    question: str = Field('', description=f"the question; '' asks for a bootstrap (over {DEFAULT_MAX_QUESTION_CHARS} "
                                          "characters: cut, and the reply's note says so)")
    intent: Literal['auto', 'bootstrap', 'specific'] = 'auto'
    mode: Literal['auto', 'documental', 'codigo'] = 'auto'
    scope: Optional[ScopeBody] = None
    k: Optional[int] = Field(None, ge=1, le=100, description='items (default: 4 specific, 12 bootstrap)')

    _clean_text = model_validator(mode='before')(_clean)


class AskScope(BaseModel):
    """What an ``/ask`` may see: one or more sources, tags."""
    model_config = ConfigDict(extra='forbid')
    sourceId: SourceIds = Field(None, description=f'exact source id(s) (at most {MAX_SCOPE_SOURCES})')
    tags: Tags = Field(None, description=f'every chunk must carry all these tags (at most {MAX_SCOPE_TAGS})')


class AskBody(BaseModel):
    """A question for the RAG itself (no conversation: each request stands alone)."""
    model_config = ConfigDict(extra='forbid')
    question: str = Field(..., min_length=1, description=f"the question (over {DEFAULT_MAX_QUESTION_CHARS} "
                                                         "characters: cut, and the reply's note says so)")
    scope: Optional[AskScope] = None
    k: Optional[int] = Field(None, ge=1, le=100, description="chunks retrieved (default: the RAG's k)")

    _clean_text = model_validator(mode='before')(_clean)


class BodyLimit:
    """ASGI middleware: 413 for request bodies over ``max_bytes``, by ``Content-Length`` and by the bytes received.

    Args:
        app: the ASGI application
        max_bytes (int): the largest body accepted
    """

    def __init__(self, app: Any, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope['type'] != 'http':
            await self.app(scope, receive, send)
            return
        length = dict(scope.get('headers') or []).get(b'content-length')
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            await self._reject(send)
            return
        body, more = b'', True
        while more:
            message = await receive()
            if message['type'] == 'http.disconnect':
                return
            body += message.get('body', b'')
            if len(body) > self.max_bytes:
                await self._reject(send)
                return
            more = message.get('more_body', False)
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {'type': 'http.request', 'body': body, 'more_body': False}
            return await receive()

        await self.app(scope, replay, send)

    async def _reject(self, send: Any) -> None:
        await send_json(send, 413, {'detail': f'request body too large (limit {self.max_bytes} bytes)'})


def _short(value: Any, limit: int) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit - 1] + '…'


def small_errors(errors: list[dict]) -> list[dict]:
    """Validation errors as a caller needs them, in a small body: where (``loc``) and what (``msg``, ``type``), at
    most :data:`MAX_ERRORS_SHOWN` of them. Never pydantic's ``input``, which can be the whole body (50 KB back for a
    50 KB question), and long keys in ``loc`` are shortened."""
    shown = [{'loc': [_short(part, 80) if isinstance(part, str) else part for part in error.get('loc', ())],
              'msg': _short(error.get('msg', ''), 200), 'type': error.get('type', '')}
             for error in errors[:MAX_ERRORS_SHOWN]]
    if len(errors) > MAX_ERRORS_SHOWN:
        shown.append({'loc': ['body'], 'msg': f'{len(errors) - MAX_ERRORS_SHOWN} more error(s) not shown',
                      'type': 'more_errors'})
    return shown


async def _validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
    return JSONResponse({'detail': small_errors(error.errors())}, status_code=422)


def require_json(request: Request) -> None:
    """415 for a body not declared as JSON (``curl -d`` sends ``application/x-www-form-urlencoded``), saying what to
    send, instead of a 422 about a string that is not an object."""
    declared = request.headers.get('content-type', '')
    media = declared.split(';')[0].strip().lower()
    if media != 'application/json' and not media.endswith('+json'):
        raise HTTPException(status_code=415, detail="send the body as JSON with the header 'Content-Type: "
                                                    f"application/json' (got {_short(declared, 80) or 'none'})")


def _options(body: ContextBody) -> dict:
    scope = body.scope.model_dump() if body.scope else None
    return {'question': body.question, 'intent': body.intent, 'mode': body.mode, 'scope': scope, 'k': body.k}


def check_parts(rag: 'RAG') -> dict[str, Any]:
    """Probe the parts a reply needs: ``store`` (count the chunks), ``embeddings`` (embed a word: with a remote
    embedding model, one small request) and ``llm`` (its circuit breaker's view; the LLM itself is not called).

    Returns:
        dict[str, Any]: part -> ``'ok'`` or what is wrong; ``chunks`` (int) when the store could count them
    """
    parts: dict[str, Any] = {}
    store = corpus_store(rag.vector_store)
    try:
        rag.ingestor.refresher.sync()  # a replaced store folder is opened again; a deleted one is an error
        if store is not None:
            parts['chunks'] = store.count()
            getattr(store, 'check_vector_index', lambda: None)()  # a damaged index says so here, not at a question
        parts['store'] = 'ok'
    except Exception as e:  # noqa: BLE001 - a probe reports, it does not fail
        parts['store'] = f'down: {type(e).__name__}: {e}'
    embeddings = getattr(rag.vector_store, 'embeddings', None)
    try:
        if embeddings is not None:
            embeddings.embed_query('health')
        parts['embeddings'] = 'ok'
    except Exception as e:  # noqa: BLE001
        parts['embeddings'] = f'down: {type(e).__name__}: {e}'
    parts['llm'] = rag.generator.llm_status(rag.llm_name)
    return parts


def _unavailable(parts: dict[str, Any]) -> list[str]:
    return [name for name in ('store', 'embeddings') if parts.get(name) != 'ok']


def _store_unavailable(result: Any) -> bool:
    """Whether a :class:`~rag_plugin.RAGMessage` is the store-unavailable answer (retrieval failed; in any language)."""
    from rag_plugin.message import UNAVAILABLE
    return result.abstained and result.degraded and result.outcome == UNAVAILABLE


def create_app(rag: 'RAG', api_key: Optional[str] = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, *,
               allow_no_auth: bool = False, allowed_hosts: Iterable[str] = (), cors_origins: Iterable[str] = (),
               rate_limit: int = DEFAULT_RATE_LIMIT) -> FastAPI:
    """Build the HTTP API over a RAG.

    Args:
        rag (RAG): the RAG that answers
        api_key (str): every endpoint but ``/health`` needs the header ``X-API-Key`` with this value (``/docs`` and
            ``/openapi.json`` too)
        max_body_bytes (int): larger request bodies get 413
        allow_no_auth (bool): without ``api_key``, serve without a key anyway: only requests whose ``Host`` is a
            localhost name (:data:`~rag_plugin._api_defaults.LOCAL_HOSTS`) or in ``allowed_hosts`` are answered
        allowed_hosts (Iterable[str]): more ``Host`` names to answer; with a key, when given, only these and the
            localhost names are answered (default: any)
        cors_origins (Iterable[str]): web origins allowed to call the API from a browser (default: none, and no
            CORS headers at all)
        rate_limit (int): requests a minute per client address and per key, each a burst of as many; 429 with
            ``Retry-After`` beyond (0: no limit)

    Returns:
        FastAPI: the application (run it with uvicorn, or test it with ``fastapi.testclient.TestClient``)

    Raises:
        ValueError: without ``api_key`` unless ``allow_no_auth`` is True
    """
    if not api_key and not allow_no_auth:
        raise ValueError('create_app needs an api_key, or allow_no_auth=True for a keyless API that answers '
                         'requests for localhost names only')
    hide_docs = {'docs_url': None, 'redoc_url': None, 'openapi_url': None} if api_key else {}
    app = FastAPI(title='rag_plugin context API',
                  description='Context packages and cited answers from your documents and code, for agents.',
                  version='1', **hide_docs)
    app.router.route_class = StrictJSONRoute  # NaN, Infinity, deep nesting: 422 when the body is read
    header = APIKeyHeader(name='X-API-Key', auto_error=False, description='required when the server has a key')
    buckets = TokenBuckets(rate_limit) if rate_limit else None

    def check_key(request: Request, given: Optional[str] = Depends(header)) -> None:
        if api_key and not key_matches(given, api_key):
            if buckets is not None:  # a wrong key costs its address more than a request
                buckets.charge(address_bucket(request.scope), FAILED_AUTH_COST - 1)
            raise HTTPException(status_code=401, detail='missing or wrong X-API-Key')

    def run(method, body: ContextBody) -> dict:
        return guarded(method.__name__, lambda: method(**_options(body)))

    def unavailable(name: str, error: str, parts: Optional[dict[str, Any]] = None) -> HTTPException:
        parts = parts or check_parts(rag)
        down = _unavailable(parts)
        logger.error('[RAG] %s failed: %s (down: %s)', name, error, ', '.join(down) or 'nothing found down')
        return HTTPException(status_code=503, detail={
            'message': 'the service cannot answer right now; please try again later',
            'down': {part: parts[part] for part in down}, 'error': error})

    def guarded(name: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as e:  # noqa: BLE001 - sorted by kind below; never a 500
            parts = check_parts(rag)
            if isinstance(e, (ValueError, TypeError)) and not _unavailable(parts):
                raise HTTPException(status_code=422, detail=_short(e, 300)) from e
            raise unavailable(name, f'{type(e).__name__}: {e}', parts) from e

    @app.get('/health')
    def health() -> JSONResponse:
        """Which parts work: ``store``, ``embeddings``, ``llm`` (200 ``ok`` or ``degraded`` when only the LLM is down,
        since answers then come from extraction; 503 ``unavailable`` when the store or the embeddings are down)."""
        parts = check_parts(rag)
        down = _unavailable(parts)
        status = 'unavailable' if down else ('ok' if parts['llm'] == 'ok' else 'degraded')
        return JSONResponse({'status': status, 'chunks': parts.pop('chunks', None), 'down': down, 'parts': parts},
                            status_code=503 if down else 200)

    @app.post('/retrieve', dependencies=[Depends(check_key), Depends(require_json)])
    def retrieve(body: ContextBody) -> dict:
        """A context package: mode, intent, summary, topics, criticalPoints, items, followUpRefs, scope (camelCase;
        0.1.0's snake_case keys, such as critical_points and follow_up_refs, are still written beside them)."""
        return run(rag.retrieve_context, body)

    @app.post('/answer', dependencies=[Depends(check_key), Depends(require_json)])
    def answer(body: ContextBody) -> dict:
        """A cited answer: mode, intent, answer, summary, topics, criticalPoints, citations, scope."""
        return run(rag.answer_context, body)

    @app.post('/ask', dependencies=[Depends(check_key), Depends(require_json)])
    def ask(body: AskBody) -> dict:
        """The RAG's own answer, as a bot gets it (RAGMessage.to_dict): answer, docs, sources, confidence, abstained,
        degraded, cited, category, cached (answered from the semantic answer cache), note (says when the question
        was cut; else null). 503 when the documents cannot be searched."""
        where = scope_filter(source_id=body.scope.sourceId, tags=body.scope.tags) if body.scope else None
        result = guarded('ask', lambda: rag.run(message=body.question, k=body.k, filter=where))
        if _store_unavailable(result):
            raise unavailable('ask', 'retrieval failed (the server log says why)')
        return result.to_dict()

    if api_key:  # the schema and its page behind the key too
        @app.get('/openapi.json', include_in_schema=False, dependencies=[Depends(check_key)])
        def openapi() -> JSONResponse:
            return JSONResponse(app.openapi())

        @app.get('/docs', include_in_schema=False, dependencies=[Depends(check_key)])
        def docs() -> HTMLResponse:
            return get_swagger_ui_html(openapi_url='/openapi.json', title=app.title)

    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)  # the last added runs first
    if buckets is not None:
        app.add_middleware(RateLimit, buckets=buckets, api_key=api_key or None)
    cors_origins = list(cors_origins)
    if cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=cors_origins, allow_methods=['GET', 'POST'],
                           allow_headers=['Content-Type', 'X-API-Key'], expose_headers=['Retry-After'])
    allowed_hosts = list(allowed_hosts)
    if not api_key or allowed_hosts:
        app.add_middleware(HostCheck, allowed=[*LOCAL_HOSTS, *allowed_hosts])
    return app


def check_serve_options(host: str, api_key: Optional[str], no_auth: bool) -> None:
    """Refuse to serve an open API: no key without ``no_auth``, or a keyless one beyond this machine.

    Raises:
        ValueError: saying what to change
    """
    if api_key and no_auth:
        raise ValueError(f'an API key is set (--api-key or {API_KEY_ENV}) and --no-auth asks for none: use one')
    if not api_key and not no_auth:
        raise ValueError(f'no API key: pass --api-key KEY (or set {API_KEY_ENV}), or --no-auth for a keyless API '
                         'that only this machine can use')
    if no_auth and host not in LOCAL_HOSTS:
        raise ValueError(f'--no-auth serves this machine only ({", ".join(LOCAL_HOSTS)}), not {host}: give the API '
                         'a key to serve other machines')


def serve(rag: 'RAG', host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, api_key: Optional[str] = None,
          max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, *, no_auth: bool = False, allowed_hosts: Iterable[str] = (),
          cors_origins: Iterable[str] = (), rate_limit: int = DEFAULT_RATE_LIMIT) -> None:
    """Run the API with uvicorn until interrupted (127.0.0.1 by default: only this machine can connect). Without
    ``api_key`` it refuses to start unless ``no_auth`` is True, and then only on a loopback address (see
    :func:`check_serve_options`); the other arguments are :func:`create_app`'s.

    Raises:
        ValueError: for an open API (see :func:`check_serve_options`)
    """
    check_serve_options(host, api_key, no_auth)
    uvicorn = require('uvicorn', 'server', 'the HTTP API')
    app = create_app(rag, api_key, max_body_bytes, allow_no_auth=no_auth, allowed_hosts=allowed_hosts,
                     cors_origins=cors_origins, rate_limit=rate_limit)
    uvicorn.run(app, host=host, port=port, log_level='info')
