"""The HTTP API for agents: /retrieve and /answer return the Python API's JSON; API key (401), body limit (413),
health, OpenAPI docs, and a real uvicorn server on 127.0.0.1."""
import json
import shlex
import subprocess
import threading
import time

import httpx
import pytest
from conftest import ROOT, free_port
from helpers import store_folder
from fastapi.testclient import TestClient

KEY = 'test-key-123'
PACKAGE_KEYS = {'mode', 'intent', 'summary', 'topics', 'criticalPoints', 'items', 'followUpRefs', 'scope',
                'critical_points', 'follow_up_refs'}  # camelCase, and 0.1.0's snake_case aliases
ANSWER_KEYS = {'mode', 'intent', 'answer', 'summary', 'topics', 'criticalPoints', 'citations', 'scope'}


@pytest.fixture
def rag(make_rag):
    return make_rag()


@pytest.fixture
def client(rag):
    from rag_plugin.server import create_app
    return TestClient(create_app(rag, api_key=KEY, max_body_bytes=2_000))


def test_retrieve_and_answer_return_the_python_contract(client, rag):
    response = client.post('/retrieve', json={'question': 'What is the API rate limit?'}, headers={'X-API-Key': KEY})
    assert response.status_code == 200, response.text
    package = response.json()
    assert set(package) == PACKAGE_KEYS and package['intent'] == 'specific'
    assert package == rag.retrieve_context('What is the API rate limit?')
    response = client.post('/answer', json={'question': 'What is the API rate limit?', 'k': 3},
                           headers={'X-API-Key': KEY})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert set(answer) == ANSWER_KEYS and '600 requests per minute' in answer['answer']
    assert answer['citations'][0]['source_id'] == 'integrations_and_api.pdf'


def test_answer_markers_are_citation_numbers_and_package_items(client, rag):
    """[n] in an /answer is the citation with that n, and item n of /retrieve for the same question."""
    import re
    body = {'question': 'What is the API rate limit?', 'k': 4}
    answer = client.post('/answer', json=body, headers={'X-API-Key': KEY}).json()
    items = client.post('/retrieve', json=body, headers={'X-API-Key': KEY}).json()['items']
    markers = {int(n) for n in re.findall(r'\[(\d+)\]', answer['answer'])}
    assert markers
    by_n = {c['n']: c for c in answer['citations']}
    for n in markers:
        assert by_n[n]['cited'] and by_n[n]['chunk_id'] == items[n - 1]['chunk_id']
        assert (by_n[n]['source_id'], by_n[n].get('page')) == (items[n - 1]['source_id'], items[n - 1].get('page'))
    fact = re.search(r'600 requests per minute[^[]*\[(\d+)\]', answer['answer'])
    assert by_n[int(fact.group(1))].get('page') == 2


def test_scope_intent_and_mode_in_the_body(client):
    body = {'question': '', 'intent': 'bootstrap', 'mode': 'documental', 'k': 5,
            'scope': {'sourceId': ['troubleshooting.pdf', 'sync_and_offline.pdf'], 'tags': []}}
    package = client.post('/retrieve', json=body, headers={'X-API-Key': KEY}).json()
    assert package['intent'] == 'bootstrap' and package['scope']['sourceId'] == ['troubleshooting.pdf',
                                                                                   'sync_and_offline.pdf']
    assert {i['source_id'] for i in package['items']} == {'troubleshooting.pdf', 'sync_and_offline.pdf'}
    nowhere = client.post('/retrieve', json={'question': 'What is the API rate limit?', 'scope': {'sourceRef': 'x/'}},
                          headers={'X-API-Key': KEY}).json()
    assert nowhere['items'] == [] and nowhere['scope'] == {'sourceId': None, 'sourceRef': 'x/', 'tags': []}
    bad = client.post('/retrieve', json={'question': 'x', 'intent': 'panoramic'}, headers={'X-API-Key': KEY})
    assert bad.status_code == 422
    assert client.post('/retrieve', json={'question': 'x', 'extra': 1}, headers={'X-API-Key': KEY}).status_code == 422


