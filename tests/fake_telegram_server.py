"""A local fake of the Telegram Bot API, for testing bots with the real python-telegram-bot library.

Standard library only: an ``http.server`` in a daemon thread on 127.0.0.1 that answers like
``https://api.telegram.org/bot<token>/<method>`` with ``{"ok": true, "result": ...}``. It implements what a polling
bot uses: ``getMe``, ``deleteWebhook``, ``getUpdates`` (long polling on a queue of updates the test pushes),
``sendMessage`` and the other ``send*`` methods (recorded, answered with a valid Message), ``sendChatAction``,
``getFile`` and the download of the files users sent (:meth:`FakeTelegramServer.push_document`), and answers ``true``
to any other method. Point PTB at it with
``ApplicationBuilder().base_url(server.base_url).base_file_url(server.base_file_url)``.

Example::

    with FakeTelegramServer() as server:
        ...  # start the bot against server.base_url
        server.push_text(chat_id=42, text='Hello')
        replies = server.wait_for('sendMessage', count=1, timeout=30)
        assert replies[0].params['text'] == 'Hi!'
"""
from __future__ import annotations

import contextlib
import email.parser
import email.policy
import json
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Optional
from urllib.parse import parse_qsl, urlsplit

_API_PATH = re.compile(r'^/bot(?P<token>[^/]+)/(?P<method>[A-Za-z]+)/?$')
_FILE_PATH = re.compile(r'^/file/bot(?P<token>[^/]+)/documents/(?P<file_id>[\w-]+)$')


@dataclass
class ApiCall:
    """One request the bot made.

    Attributes:
        method (str): the Bot API method, as spelled in the URL (``sendMessage``)
        params (dict): the parameters, as sent (PTB sends form fields: strings, JSON-encoded for non-strings)
        token (str): the bot token of the URL
        time (float): ``time.monotonic()`` when it arrived
    """
    method: str
    params: dict
    token: str
    time: float = field(default_factory=time.monotonic)

    def json_param(self, name: str, default: Any = None) -> Any:
        """A parameter decoded from JSON when it is JSON (PTB encodes lists, dicts and numbers so), else as sent."""
        value = self.params.get(name, default)
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value


