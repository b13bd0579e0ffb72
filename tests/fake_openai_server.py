"""Local OpenAI-compatible HTTP server for tests.

Tests start a :class:`FakeOpenAIServer` on ``127.0.0.1`` and point the real
``openai`` / ``langchain-openai`` clients at :attr:`FakeOpenAIServer.base_url`,
so the actual client code (httpx transport, retries, SSE parsing, timeouts)
runs without any network access beyond the loopback interface.

Only the standard library is used.

Example:
    >>> with FakeOpenAIServer() as srv:                      # doctest: +SKIP
    ...     srv.responder = lambda body: "hello world"
    ...     srv.faults.append(429)          # first chat request -> 429
    ...     client = openai.OpenAI(base_url=srv.base_url, api_key="test")
    ...     client.chat.completions.create(model="m", messages=[...])

Supported endpoints:
    * ``POST /v1/chat/completions`` -- non-streaming and streaming (SSE,
      chunked transfer encoding, one word per chunk).
    * ``POST /v1/embeddings`` -- deterministic 8-dim vectors derived from a
      hash of each input (``float`` or ``base64`` encoding).
    * ``GET /v1/models`` -- lists one model.
    * anything else -- ``404`` with a JSON error body.

Fault injection (chat completions only): ``srv.faults`` is a FIFO queue of
faults consumed one per chat request; ``srv.fail_always`` applies a fault to
every chat request while it is not ``None``. Fault values:

    * ``429`` -- rate limit error (JSON body, ``retry-after: 0`` header).
    * ``500`` / ``503`` (or any other int >= 400) -- error with JSON body;
      ``400`` is a non-transient client error.
    * ``"hang"`` -- wait ``srv.hang_seconds`` before answering normally
      (interrupted immediately by :meth:`FakeOpenAIServer.close`).
    * ``"blackhole"`` -- accept the request and never answer (the
      connection stays open until :meth:`FakeOpenAIServer.close`).
    * ``"malformed"`` -- HTTP 200, ``application/json``, invalid JSON body.
    * ``"stream_break"`` -- streaming: send two content chunks then drop the
      connection without the terminating chunk / ``[DONE]``; non-streaming:
      announce a Content-Length, send part of the body and drop the connection.

Observed client behaviour (openai 1.24.0, langchain-openai 0.1.7, httpx 0.27);
"openai" is ``OpenAI().chat.completions.create``, "lc" is ``ChatOpenAI``:
    * ``429`` -> ``openai.RateLimitError`` (retried when ``max_retries >= 1``;
      ``retry-after: 0`` is ignored by openai, which then backs off ~0.75-1 s
      for the first retry; set ``srv.retry_after_ms`` for fast retries).
    * ``500`` / ``503`` -> ``openai.InternalServerError`` (retried when
      ``max_retries >= 1``).
    * ``400`` -> ``openai.BadRequestError`` (never retried).
    * ``"malformed"`` -> ``json.JSONDecodeError`` from openai and lc
      ``invoke`` (raised by ``response.json()``; not wrapped, not retried).
      With ``stream=True`` openai yields nothing and raises nothing, and lc
      ``.stream()`` raises a bare ``AssertionError`` (no chunk was generated).
    * ``"hang"`` with a client timeout -> ``openai.APITimeoutError`` (cause
      ``httpx.ReadTimeout``), streaming or not.
    * ``"stream_break"`` while streaming -> ``httpx.RemoteProtocolError``
      ("peer closed connection without sending complete message body
      (incomplete chunked read)") raised mid-iteration, after the first
      chunks were delivered; neither openai nor lc wraps it. Non-streaming
      -> ``openai.APIConnectionError`` (cause ``httpx.RemoteProtocolError``).
    * A request hanging when :meth:`FakeOpenAIServer.close` is called ->
      ``openai.APIConnectionError`` on the client, immediately.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
import struct
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

__all__ = ["FakeOpenAIServer", "default_responder"]


class _HeaderDict(dict):
    """A plain ``dict`` of request headers with case-insensitive lookups.

    Keys are stored lower-cased; ``d["Authorization"]``, ``d.get("authorization")``
    and ``"AUTHORIZATION" in d`` all work.
    """

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.lower())

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(key.lower(), default)


def _message_text(content: Any) -> str:
    """Flattens an OpenAI message ``content`` (str or list of parts) to text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return " ".join(parts)
    return "" if content is None else str(content)