def test_wrong_or_missing_key_is_401(client):
    for headers in ({}, {'X-API-Key': 'wrong'}, {'X-API-Key': ''}):
        for path in ('/retrieve', '/answer'):
            response = client.post(path, json={'question': 'What is the API rate limit?'}, headers=headers)
            assert response.status_code == 401, (path, headers, response.text)
    assert client.get('/health').status_code == 200


def test_oversized_body_is_413_by_header_and_by_actual_size(client):
    big = {'question': 'x' * 3_000}
    response = client.post('/retrieve', json=big, headers={'X-API-Key': KEY})
    assert response.status_code == 413 and 'too large' in response.json()['detail']

    def chunks():  # streamed without Content-Length: the limit counts the bytes received
        yield b'{"question": "'
        for _ in range(10):
            yield b'y' * 300
        yield b'"}'
    headers = {'X-API-Key': KEY, 'Content-Type': 'application/json'}
    response = client.post('/answer', content=chunks(), headers=headers)
    assert response.status_code == 413
    small = client.post('/retrieve', json={'question': 'What is the API rate limit?'}, headers={'X-API-Key': KEY})
    assert small.status_code == 200


def test_health_and_openapi_docs(client):
    health = client.get('/health').json()
    assert health['status'] == 'ok' and health['chunks'] > 0
    assert client.get('/docs', headers={'X-API-Key': KEY}).status_code == 200
    schema = client.get('/openapi.json', headers={'X-API-Key': KEY}).json()
    assert {'/retrieve', '/answer', '/health'} <= set(schema['paths'])


def test_docs_are_behind_the_key_when_there_is_one(client, rag):
    from rag_plugin.server import create_app
    for path in ('/docs', '/openapi.json', '/redoc'):
        for headers in ({}, {'X-API-Key': 'wrong'}):
            response = client.get(path, headers=headers)
            assert response.status_code in (401, 404), (path, headers, response.status_code)
            assert 'paths' not in response.text and 'swagger' not in response.text.lower()
    keyless = TestClient(create_app(rag, allow_no_auth=True), base_url='http://localhost')
    assert keyless.get('/docs').status_code == 200 and '/ask' in keyless.get('/openapi.json').json()['paths']


def test_without_a_key_no_header_is_needed(rag):
    from rag_plugin.server import create_app
    client = TestClient(create_app(rag, allow_no_auth=True), base_url='http://localhost')
    response = client.post('/retrieve', json={'question': 'How long do deleted notes stay in the trash?'})
    assert response.status_code == 200 and response.json()['items']


def test_a_keyless_api_must_be_asked_for(rag):
    """No key and no explicit allow_no_auth: create_app refuses (an open API is a choice, not a default)."""
    from rag_plugin.server import create_app
    for key in (None, ''):
        with pytest.raises(ValueError, match='allow_no_auth'):
            create_app(rag, api_key=key)


@pytest.mark.parametrize('host, allowed', [
    ('localhost', True), ('localhost:8000', True), ('127.0.0.1:8000', True), ('[::1]:8000', True),
    ('LOCALHOST:8000', True), ('rag.internal:8000', True), ('evil.example', False), ('evil.example:8000', False),
    ('localhost.evil.example', False), ('127.0.0.1.nip.io:8000', False), ('', False), ('[::1', False),
])
def test_a_keyless_api_answers_only_to_local_host_names(rag, host, allowed):
    """DNS rebinding: a page on evil.example whose name now points at 127.0.0.1 sends ``Host: evil.example``; a
    keyless API answers only requests for localhost names and the names allowed."""
    from rag_plugin.server import create_app
    client = TestClient(create_app(rag, allow_no_auth=True, allowed_hosts=['rag.internal']))
    for method, path in (('post', '/retrieve'), ('get', '/health'), ('get', '/openapi.json')):
        kwargs = {'json': {'question': 'What is the API rate limit?'}} if method == 'post' else {}
        response = getattr(client, method)(path, headers={'Host': host}, **kwargs)
        if allowed:
            assert response.status_code == 200, (path, response.text[:200])
        else:
            assert response.status_code == 400, (path, response.status_code)
            assert 'Host' in response.json()['detail'] and 'items' not in response.text


