"""The RAG web chat: BBF's (or BAF's) websocket platform with this plugin's Streamlit UI instead of the framework's.

The UI (:mod:`rag_plugin.channels.webchat_ui`) shows answers with visible citation markers, every source with its
file, page, score and a snippet, "not found in the documents" and fallback answers in their own styles, streamed
answers in one bubble (see :func:`rag_plugin.channels.websocket.reply_rag_streaming`), and an uploader that sends
pdf / md / txt / docx files to the bot (BBF's ``user_file`` payload; handle them with a ``when_file_received_go_to``
transition to a state that calls ``rag.add_file(session.file)``; :func:`describe_ingestion` words the reply). The
uploader states and applies the limit of the bot's RAG (``rag.max_upload_mb``, 5 MB by default), so a larger file is
refused in the page, with the limit, before it is sent.

Usage::

    from rag_plugin.channels.webchat import use_rag_webchat
    websocket_platform = use_rag_webchat(bot)        # instead of bot.use_websocket_platform(use_ui=True)
    websocket_platform = use_rag_webchat(agent)      # the same on a BAF agent (its websocket platform)

The UI is started like BBF starts its own (``streamlit run <app> <bot name> <websocket host> <websocket port>``, on the
bot's ``streamlit.host`` / ``streamlit.port`` properties) when the bot runs, and stopped with the bot: by
``bot.stop()``, and also when the bot process ends without stopping it (see :mod:`.webchat_ui.launch`).
"""
from __future__ import annotations

import atexit
import logging
import math
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Optional, Sequence, Union

from rag_plugin._rag_documents import MAX_UPLOAD_MB
from rag_plugin.host import Host, host_of
from rag_plugin.wording import LANGUAGE_KEY, say

if TYPE_CHECKING:
    from besser.bot.core.bot import Bot

    from rag_plugin.ingest import IngestReport

logger = logging.getLogger(__name__)

APP_PATH = Path(__file__).resolve().parent / 'webchat_ui' / 'app.py'
"""Path: the Streamlit script of the web chat."""

UPLOAD_TYPES = ('pdf', 'md', 'txt', 'docx')
"""tuple[str]: the file types the web chat's uploader accepts."""


THEME_COLOR = '#2563eb'
"""str: the web chat's accent colour (Streamlit's default red made the input box look like an error)."""


def default_title(bot_name: str) -> str:
    """A title for people from a bot's internal name: ``rag_bot`` -> ``Rag bot``."""
    words = ' '.join(bot_name.replace('_', ' ').replace('-', ' ').split())
    return words[:1].upper() + words[1:] if words else 'RAG chat'


def upload_limit_mb(bot: 'Bot') -> float:
    """The largest file the bot's RAG adds from the chat (its ``max_upload_mb``; :data:`MAX_UPLOAD_MB` without one)."""
    rag = getattr(getattr(bot, 'nlp_engine', None), '_rag', None)  # where BBF keeps the bot's RAG
    return float(getattr(rag, 'max_upload_mb', MAX_UPLOAD_MB))


def streamlit_command(bot_name: str, websocket_host: str, websocket_port: int, ui_host: str, ui_port: int,
                      headless: bool = True, extra_args: Sequence[str] = (),
                      max_upload_mb: float = MAX_UPLOAD_MB) -> list[str]:
    """The command that runs the web chat: BBF's ``streamlit run`` arguments, with this interpreter's Streamlit
    (through :mod:`rag_plugin.channels.webchat_ui.launch`, which also stops it when the bot process ends).

    Args:
        bot_name (str): the title shown on the page and its tab
        websocket_host (str): the bot's websocket host
        websocket_port (int): the bot's websocket port
        ui_host (str): the address the UI listens on
        ui_port (int): the port the UI listens on
        headless (bool): do not open a browser (and never ask for an e-mail address on the terminal)
        extra_args (Sequence[str]): more ``streamlit run`` options (before the script)
        max_upload_mb (float): the upload limit the uploader states and applies (Streamlit counts whole MB: a
            fractional limit is rounded up, and the RAG refuses the rest)
    """
    return [
        sys.executable, '-m', 'rag_plugin.channels.webchat_ui.launch', 'run',
        '--server.address', str(ui_host),
        '--server.port', str(ui_port),
        '--server.headless', 'true' if headless else 'false',
        '--browser.gatherUsageStats', 'false',
        # coalesce the reruns that bot messages trigger instead of interrupting the run that sends the user's message
        '--runner.fastReruns', 'false',
        '--client.toolbarMode', 'minimal',
        '--runner.magicEnabled', 'false',
        '--theme.primaryColor', THEME_COLOR,
        '--server.maxUploadSize', str(max(1, math.ceil(max_upload_mb))),
        *extra_args,
        str(APP_PATH),
        bot_name, str(websocket_host), str(websocket_port),
    ]