class FakeTelegramServer:
    """A fake Telegram Bot API server on 127.0.0.1 (see the module docstring).

    Args:
        host (str): the address to listen on
        port (int): the port (0: a free one)
        poll_wait (float): the longest a ``getUpdates`` waits for an update before answering ``[]`` (the real API
            waits ``timeout`` seconds; shorter keeps bot shutdown fast)
        bot_id (int): the id of the fake bot user
        bot_username (str): the username of the fake bot user

    Attributes:
        calls (list[ApiCall]): every request, in order of arrival
        errors (dict[str, list[tuple[int, str]]]): per method, errors to answer to the next calls instead of results
            (see :meth:`fail_next`)
    """

    def __init__(self, host: str = '127.0.0.1', port: int = 0, poll_wait: float = 0.2, bot_id: int = 123456789,
                 bot_username: str = 'fake_rag_bot'):
        self.host: str = host
        self.poll_wait: float = poll_wait
        self.bot_user: dict = {'id': bot_id, 'is_bot': True, 'first_name': 'Fake RAG bot', 'username': bot_username,
                               'can_join_groups': True, 'can_read_all_group_messages': False,
                               'supports_inline_queries': False}
        self.calls: list[ApiCall] = []
        self.errors: dict[str, list[tuple[int, str]]] = {}
        self._updates: list[dict] = []
        self._files: dict[str, bytes] = {}
        self._next_update_id: int = 1
        self._next_message_id: int = 1
        self._condition = threading.Condition()
        self._server = _QuietHTTPServer((host, port), self._handler_class())
        self._thread: Optional[threading.Thread] = None

    # ---- life cycle -------------------------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """int: the port the server listens on."""
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """str: the Bot API base URL for PTB's ``ApplicationBuilder.base_url`` (the token and method follow)."""
        return f'http://{self.host}:{self.port}/bot'

    @property
    def base_file_url(self) -> str:
        """str: the file base URL for PTB's ``ApplicationBuilder.base_file_url`` (the token and file path follow)."""
        return f'http://{self.host}:{self.port}/file/bot'

    def start(self) -> 'FakeTelegramServer':
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={'poll_interval': 0.1},
                                        name='fake-telegram-server', daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and close the socket."""
        with self._condition:
            self._condition.notify_all()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout)
        self._server.server_close()

    def __enter__(self) -> 'FakeTelegramServer':
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # ---- what the test does -----------------------------------------------------------------------------------------
    def push_update(self, update: dict) -> int:
        """Queue an update (its ``update_id`` is set) for the bot's next ``getUpdates``; return its id."""
        with self._condition:
            update = dict(update, update_id=self._next_update_id)
            self._next_update_id += 1
            self._updates.append(update)
            self._condition.notify_all()
        return update['update_id']

    def push_text(self, chat_id: int, text: str, user_id: Optional[int] = None, first_name: str = 'Tester') -> int:
        """Queue a private text message from a user (a ``/command`` gets its bot_command entity); return the
        update id."""
        user = {'id': user_id or chat_id, 'is_bot': False, 'first_name': first_name, 'language_code': 'en'}
        message = {'message_id': self._new_message_id(), 'date': int(time.time()),
                   'chat': {'id': chat_id, 'type': 'private', 'first_name': first_name},
                   'from': user, 'text': text}
        command = re.match(r'/\w+(@\w+)?', text)
        if command:
            message['entities'] = [{'type': 'bot_command', 'offset': 0, 'length': command.end()}]
        return self.push_update({'message': message})

    def push_document(self, chat_id: int, file_name: str, data: bytes, mime_type: str = 'text/markdown',
                      first_name: str = 'Tester') -> int:
        """Queue a private message with a file (a Telegram ``document``), downloadable through ``getFile``; return the
        update id."""
        file_id = f'document-{len(self._files) + 1}'
        self._files[file_id] = data
        user = {'id': chat_id, 'is_bot': False, 'first_name': first_name, 'language_code': 'en'}
        message = {'message_id': self._new_message_id(), 'date': int(time.time()),
                   'chat': {'id': chat_id, 'type': 'private', 'first_name': first_name}, 'from': user,
                   'document': {'file_id': file_id, 'file_unique_id': file_id, 'file_name': file_name,
                                'mime_type': mime_type, 'file_size': len(data)}}
        return self.push_update({'message': message})

    def fail_next(self, method: str, description: str, error_code: int = 400) -> None:
        """Answer the next call of ``method`` with an error (e.g. ``"Bad Request: can't parse entities"``)."""
        with self._condition:
            self.errors.setdefault(method, []).append((error_code, description))

    def requests(self, method: str) -> list[ApiCall]:
        """The calls of one method so far, in order."""
        with self._condition:
            return [call for call in self.calls if call.method == method]

    def wait_for(self, method: str, count: int = 1, timeout: float = 30.0,
                 predicate: Optional[Callable[[ApiCall], bool]] = None) -> list[ApiCall]:
        """Wait until at least ``count`` calls of ``method`` (matching ``predicate``) arrived; return them all.

        Raises:
            TimeoutError: when they did not arrive in time
        """
        deadline = time.monotonic() + timeout
        with self._condition:
            while True:
                matching = [c for c in self.calls if c.method == method and (predicate is None or predicate(c))]
                if len(matching) >= count:
                    return matching
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    seen = [(c.method, c.params.get('text')) for c in self.calls if c.method != 'getUpdates']
                    raise TimeoutError(f'{count} {method} call(s) expected within {timeout} s, got '
                                       f'{len(matching)}; other calls: {seen}')
                self._condition.wait(remaining)

    def sent_texts(self) -> list[str]:
        """The texts of the ``sendMessage`` calls so far."""
        return [call.params.get('text') for call in self.requests('sendMessage')]

    # ---- the API ----------------------------------------------------------------------------------------------------
    def _new_message_id(self) -> int:
        with self._condition:
            self._next_message_id += 1
            return self._next_message_id - 1

    def _record(self, call: ApiCall) -> Optional[tuple[int, str]]:
        """Record a call; return the error to answer, if one is queued for its method."""
        with self._condition:
            self.calls.append(call)
            self._condition.notify_all()
            queued = self.errors.get(call.method)
            return queued.pop(0) if queued else None

    def handle(self, call: ApiCall) -> dict:
        """Answer one API call with a Bot API response object."""
        error = self._record(call)
        if error is not None:
            return {'ok': False, 'error_code': error[0], 'description': error[1]}
        name = call.method.lower()
        if name == 'getupdates':
            return {'ok': True, 'result': self._get_updates(call)}
        if name == 'getme':
            return {'ok': True, 'result': self.bot_user}
        if name == 'getfile':
            file_id = call.params.get('file_id')
            if file_id not in self._files:
                return {'ok': False, 'error_code': 400, 'description': 'Bad Request: invalid file_id'}
            return {'ok': True, 'result': {'file_id': file_id, 'file_unique_id': file_id,
                                           'file_size': len(self._files[file_id]), 'file_path': f'documents/{file_id}'}}
        if name == 'getwebhookinfo':
            return {'ok': True, 'result': {'url': '', 'has_custom_certificate': False, 'pending_update_count': 0}}
        if name == 'sendchataction' or not name.startswith('send'):
            return {'ok': True, 'result': True}  # deleteWebhook, setMyCommands, close...
        return {'ok': True, 'result': self._sent_message(call)}

    def _get_updates(self, call: ApiCall) -> list[dict]:
        offset = int(call.json_param('offset', 0) or 0)
        limit = int(call.json_param('limit', 100) or 100)
        wait = min(float(call.json_param('timeout', 0) or 0), self.poll_wait)
        deadline = time.monotonic() + wait
        with self._condition:
            self._updates = [u for u in self._updates if u['update_id'] >= offset]  # offset confirms older ones
            while not self._updates and time.monotonic() < deadline:
                self._condition.wait(deadline - time.monotonic())
            return [dict(u) for u in self._updates[:limit]]

    def _sent_message(self, call: ApiCall) -> dict:
        chat_id = call.json_param('chat_id')
        chat = {'id': chat_id if isinstance(chat_id, int) else 0, 'type': 'private'}
        if not isinstance(chat_id, int):
            chat.update(type='channel', username=str(chat_id).lstrip('@'))
        message = {'message_id': self._new_message_id(), 'date': int(time.time()), 'chat': chat,
                   'from': self.bot_user}
        if 'text' in call.params:
            message['text'] = call.params['text']
        if 'caption' in call.params:
            message['caption'] = call.params['caption']
        return message

    # ---- HTTP -------------------------------------------------------------------------------------------------------
    def _handler_class(self) -> type:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                download = _FILE_PATH.match(urlsplit(self.path).path)
                if download is not None:
                    self._send(200, server._files.get(download['file_id'], b''), 'application/octet-stream')
                    return
                self._answer(dict(parse_qsl(urlsplit(self.path).query, keep_blank_values=True)))

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get('Content-Length') or 0)
                body = self.rfile.read(length) if length else b''
                params = dict(parse_qsl(urlsplit(self.path).query, keep_blank_values=True))
                params.update(_parse_body(self.headers.get('Content-Type', ''), body))
                self._answer(params)

            def _answer(self, params: dict) -> None:
                match = _API_PATH.match(urlsplit(self.path).path)
                if match is None:
                    response, status = {'ok': False, 'error_code': 404, 'description': 'Not Found'}, 404
                else:
                    response = server.handle(ApiCall(match['method'], params, match['token']))
                    status = 200 if response['ok'] else response['error_code']
                self._send(status, json.dumps(response).encode(), 'application/json')

            def _send(self, status: int, data: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header('Content-Type', content_type)
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


class _QuietHTTPServer(ThreadingHTTPServer):
    """Threads per request, daemon threads, and no traceback when a client hangs up (PTB does, at shutdown)."""
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _parse_body(content_type: str, body: bytes) -> dict:
    """The parameters of a request body: JSON, URL-encoded form or multipart form (file parts kept as bytes)."""
    if not body:
        return {}
    if content_type.startswith('application/json'):
        data = json.loads(body)
        return data if isinstance(data, dict) else {}
    if content_type.startswith('multipart/form-data'):
        parser = email.parser.BytesParser(policy=email.policy.HTTP)
        message = parser.parsebytes(f'Content-Type: {content_type}\r\n\r\n'.encode() + body)
        params = {}
        for part in message.iter_parts():
            name = part.get_param('name', header='content-disposition')
            payload = part.get_payload(decode=True)
            params[name] = payload if part.get_filename() else payload.decode('utf-8')
        return params
    return dict(parse_qsl(body.decode('utf-8'), keep_blank_values=True))


@contextlib.contextmanager
def fake_bot_api(monkeypatch: Any, platform_module: Any) -> Iterator[FakeTelegramServer]:
    """A fake Bot API server, and a framework's TelegramPlatform (``platform_module``: BBF's or BAF's
    ``telegram_platform`` module) building its PTB Application against it (``monkeypatch``: pytest's)."""
    from telegram.ext import ApplicationBuilder
    monkeypatch.setenv('NO_PROXY', '127.0.0.1,localhost')
    with FakeTelegramServer() as server:
        monkeypatch.setattr(platform_module, 'ApplicationBuilder',
                            lambda: ApplicationBuilder().base_url(server.base_url).base_file_url(server.base_file_url))
        yield server


@contextlib.contextmanager
def telegram_owner_running(owner: Any, server: FakeTelegramServer, timeout: float = 30) -> Iterator[None]:
    """Run a BBF bot or BAF agent until the block ends, then stop it; its platform threads must have ended."""
    owner.run(sleep=False)
    threads = list(owner._platforms_threads)
    try:
        server.wait_for('getUpdates', timeout=timeout)  # PTB is polling
        yield
    finally:
        stopper = threading.Thread(target=owner.stop, daemon=True)
        stopper.start()
        stopper.join(20)
    assert not stopper.is_alive(), 'the bot or agent did not stop within 20 s'
    for thread in threads:
        thread.join(5)
    assert not any(thread.is_alive() for thread in threads), 'the Telegram platform thread is still running'