def test_with_a_key_allowed_hosts_still_limit_the_host(rag):
    from rag_plugin.server import create_app
    open_hosts = TestClient(create_app(rag, api_key=KEY))  # a key, no list: any Host (behind a proxy, say)
    assert open_hosts.get('/health', headers={'Host': 'rag.example.com'}).status_code == 200
    listed = TestClient(create_app(rag, api_key=KEY, allowed_hosts=['rag.example.com']))
    assert listed.get('/health', headers={'Host': 'rag.example.com'}).status_code == 200
    assert listed.get('/health', headers={'Host': 'other.example.com'}).status_code == 400


def test_requests_over_the_rate_limit_get_429_with_retry_after(rag):
    """Per client address and per key: a burst of ``rate_limit`` requests, then 429 with Retry-After (seconds)."""
    from rag_plugin.server import create_app
    app = create_app(rag, api_key=KEY, rate_limit=5)
    one, other = TestClient(app, client=('10.0.0.1', 1000)), TestClient(app, client=('10.0.0.2', 1000))
    statuses = [one.get('/openapi.json', headers={'X-API-Key': KEY}).status_code for _ in range(7)]
    assert statuses == [200] * 5 + [429] * 2
    limited = one.get('/health')
    assert limited.status_code == 429 and 'too many requests' in limited.json()['detail']
    assert 1 <= int(limited.headers['Retry-After']) <= 60
    # the key has spent its 5 too: another address with the key waits, without it (health) it is served
    assert other.get('/openapi.json', headers={'X-API-Key': KEY}).status_code == 429
    assert other.get('/health').status_code == 200


def test_wrong_keys_cost_more(rag):
    """300 wrong keys in a row used to be 300 quick 401s: a failed attempt costs its address ten requests, so a
    guesser gets a few 401s, then one guess per ten requests' worth of time, while other addresses are served."""
    from rag_plugin.server import create_app
    app = create_app(rag, api_key=KEY, rate_limit=60)
    guesser, neighbour = TestClient(app, client=('10.0.0.3', 1000)), TestClient(app, client=('10.0.0.4', 1000))
    statuses = [guesser.post('/ask', json={'question': 'x'}, headers={'X-API-Key': f'guess-{n}'}).status_code
                for n in range(30)]
    assert 1 <= statuses.count(401) <= 10 and statuses.count(429) >= 20 and set(statuses) == {401, 429}
    blocked = guesser.post('/ask', json={'question': 'x'}, headers={'X-API-Key': KEY})
    assert blocked.status_code == 429 and int(blocked.headers['Retry-After']) >= 1
    assert neighbour.post('/ask', json={'question': 'What is the API rate limit?'},
                          headers={'X-API-Key': KEY}).status_code == 200


def test_the_default_rate_limit_stops_a_flood(rag):
    """300 requests in a few seconds were all served; by default a client gets a burst, then 429s."""
    from rag_plugin._api_defaults import DEFAULT_RATE_LIMIT
    from rag_plugin.server import create_app
    client = TestClient(create_app(rag, api_key=KEY))
    statuses = [client.get('/openapi.json', headers={'X-API-Key': KEY}).status_code for _ in range(300)]
    assert DEFAULT_RATE_LIMIT <= statuses.count(200) < 200 and set(statuses) == {200, 429}  # (it refills meanwhile)
    assert TestClient(create_app(rag, api_key=KEY, rate_limit=0)).get('/health').status_code == 200  # 0: off