class RAGWebChat:
    """The web chat's part of :class:`RAGWebChatPlatform`: a websocket platform of BBF or BAF (the class after this
    one in the platform's bases, see :func:`webchat_platform_class`) that runs this plugin's web chat (instead of the
    framework's UI) while the bot runs.

    Args:
        bot (Bot): the bot (or BAF agent) the platform belongs to
        headless (bool): do not open a browser when the UI starts
        ui_log (str | IO | None): where the UI's output goes (a file path or an open file); the terminal if None
        streamlit_args (Sequence[str]): more ``streamlit run`` options
        title (str): the page's title (default: the bot's name made readable, ``rag_bot`` -> ``Rag bot``)

    Attributes:
        ui_process (subprocess.Popen | None): the running Streamlit process
        title (str): the page's title
    """

    def __init__(self, bot: 'Bot', headless: bool = True, ui_log: Union[str, IO, None] = None,
                 streamlit_args: Sequence[str] = (), title: Optional[str] = None):
        super().__init__(bot, use_ui=False)  # the framework's WebSocketPlatform, without its own UI
        self._owner: Any = bot
        self._framework: Host = host_of(bot)
        self.title: str = title or default_title(bot.name)
        self.headless: bool = headless
        self.ui_log: Union[str, IO, None] = ui_log
        self.streamlit_args: tuple[str, ...] = tuple(streamlit_args)
        self.ui_process: Optional[subprocess.Popen] = None
        self._ui_log_file: Optional[IO] = None

    def _property(self, name: str) -> Any:
        """The bot's value of a websocket property of the framework (``WEBSOCKET_HOST``, ``STREAMLIT_PORT``...)."""
        return self._owner.get_property(getattr(self._framework.websocket_properties(), name))

    @property
    def ui_url(self) -> str:
        """str: the address of the web chat."""
        return f"http://{self._property('STREAMLIT_HOST')}:{self._property('STREAMLIT_PORT')}"

    def start(self) -> None:
        self.start_ui()
        super().start()

    def stop(self) -> None:
        self.stop_ui()
        super().stop()

    def start_ui(self) -> subprocess.Popen:
        """Start the Streamlit UI (once) in its own process group."""
        if self.ui_process is not None and self.ui_process.poll() is None:
            return self.ui_process
        command = streamlit_command(
            self.title,
            self._property('WEBSOCKET_HOST'), self._property('WEBSOCKET_PORT'),
            self._property('STREAMLIT_HOST'), self._property('STREAMLIT_PORT'),
            self.headless, self.streamlit_args, upload_limit_mb(self._owner))
        env = dict(os.environ)
        root = str(APP_PATH.parents[3])  # the folder holding rag_plugin, for a checkout that is not installed
        env['PYTHONPATH'] = os.pathsep.join(p for p in (root, env.get('PYTHONPATH')) if p)
        env['RAG_WEBCHAT_STOP_ON_EOF'] = '1'  # stdin is a pipe this process holds: it closes when the bot ends
        output = self.ui_log
        if isinstance(output, (str, os.PathLike)):
            output = self._ui_log_file = open(output, 'ab')
        self.ui_process = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=output,
                                           stderr=subprocess.STDOUT if output is not None else None,
                                           start_new_session=True)
        atexit.register(self.stop_ui)
        logger.info("%s's web chat starting at %s", self._owner.name, self.ui_url)
        return self.ui_process

    def stop_ui(self, timeout: float = 10.0) -> None:
        """Stop the Streamlit UI: close its stdin (it stops itself), then SIGTERM and SIGKILL its process group if it
        is still running after ``timeout`` seconds."""
        process, self.ui_process = self.ui_process, None
        if process is not None and process.stdin is not None:
            try:
                process.stdin.close()
                process.wait(timeout)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if process is not None and process.poll() is None:
            for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    process.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if process is not None:
            logger.info("%s's web chat stopped", self._owner.name)
        if self._ui_log_file is not None:
            self._ui_log_file.close()
            self._ui_log_file = None