def default_responder(request_json: dict) -> str:
    """Deterministic default reply: ``"ANSWER: "`` + last user message[:60].

    Args:
        request_json: The parsed chat completion request body.

    Returns:
        The reply text.
    """
    last_user = ""
    for msg in request_json.get("messages") or []:
        if isinstance(msg, dict) and msg.get("role") == "user":
            last_user = _message_text(msg.get("content"))
    return "ANSWER: " + last_user[:60]


def _fake_embedding(value: Any, dim: int = 8) -> list[float]:
    """Returns a deterministic unit-norm ``dim``-dim vector for ``value``."""
    text = value if isinstance(value, str) else json.dumps(value)
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    raw = [(digest[i] / 127.5) - 1.0 for i in range(dim)]
    norm = sum(x * x for x in raw) ** 0.5 or 1.0
    return [x / norm for x in raw]


def _split_words(text: str) -> list[str]:
    """Splits ``text`` into word pieces that concatenate back to ``text``."""
    pieces = re.findall(r"\s*\S+\s*", text)
    if not pieces:
        return [text] if text else []
    # Leading/inner/trailing whitespace is kept, so the pieces join back exactly.
    return pieces if "".join(pieces) == text else [text]


class _Handler(BaseHTTPRequestHandler):
    """Request handler; the owning FakeOpenAIServer is ``self.server.fake``."""

    protocol_version = "HTTP/1.1"
    server_version = "FakeOpenAI/1.0"

    # ----------------------------------------------------------- plumbing
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Silences the default stderr access log."""

    def setup(self) -> None:
        """Registers the connection so that ``close()`` can drop it."""
        super().setup()
        try:  # avoid Nagle/delayed-ACK stalls between header and body writes
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        self.server.fake._register_conn(self.connection)

    def finish(self) -> None:
        """Unregisters the connection."""
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.fake._unregister_conn(self.connection)

    def handle_one_request(self) -> None:
        """Handles a request, swallowing errors caused by dropped connections."""
        try:
            super().handle_one_request()
        except (ConnectionError, OSError):
            self.close_connection = True

    @property
    def fake(self) -> "FakeOpenAIServer":
        return self.server.fake

    def _read_body(self) -> tuple[bytes, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        if not raw:
            return raw, None
        try:
            return raw, json.loads(raw)
        except ValueError:
            return raw, None

    def _record(self, body_json: Any) -> None:
        headers = _HeaderDict((k.lower(), v) for k, v in self.headers.items())
        self.fake._record(
            {
                "method": self.command,
                "path": self.path,
                "headers": headers,
                "json": body_json,
            }
        )

    def _send_json(self, status: int, payload: Any, extra_headers: dict | None = None) -> None:
        data = json.dumps(payload).encode("utf-8")
        self._send_bytes(status, data, "application/json", extra_headers)

    def _send_bytes(
        self,
        status: int,
        data: bytes,
        content_type: str,
        extra_headers: dict | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (extra_headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_error_json(self, status: int, message: str, err_type: str, extra: dict | None = None) -> None:
        self._send_json(
            status,
            {"error": {"message": message, "type": err_type, "param": None, "code": None}},
            extra,
        )

    def _abort_connection(self) -> None:
        """Drops the TCP connection immediately."""
        self.close_connection = True
        try:
            self.wfile.flush()
        except OSError:
            pass
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # ----------------------------------------------------------- routing
    def do_GET(self) -> None:
        """Handles GET requests."""
        _, body_json = self._read_body()
        self._record(body_json)
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/v1/models":
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": self.fake.model_name,
                            "object": "model",
                            "created": 0,
                            "owned_by": "fake-openai",
                        }
                    ],
                },
            )
        else:
            self._not_found()

    def do_POST(self) -> None:
        """Handles POST requests."""
        _, body_json = self._read_body()
        self._record(body_json)
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/v1/chat/completions":
            self._chat(body_json if isinstance(body_json, dict) else {})
        elif path == "/v1/embeddings":
            self._embeddings(body_json if isinstance(body_json, dict) else {})
        else:
            self._not_found()

    def _not_found(self) -> None:
        self._send_error_json(404, f"Unknown path {self.command} {self.path}", "invalid_request_error")

    # ----------------------------------------------------------- endpoints
    def _embeddings(self, body: dict) -> None:
        inputs = body.get("input")
        if isinstance(inputs, str) or (
            isinstance(inputs, list) and inputs and isinstance(inputs[0], int)
        ):
            inputs = [inputs]  # a single string or a single token array
        inputs = list(inputs or [])
        b64 = body.get("encoding_format") == "base64"
        data = []
        for i, item in enumerate(inputs):
            vec = _fake_embedding(item, self.fake.embedding_dim)
            emb: Any = (
                base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode("ascii") if b64 else vec
            )
            data.append({"object": "embedding", "index": i, "embedding": emb})
        self._send_json(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model") or self.fake.model_name,
                "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)},
            },
        )

    def _chat(self, body: dict) -> None:
        fake = self.fake
        fault = fake._next_fault()
        stream = bool(body.get("stream"))

        if fault == "blackhole":
            fake._stop.wait()
            self._abort_connection()
            return
        if fault == "hang":
            fake._stop.wait(fake.hang_seconds)
            if fake._stop.is_set():
                self._abort_connection()
                return
            fault = None
        if isinstance(fault, int) and not isinstance(fault, bool):
            self._send_fault_status(fault)
            return
        if fault == "malformed":
            self._send_bytes(200, b'{"choices": [ {oops', "application/json")
            return
        if fault not in (None, "stream_break"):
            self._send_error_json(500, f"unknown fault {fault!r}", "server_error")
            return

        try:
            text = fake.responder(body)
        except Exception as exc:  # surface responder bugs as a 500
            self._send_error_json(500, f"responder raised {exc!r}", "server_error")
            return
        text = "" if text is None else str(text)
        model = body.get("model") or fake.model_name

        if stream:
            self._stream_chat(text, model, broken=fault == "stream_break")
        else:
            self._complete_chat(body, text, model, broken=fault == "stream_break")

    def _send_fault_status(self, status: int) -> None:
        if status == 429:
            extra = {"retry-after": "0"}
            if self.fake.retry_after_ms is not None:
                extra["retry-after-ms"] = str(self.fake.retry_after_ms)
            self._send_error_json(429, "Rate limit reached (fake)", "rate_limit_error", extra)
        elif status >= 500:
            self._send_error_json(status, f"Fake server error {status}", "server_error")
        else:
            self._send_error_json(status, f"Fake client error {status}", "invalid_request_error")

    def _complete_chat(self, body: dict, text: str, model: str, broken: bool) -> None:
        prompt_tokens = sum(
            len(_message_text(m.get("content")).split())
            for m in body.get("messages") or []
            if isinstance(m, dict)
        )
        completion_tokens = len(text.split())
        payload = {
            "id": "chatcmpl-" + uuid.uuid4().hex[:24],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        data = json.dumps(payload).encode("utf-8")
        if not broken:
            self._send_bytes(200, data, "application/json")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self._abort_connection()

    def _stream_chat(self, text: str, model: str, broken: bool) -> None:
        fake = self.fake
        chunk_id = "chatcmpl-" + uuid.uuid4().hex[:24]
        created = int(time.time())

        def chunk(delta: dict, finish_reason: str | None = None) -> dict:
            return {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
                ],
            }

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

        events: list[dict] = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": piece}) for piece in _split_words(text)]
        if broken:
            # role chunk + two content chunks, then drop the connection.
            for event in events[:3]:
                self._write_sse(json.dumps(event))
            self._abort_connection()
            return
        events.append(chunk({}, "stop"))

        for i, event in enumerate(events):
            if i and fake.stream_delay:
                if fake._stop.wait(fake.stream_delay):
                    self._abort_connection()
                    return
            self._write_sse(json.dumps(event))
        self._write_sse("[DONE]")
        self.wfile.write(b"0\r\n\r\n")  # terminating chunk
        self.wfile.flush()

    def _write_sse(self, data: str) -> None:
        payload = f"data: {data}\n\n".encode("utf-8")
        self.wfile.write(f"{len(payload):X}\r\n".encode("ascii") + payload + b"\r\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignores errors from connections dropped by clients."""