def test_no_cors_headers_unless_origins_are_configured(rag):
    from rag_plugin.server import create_app
    preflight = {'Origin': 'https://app.example', 'Access-Control-Request-Method': 'POST',
                 'Access-Control-Request-Headers': 'content-type, x-api-key'}
    closed = TestClient(create_app(rag, api_key=KEY))
    response = closed.options('/ask', headers=preflight)
    assert response.status_code in (400, 405) and 'access-control-allow-origin' not in response.headers
    response = closed.post('/ask', json={'question': 'What is the API rate limit?'},
                           headers={'X-API-Key': KEY, 'Origin': 'https://app.example'})
    assert response.status_code == 200 and not any(h.startswith('access-control-') for h in response.headers)
    opened = TestClient(create_app(rag, api_key=KEY, cors_origins=['https://app.example']))
    response = opened.options('/ask', headers=preflight)
    assert response.status_code == 200
    assert response.headers['access-control-allow-origin'] == 'https://app.example'
    assert 'x-api-key' in response.headers['access-control-allow-headers'].lower()
    response = opened.post('/ask', json={'question': 'What is the API rate limit?'},
                           headers={'X-API-Key': KEY, 'Origin': 'https://app.example'})
    assert response.headers['access-control-allow-origin'] == 'https://app.example'
    other = opened.options('/ask', headers={**preflight, 'Origin': 'https://evil.example'})
    assert 'access-control-allow-origin' not in other.headers
    response = opened.post('/ask', json={'question': 'What is the API rate limit?'},
                           headers={'X-API-Key': KEY, 'Origin': 'https://evil.example'})
    assert 'access-control-allow-origin' not in response.headers


def readme_curl(port: int, key: str) -> str:
    """Run the README's curl example against a server on ``port`` with API key ``key``; its output."""
    text = (ROOT / 'README.md').read_text().replace('\\\n', ' ')
    [line] = [line.split('#')[0] for line in text.splitlines() if line.startswith('curl ')]
    args = [arg.replace('8000', str(port)).replace('SECRET', key) for arg in shlex.split(line)]
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_uvicorn_serves_on_localhost(rag):
    import uvicorn

    from rag_plugin.server import DEFAULT_HOST, create_app
    assert DEFAULT_HOST == '127.0.0.1'
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(rag, api_key=KEY), host=DEFAULT_HOST, port=port,
                                           log_level='warning'))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline, 'uvicorn did not start'
            time.sleep(0.05)
        url = f'http://127.0.0.1:{port}'
        answer = httpx.post(f'{url}/answer', json={'question': 'What does error NN-5031 mean?'},
                            headers={'X-API-Key': KEY}, timeout=120)
        assert answer.status_code == 200 and 'storage quota' in answer.json()['answer']
        assert httpx.post(f'{url}/answer', json={'question': 'x'}, timeout=30).status_code == 401
        assert '600 requests per minute' in json.loads(readme_curl(port, KEY))['answer']
    finally:
        server.should_exit = True
        thread.join(10)


def test_ask_is_the_rags_own_answer_with_the_answer_cache(make_rag):
    """POST /ask goes through RAG.run: a cited answer with sources, an honest refusal, scope filters, the cache."""
    from rag_plugin.cache import SemanticCache
    from rag_plugin.server import create_app
    rag = make_rag(cache=SemanticCache())
    client = TestClient(create_app(rag, api_key=KEY))
    headers = {'X-API-Key': KEY}
    first = client.post('/ask', json={'question': 'How long do deleted notes stay in the trash?'}, headers=headers)
    assert first.status_code == 200, first.text
    answer = first.json()
    assert '30 days' in answer['answer'] and not answer['abstained'] and not answer['cached']
    assert answer['sources'][0]['source'].endswith('getting_started.pdf') and answer['cited']
    again = client.post('/ask', json={'question': 'how long do deleted notes stay in trash'}, headers=headers).json()
    assert again['cached'] and again['answer'] == answer['answer']
    refused = client.post('/ask', json={'question': 'What is the capital of Mongolia?'}, headers=headers).json()
    assert refused['abstained'] and not refused['cached'] and refused['answer'] == rag.not_found_answer
    scoped = client.post('/ask', json={'question': 'What is the API rate limit?',
                                       'scope': {'sourceId': 'troubleshooting.pdf'}}, headers=headers).json()
    assert all(d['metadata']['source_id'] == 'troubleshooting.pdf' for d in scoped['docs'])
    assert client.post('/ask', json={'question': 'x'}).status_code == 401
    assert client.post('/ask', json={'question': ''}, headers=headers).status_code == 422
    assert client.post('/ask', json={'question': 'x', 'scope': {'sourceRef': 'a/'}}, headers=headers).status_code == 422