_PLATFORM_CLASSES: dict[str, type] = {}


def webchat_platform_class(host: Host) -> type:
    """The web chat's platform class on a host: :class:`RAGWebChat` on the host's ``WebSocketPlatform`` (made once).

    Raises:
        HostError: outside a framework
    """
    if host.name not in _PLATFORM_CLASSES:
        base = host.websocket_platform_class()
        _PLATFORM_CLASSES[host.name] = type('RAGWebChatPlatform', (RAGWebChat, base), {
            '__module__': __name__,
            '__doc__': f"{host.name.upper()}'s WebSocketPlatform running the RAG web chat (see RAGWebChat)."})
    return _PLATFORM_CLASSES[host.name]


def __getattr__(name: str) -> Any:
    """``RAGWebChatPlatform``: the web chat's platform class on BBF (what this module exported before BAF)."""
    if name == 'RAGWebChatPlatform':
        from rag_plugin.host import BBF
        return webchat_platform_class(BBF)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def use_rag_webchat(bot: 'Bot', headless: bool = True, ui_log: Union[str, IO, None] = None,
                    streamlit_args: Sequence[str] = (), title: Optional[str] = None) -> RAGWebChat:
    """Use the websocket platform on this bot (or BAF agent), with the RAG web chat as its UI.

    Like ``bot.use_websocket_platform(use_ui=True)``, with this plugin's UI: it starts when the bot runs (on the
    bot's ``streamlit.host`` / ``streamlit.port``) and stops with the bot.

    Args:
        bot (Bot): the bot, or a BAF agent
        headless (bool): do not open a browser when the UI starts (the address is logged)
        ui_log (str | IO | None): where the UI's output goes; the terminal if None
        streamlit_args (Sequence[str]): more ``streamlit run`` options
        title (str): the page's title (default: the bot's name made readable)

    Returns:
        RAGWebChat: the websocket platform (the framework's ``WebSocketPlatform``: ``reply``, ``reply_rag``...)
    """
    platform_class = webchat_platform_class(host_of(bot))
    platform = platform_class(bot, headless=headless, ui_log=ui_log, streamlit_args=streamlit_args, title=title)
    bot._platforms.append(platform)  # what bot.use_websocket_platform does
    return platform


def describe_ingestion(report: 'IngestReport', session: Any = None, language: Optional[str] = None) -> str:
    """Word the outcome of an upload for the user, e.g. ``Added report.pdf: 12 chunks.`` or the skip reason, in the
    session's language (that of its last reply, :mod:`rag_plugin.wording`; ``language`` when given; else English).

    Args:
        report (IngestReport): what ``rag.add_file`` did
        session (Session): the user's session (its last reply's language is used)
        language (str): the language (``en``, ``es`` or ``ca``), over the session's
    """
    if language is None and session is not None and hasattr(session, 'get'):
        language = session.get(LANGUAGE_KEY)
    lines = []
    for f in report.files:
        name = Path(f.source_id).name or f.source_id
        chunks = say('chunks_one', language) if f.chunks == 1 else say('chunks_many', language, n=f.chunks)
        if f.status == 'added':
            lines.append(say('upload_added', language, name=name, chunks=chunks))
        elif f.status == 'updated':
            lines.append(say('upload_updated', language, name=name, chunks=chunks))
        elif f.status == 'unchanged':
            lines.append(say('upload_unchanged', language, name=name, chunks=chunks))
        elif f.status == 'skipped':
            lines.append(say('upload_failed', language, name=name,
                             reason=f.reason or say('upload_unreadable', language)))
        else:
            lines.append(f'{name}: {f.status}.')
    return '\n'.join(lines) or say('upload_nothing', language)
