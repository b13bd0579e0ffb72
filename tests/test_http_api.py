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
from fastapi.testclient import TestClient

KEY = 'test-key-123'
PACKAGE_KEYS = {'mode', 'intent', 'summary', 'topics', 'critical_points', 'items', 'follow_up_refs', 'scope'}
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
    assert client.get('/docs').status_code == 200
    schema = client.get('/openapi.json').json()
    assert {'/retrieve', '/answer', '/health'} <= set(schema['paths'])


def test_without_a_key_no_header_is_needed(rag):
    from rag_plugin.server import create_app
    client = TestClient(create_app(rag))
    response = client.post('/retrieve', json={'question': 'How long do deleted notes stay in the trash?'})
    assert response.status_code == 200 and response.json()['items']


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
    assert len(answer['question']) == 4000 and not answer['abstained']
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