LONG_QUESTION = 'What is the API rate limit? ' + 'Tell me about the API rate limit. ' * 1400  # 47,628 characters


def test_a_question_over_the_limit_is_cut_and_the_reply_says_so(rag):
    """Every endpoint answers the first 4,000 characters and says so in ``note`` (as the CLI and the chat do)."""
    from rag_plugin.server import create_app
    client = TestClient(create_app(rag, api_key=KEY))
    note = f'question too long: only its first 4000 of {len(LONG_QUESTION)} characters were used'
    for path in ('/ask', '/retrieve', '/answer'):
        response = client.post(path, json={'question': LONG_QUESTION}, headers={'X-API-Key': KEY})
        assert response.status_code == 200, (path, response.text[:300])
        assert response.json()['note'] == note, path
    answer = client.post('/ask', json={'question': LONG_QUESTION}, headers={'X-API-Key': KEY}).json()
    assert len(answer['question']) == 4000 and answer['outcome'] in ('answer', 'closest')  # never not_found
    assert answer['sources'][0]['source'] == 'integrations_and_api.pdf'
    short = client.post('/ask', json={'question': 'What is the API rate limit?'}, headers={'X-API-Key': KEY}).json()
    assert short['note'] is None
    assert 'note' not in client.post('/retrieve', json={'question': 'What is the API rate limit?'},
                                     headers={'X-API-Key': KEY}).json()


@pytest.mark.parametrize('body', [
    {'question': 'x', 'k': 'y' * 50_000},
    {'question': 'x', 'intent': 'y' * 50_000},
    {'question': 'x', 'y' * 50_000: 1},
    {'question': ['y' * 50_000]},
    {'question': 'x', 'scope': {'tags': [1] * 20_000}},
    {'question': 'x', 'scope': {'sourceId': {'y' * 50_000: 1}}},
])
def test_a_422_never_echoes_the_input(rag, body):
    """A validation error names the field and the problem in a small body, whatever the caller sent."""
    from rag_plugin.server import create_app
    client = TestClient(create_app(rag, api_key=KEY))
    for path in ('/ask', '/retrieve', '/answer'):
        response = client.post(path, json=body, headers={'X-API-Key': KEY})
        assert response.status_code == 422, (path, response.text[:300])
        assert len(response.content) < 2_000, (path, len(response.content))
        assert response.json()['detail'][0]['loc'][0] == 'body'
    broken = client.post('/ask', content='{"question": "' + 'y' * 50_000,
                         headers={'X-API-Key': KEY, 'Content-Type': 'application/json'})
    assert broken.status_code == 422 and len(broken.content) < 2_000


def test_a_body_without_the_json_content_type_gets_a_clear_415(client):
    """`curl -d '{...}'` sends application/x-www-form-urlencoded: the reply says which header to send."""
    body = json.dumps({'question': 'What is the API rate limit?'})
    for content_type in ('application/x-www-form-urlencoded', 'text/plain'):
        for path in ('/ask', '/retrieve', '/answer'):
            response = client.post(path, content=body, headers={'X-API-Key': KEY, 'Content-Type': content_type})
            assert response.status_code == 415, (path, response.text)
            assert "Content-Type: application/json" in response.json()['detail']
    as_json = client.post('/ask', content=body, headers={'X-API-Key': KEY, 'Content-Type': 'application/json'})
    assert as_json.status_code == 200 and '600 requests per minute' in as_json.json()['answer']