class FakeOpenAIServer:
    """A local OpenAI-compatible HTTP server with fault injection.

    Attributes:
        requests: Every received request, in arrival order, as dicts with keys
            ``method``, ``path``, ``headers`` (dict with lower-cased keys and
            case-insensitive lookups) and ``json`` (parsed body or ``None``).
        responder: Callable ``(request_json) -> str`` producing chat replies.
        faults: FIFO list of faults, one consumed per chat completion request.
        fail_always: A fault applied to every chat request while not ``None``
            (takes precedence over ``faults``, which are then not consumed).
        hang_seconds: How long a ``"hang"`` fault waits (default 30).
        stream_delay: Seconds between streamed chunks (default 0).
        retry_after_ms: If not ``None``, 429 responses also carry a
            ``retry-after-ms`` header (openai honours values in (0, 60000]).
        model_name: Model id reported by ``/v1/models`` and used when a
            request has no model.
        embedding_dim: Dimension of the fake embeddings (default 8).
    """

    def __init__(
        self,
        responder: Callable[[dict], str] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model_name: str = "fake-model",
    ) -> None:
        """Creates the server (not yet listening; see :meth:`start`).

        Args:
            responder: Chat reply producer; defaults to :func:`default_responder`.
            host: Interface to bind (loopback by default).
            port: Port to bind; 0 picks a free port.
            model_name: Model id reported by the server.
        """
        self.responder: Callable[[dict], str] = responder or default_responder
        self.requests: list[dict] = []
        self.faults: list[Any] = []
        self.fail_always: Any = None
        self.hang_seconds: float = 30.0
        self.stream_delay: float = 0.0
        self.retry_after_ms: float | None = None
        self.model_name = model_name
        self.embedding_dim = 8
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------- lifecycle
    def start(self) -> "FakeOpenAIServer":
        """Binds the socket and starts serving in a daemon thread.

        Returns:
            The server itself.
        """
        if self._httpd is not None:
            return self
        self._stop.clear()
        httpd = _Server((self._host, self._port), _Handler)
        httpd.fake = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._port = httpd.server_address[1]
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"FakeOpenAIServer:{self._port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stops serving and drops open connections (including hanging ones).

        Safe to call more than once; returns quickly even if a ``"hang"``
        fault is in progress.
        """
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stop.set()
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            conns = list(self._conns)
            self._conns.clear()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None

    def __enter__(self) -> "FakeOpenAIServer":
        """Starts the server; see :meth:`start`."""
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        """Closes the server; see :meth:`close`."""
        self.close()

    # ----------------------------------------------------------- info
    @property
    def port(self) -> int:
        """int: The bound TCP port (0 before :meth:`start` when port=0)."""
        return self._port

    @property
    def url(self) -> str:
        """str: Root URL, e.g. ``http://127.0.0.1:PORT``."""
        return f"http://{self._host}:{self._port}"

    @property
    def base_url(self) -> str:
        """str: OpenAI base URL, e.g. ``http://127.0.0.1:PORT/v1``."""
        return self.url + "/v1"

    @property
    def chat_requests(self) -> list[dict]:
        """list[dict]: Recorded requests to ``/v1/chat/completions``."""
        with self._lock:
            return [r for r in self.requests if r["path"].split("?")[0].rstrip("/") == "/v1/chat/completions"]

    def reset(self) -> None:
        """Clears recorded requests, pending faults and ``fail_always``."""
        with self._lock:
            self.requests.clear()
            self.faults.clear()
            self.fail_always = None

    # ----------------------------------------------------------- internals
    def _record(self, entry: dict) -> None:
        with self._lock:
            self.requests.append(entry)

    def _next_fault(self) -> Any:
        with self._lock:
            if self.fail_always is not None:
                return self.fail_always
            if self.faults:
                return self.faults.pop(0)
            return None

    def _register_conn(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.add(conn)

    def _unregister_conn(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.discard(conn)
