"""Tests for the local fake OpenAI server, driven by the REAL clients.

Only 127.0.0.1 is contacted: ``openai`` (1.24) and ``langchain-openai`` (0.1.7)
run their real httpx transport, retry, SSE and timeout code against
:class:`FakeOpenAIServer`.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import openai
import pytest
from langchain_openai import ChatOpenAI

try:  # works whether or not tests/ is a package
    from tests.fake_openai_server import FakeOpenAIServer, default_responder
except ImportError:  # pragma: no cover - rootdir/prepend import mode
    from fake_openai_server import FakeOpenAIServer, default_responder

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is RAG?"},
]


@pytest.fixture
def srv():
    """A started FakeOpenAIServer, closed after the test."""
    with FakeOpenAIServer() as server:
        yield server


def _client(srv: FakeOpenAIServer, **kwargs) -> openai.OpenAI:
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("timeout", 5)
    return openai.OpenAI(base_url=srv.base_url, api_key="test", **kwargs)


def _chat(srv: FakeOpenAIServer, **kwargs) -> ChatOpenAI:
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("timeout", 2)
    return ChatOpenAI(base_url=srv.base_url, api_key="test", model="fake-model", **kwargs)


# --------------------------------------------------------------------- basics
def test_base_url_and_lifecycle():
    server = FakeOpenAIServer()
    with server as srv:
        assert srv is server
        assert srv.port > 0
        assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"
    server.close()  # idempotent
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.base_url + "/models", timeout=1)


def test_openai_chat_completion_uses_responder_and_records_request(srv):
    srv.responder = lambda body: "custom reply for " + body["model"]
    resp = _client(srv).chat.completions.create(model="gpt-test", messages=MESSAGES)

    assert resp.choices[0].message.content == "custom reply for gpt-test"
    assert resp.choices[0].message.role == "assistant"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.model == "gpt-test"
    assert resp.object == "chat.completion"
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens

    assert len(srv.requests) == 1
    req = srv.requests[0]
    assert req["method"] == "POST"
    assert req["path"] == "/v1/chat/completions"
    assert req["json"]["model"] == "gpt-test"
    assert req["json"]["messages"] == MESSAGES
    assert req["headers"]["Authorization"] == "Bearer test"
    assert req["headers"]["authorization"] == "Bearer test"  # case-insensitive
    assert srv.chat_requests == srv.requests


def test_default_responder_is_deterministic(srv):
    long_q = "x" * 100
    resp = _client(srv).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "first"}, {"role": "user", "content": long_q}]
    )
    assert resp.choices[0].message.content == "ANSWER: " + "x" * 60
    assert default_responder({"messages": [{"role": "user", "content": "hi"}]}) == "ANSWER: hi"


def test_langchain_invoke(srv):
    msg = _chat(srv).invoke("hi")
    assert msg.content == "ANSWER: hi"
    assert srv.requests[-1]["json"]["model"] == "fake-model"
    assert srv.requests[-1]["json"]["messages"] == [{"role": "user", "content": "hi"}]


def test_langchain_stream_yields_several_chunks(srv):
    srv.responder = lambda body: "one two three four five"
    chunks = [c.content for c in _chat(srv).stream("hi")]
    assert len([c for c in chunks if c]) > 1
    assert "".join(chunks) == "one two three four five"
    assert srv.requests[-1]["json"]["stream"] is True


def test_openai_stream_with_delay(srv):
    srv.responder = lambda body: "alpha beta gamma"
    srv.stream_delay = 0.05
    stream = _client(srv).chat.completions.create(model="m", messages=MESSAGES, stream=True)
    arrivals, pieces, finish = [], [], None
    for chunk in stream:
        arrivals.append(time.monotonic())
        pieces.append(chunk.choices[0].delta.content or "")
        finish = chunk.choices[0].finish_reason or finish
    assert "".join(pieces) == "alpha beta gamma"
    assert finish == "stop"
    # one chunk per word (plus role and stop chunks): the answer is streamed, not sent in one piece
    assert sum(1 for p in pieces if p) == 3 and len(arrivals) >= 4


def test_embeddings_models_and_404(srv):
    client = _client(srv)
    emb = client.embeddings.create(model="emb", input=["a", "b", "a"])  # base64 if numpy present
    vecs = [d.embedding for d in emb.data]
    assert all(len(v) == 8 for v in vecs)
    assert vecs[0] == pytest.approx(vecs[2]) and vecs[0] != pytest.approx(vecs[1])
    emb_f = client.embeddings.create(model="emb", input="a", encoding_format="float")
    assert emb_f.data[0].embedding == pytest.approx(vecs[0], abs=1e-6)

    assert [m.id for m in client.models.list()] == ["fake-model"]

    r = httpx.post(srv.url + "/v1/nope", json={})
    assert r.status_code == 404
    assert "error" in r.json()
    assert srv.requests[-1]["path"] == "/v1/nope"


# --------------------------------------------------------------------- faults
def test_429_then_success_with_one_retry(srv):
    srv.faults.append(429)
    resp = _client(srv, max_retries=1).chat.completions.create(model="m", messages=MESSAGES)
    assert resp.choices[0].message.content == "ANSWER: What is RAG?"
    assert len(srv.requests) == 2
    assert srv.faults == []


def test_429_without_retries_raises_rate_limit_error(srv):
    srv.faults.append(429)
    with pytest.raises(openai.RateLimitError) as exc_info:
        _client(srv).chat.completions.create(model="m", messages=MESSAGES)
    assert exc_info.value.response.headers["retry-after"] == "0"
    assert exc_info.value.body["type"] == "rate_limit_error"


def test_faults_are_fifo_and_fail_always(srv):
    client = _client(srv)
    srv.faults.extend([500, 400])
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=MESSAGES)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=MESSAGES)
    client.chat.completions.create(model="m", messages=MESSAGES)  # queue empty

    srv.fail_always = 503
    for _ in range(2):
        with pytest.raises(openai.InternalServerError) as exc_info:
            client.chat.completions.create(model="m", messages=MESSAGES)
        assert exc_info.value.status_code == 503
    srv.fail_always = None
    client.chat.completions.create(model="m", messages=MESSAGES)


def test_500_raises_internal_server_error(srv):
    srv.faults.append(500)
    with pytest.raises(openai.InternalServerError):
        _client(srv).chat.completions.create(model="m", messages=MESSAGES)
    srv.faults.append(500)
    with pytest.raises(openai.InternalServerError):
        _chat(srv).invoke("hi")


def test_400_raises_bad_request_and_is_not_retried(srv):
    srv.fail_always = 400
    with pytest.raises(openai.BadRequestError):
        _client(srv, max_retries=2).chat.completions.create(model="m", messages=MESSAGES)
    assert len(srv.requests) == 1


def test_malformed_raises(srv):
    # Observed: openai 1.24 raises json.JSONDecodeError (from response.json(),
    # not wrapped in an openai.APIError) and does NOT retry it;
    # langchain-openai 0.1.7 invoke() raises the same JSONDecodeError.
    srv.faults.append("malformed")
    with pytest.raises(json.JSONDecodeError):
        _client(srv, max_retries=2).chat.completions.create(model="m", messages=MESSAGES)
    assert len(srv.requests) == 1
    srv.faults.append("malformed")
    with pytest.raises(json.JSONDecodeError):
        _chat(srv).invoke("hi")
    # Observed: ChatOpenAI.stream() on a malformed (non-SSE) 200 reply yields
    # no chunk and raises a bare AssertionError ("generation is not None") with
    # langchain-core 0.2 (BBF), ValueError("No generation chunks were returned") with 0.3 (BAF).
    srv.faults.append("malformed")
    with pytest.raises((AssertionError, ValueError)):
        list(_chat(srv).stream("hi"))


def test_hang_times_out_quickly_and_does_not_block_close():
    start = time.monotonic()
    with FakeOpenAIServer() as srv:
        srv.hang_seconds = 5
        srv.faults.append("hang")
        with pytest.raises(openai.APITimeoutError):
            _client(srv, timeout=0.5).chat.completions.create(model="m", messages=MESSAGES)
    assert time.monotonic() - start < srv.hang_seconds  # neither the client nor close() waited for the hang


def test_hang_does_not_block_other_requests_or_close():
    start = time.monotonic()
    errors = []
    with FakeOpenAIServer() as srv:
        srv.hang_seconds = 30
        srv.faults.append("hang")

        def hanging_call():
            try:
                _client(srv, timeout=60).chat.completions.create(model="m", messages=MESSAGES)
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)

        t = threading.Thread(target=hanging_call, daemon=True)
        t.start()
        deadline = time.monotonic() + 2
        while not srv.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        # a second request is served while the first one hangs
        resp = _client(srv).chat.completions.create(model="m", messages=MESSAGES)
        assert resp.choices[0].message.content == "ANSWER: What is RAG?"
    t.join(timeout=3)
    assert not t.is_alive()
    # Observed: closing the server drops the hanging connection ->
    # openai.APIConnectionError on the client, right away.
    assert len(errors) == 1 and isinstance(errors[0], openai.APIConnectionError)
    assert time.monotonic() - start < 15  # far below the 30 s hang: close() dropped the connection


def test_stream_break(srv):
    # Observed: langchain-openai 0.1.7 (and openai 1.24 streams) deliver the
    # chunks sent before the break, then raise httpx.RemoteProtocolError
    # ("peer closed connection without sending complete message body
    # (incomplete chunked read)"); it is not wrapped in an openai error.
    srv.responder = lambda body: "one two three four five"
    srv.faults.append("stream_break")
    got = []
    with pytest.raises(httpx.RemoteProtocolError):
        for chunk in _chat(srv).stream("hi"):
            got.append(chunk.content)
    assert "".join(got) == "one two "

    # The server keeps working afterwards.
    assert "".join(c.content for c in _chat(srv).stream("hi")) == "one two three four five"


def test_stream_break_non_streaming_request(srv):
    # Observed: a truncated non-streaming body -> openai.APIConnectionError.
    srv.faults.append("stream_break")
    with pytest.raises(openai.APIConnectionError):
        _client(srv).chat.completions.create(model="m", messages=MESSAGES)


def test_requests_recorded_thread_safely(srv):
    client = _client(srv)

    def worker():
        for _ in range(5):
            client.chat.completions.create(model="m", messages=MESSAGES)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(srv.requests) == 20
    srv.reset()
    assert srv.requests == [] and srv.faults == [] and srv.fail_always is None


def test_retry_after_ms_header_is_sent_and_honoured(srv):
    # openai ignores "retry-after: 0" (only 0 < value <= 60 is honoured) and
    # backs off ~0.5-1 s; retry_after_ms adds a "retry-after-ms" header it uses.
    srv.retry_after_ms = 10
    srv.faults.extend([429, 429])
    resp = _client(srv, max_retries=2).chat.completions.create(model="m", messages=MESSAGES)
    assert resp.choices[0].message.content == "ANSWER: What is RAG?"
    assert len(srv.requests) == 3
    import httpx
    srv.faults.append(429)
    response = httpx.post(f"{srv.base_url}/chat/completions", json={"model": "m", "messages": MESSAGES},
                          headers={"Authorization": "Bearer k"})
    assert response.status_code == 429 and response.headers["retry-after-ms"] == "10"