# ---- errors by kind at the edges: non-finite numbers, oversized structures, a store outage (issue 25) ---------------
ENDPOINTS = ('/ask', '/retrieve', '/answer')
FIELD_TEMPLATES = ('"question": %s', '"question": "x", "intent": %s', '"question": "x", "mode": %s',
                   '"question": "x", "k": %s', '"question": "x", "scope": %s', '"question": "x", "k": [%s]',
                   '"question": "x", "scope": {"sourceId": %s}', '"question": "x", "scope": {"sourceId": [%s]}',
                   '"question": "x", "scope": {"sourceRef": %s}', '"question": "x", "scope": {"tags": [%s]}',
                   '"question": "x", "extra": %s')


def strict_json(content: bytes):
    """Parse a reply as JSON that any client accepts (no NaN, no Infinity)."""
    def refuse(constant):
        raise ValueError(f'{constant} in a reply')
    return json.loads(content, parse_constant=refuse)


@pytest.mark.parametrize('value', ['NaN', 'Infinity', '-Infinity', '1e400', '-1e999'])
def test_non_finite_numbers_are_refused_when_the_body_is_read(rag, value):
    """Python's json reads NaN and Infinity (1e400 too): every field of every endpoint refuses them with a short
    422 that says why and echoes nothing."""
    from rag_plugin.server import create_app
    client = TestClient(create_app(rag, api_key=KEY, rate_limit=0))
    for path in ENDPOINTS:
        for template in FIELD_TEMPLATES:
            body = ('{' + template % value + '}').encode()
            response = client.post(path, content=body, headers={'X-API-Key': KEY, 'Content-Type': 'application/json'})
            assert response.status_code == 422, (path, template, response.text[:200])
            [error] = strict_json(response.content)['detail']
            assert error['type'] == 'json_invalid' and 'finite' in error['msg'], error
            assert value.lstrip('-') not in response.text and len(response.content) < 500


@pytest.mark.parametrize('body', [
    '{"question": "x", "scope": {"tags": ' + '[' * 900 + ']' * 900 + '}}',
    '{"question": "x", "scope": ' + '{"a": ' * 40 + '1' + '}' * 40 + '}',
    '[' * 30_000 + ']' * 30_000,
    '{"question": "x", "k": ' + '7' * 5_000 + '}',
    '{"question": "x", "scope": {"tags": ["' + '", "'.join(f't{n}' for n in range(800)) + '"]}}',
    '{"question": "x", "scope": {"sourceId": ["' + '", "'.join(f's{n}' for n in range(3_000)) + '"]}}',
])
def test_oversized_structures_are_422(rag, body):
    """Deep nesting (a RecursionError: 500), a 5,000-digit number (400), 800 tags (the store's expression tree
    overflowed: 503, or "I can't search" on /ask) and 3,000 source ids: each is the caller's mistake, a 422."""
    from rag_plugin.server import create_app
    client = TestClient(create_app(rag, api_key=KEY, rate_limit=0, max_body_bytes=64_000),
                        raise_server_exceptions=False)
    for path in ENDPOINTS:
        response = client.post(path, content=body.encode(),
                               headers={'X-API-Key': KEY, 'Content-Type': 'application/json'})
        assert response.status_code == 422, (path, response.status_code, response.text[:300])
        assert len(response.content) < 1_000 and strict_json(response.content)['detail']


# ---- the fuzz test: every field, every endpoint, never a 500 ---------------------------------------------------------
def _junk(rng) -> str:
    """A JSON text fragment a careless or hostile client might send as a value."""
    n = rng.choice([2, 40, 900, 5_000])
    makers = (
        lambda: rng.choice(['NaN', 'Infinity', '-Infinity', '1e400', '-0', '0', '-1', '101', '3.5', '1e-400',
                            '99999999999999999999999', 'true', 'false', 'null', '""', '" "', '{}', '[]']),
        lambda: json.dumps(''.join(chr(rng.randrange(0x110000)) for _ in range(rng.choice([1, 30, 500])))),
        lambda: json.dumps('\udfff\x00\ud800\u202e' * rng.choice([1, 100])),  # lone surrogates, NUL, RTL override
        lambda: json.dumps(rng.choice(['x', 'What is the API rate limit?', 'é😀']) * rng.choice([1, 300, 5_000])),
        lambda: '[' + ', '.join([rng.choice(['"t"', '1', 'null', '{}', 'NaN', '[]'])] * n) + ']',
        lambda: '[' * n + ']' * n,
        lambda: '{"a": ' * min(n, 900) + '1' + '}' * min(n, 900),
        lambda: json.dumps({'sourceId': [f's{i}' for i in range(n)], 'tags': ['t'] * (n // 2)}),
        lambda: rng.choice(['"auto"', '"bootstrap"', '"specific"', '"documental"', '"codigo"', '4', '12']),
    )
    return rng.choice(makers)()


def _fuzz_request(rng) -> tuple[str, str, bytes, dict]:
    """One request: method, path, body, headers."""
    path = rng.choices(ENDPOINTS + ('/health', '/openapi.json', '/nowhere'), [8, 8, 8, 1, 1, 1])[0]
    fields = {'question': json.dumps(rng.choice(['What is the API rate limit?', 'how long do deleted notes stay in '
                                                 'trash', '', 'qué es esto?']))}
    for name in rng.sample(['intent', 'mode', 'k', 'scope', 'question', 'extra', 'y' * 300], rng.randint(0, 2)):
        fields[name] = _junk(rng)
    if rng.random() < 0.3:
        scope = {key: _junk(rng) for key in rng.sample(['sourceId', 'sourceRef', 'tags', 'other'], rng.randint(1, 2))}
        fields['scope'] = '{' + ', '.join(f'"{key}": {value}' for key, value in scope.items()) + '}'
    if rng.random() < 0.1:
        fields.pop('question')
    body = ('{' + ', '.join(f'{json.dumps(key)}: {value}' for key, value in fields.items()) + '}').encode()
    shape = rng.random()
    if shape < 0.05:
        body = rng.choice([b'', b'[]', b'null', b'"x"', b'NaN', b'{"question": ', b'\xff\xfe{', b'{"question": "x"}}'])
    elif shape < 0.1:
        body = body[:rng.randrange(len(body) + 1)]
    content_type = rng.choices(['application/json', 'application/json; charset=utf-8', 'application/problem+json',
                                'text/plain', 'application/x-www-form-urlencoded', None], [70, 5, 5, 8, 7, 5])[0]
    headers = {'X-API-Key': KEY} if rng.random() < 0.93 else rng.choice([{}, {'X-API-Key': 'wrong'}])
    if content_type:
        headers['Content-Type'] = content_type
    method = 'POST' if path in ENDPOINTS or rng.random() < 0.2 else 'GET'
    return method, path, body, headers


def _check_reply(response, request: str, store_down: bool) -> None:
    status = response.status_code
    assert status != 500, request
    assert status < 500 or (status == 503 and store_down), (request, status, response.text[:300])
    reply = strict_json(response.content) if response.headers.get('content-type', '').startswith(
        'application/json') else None
    if status >= 400:  # a short reason (/health's 503 is its report)
        assert reply is not None and ('detail' in reply or reply.get('status') == 'unavailable'), (request, status)
        assert len(response.content) < 2_000, (request, status, response.text[:300])


def test_fuzz_the_whole_api_never_answers_500(rag):
    """600 generated requests (NaN, Infinity, huge arrays, deep nesting, wrong types, huge strings, Unicode junk,
    missing and extra fields, wrong content types) on every endpoint: a 4xx or a 200, always valid JSON, never a
    500; then 60 more with the store removed, where a 503 is the honest answer."""
    import random
    import shutil

    from rag_plugin.server import create_app
    rng = random.Random(25)
    client = TestClient(create_app(rag, api_key=KEY, rate_limit=0), raise_server_exceptions=False)
    statuses = {}
    for n in range(660):
        if n == 600:
            shutil.rmtree(store_folder(rag.vector_store))
        method, path, body, headers = _fuzz_request(rng)
        response = client.request(method, path, content=body, headers=headers)
        _check_reply(response, f'#{n} {method} {path} {headers} {body[:200]!r}', store_down=n >= 600)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
    assert {200, 401, 404, 405, 415, 422} <= set(statuses), statuses
