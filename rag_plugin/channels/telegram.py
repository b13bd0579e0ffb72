"""Telegram: RAG answers with numbered sources, escaped for the parse mode and split under Telegram's limit.

For BBF 1.5's and BAF 4.5's ``TelegramPlatform`` (the platform says which). Neither has a ``reply_rag``: calling
``platform.reply_rag`` is forwarded to the Telegram bot object and fails, and ``platform.reply(session,
rag_message.answer)`` loses the sources and is refused by Telegram when the answer is longer than 4096 characters.
:func:`reply_rag` sends the answer as one or more messages, each valid on its own, with a footer such as::

    Sources:
    [1] getting_started.pdf, p. 4
    [3] sync_and_offline.pdf, p. 2

The footnote numbers are the fragment numbers the answer cites (``[1]`` in the answer is ``[1]`` in the footer).
A reply of the closest passages (outcome ``closest``: its preface, then the closest passages, each with its ``[n]``)
has the passages' footnotes too; a reply that found nothing has none.

Example::

    from rag_plugin.channels.telegram import add_start_command, reply_rag, send_typing

    telegram_platform = bot.use_telegram_platform()
    add_start_command(telegram_platform)          # BBF ignores /start, the first message of every Telegram user

    def rag_body(session: Session):
        send_typing(telegram_platform, session)
        reply_rag(telegram_platform, session, session.run_rag())
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import html
import logging
import re
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Optional, Union

from rag_plugin.wording import say
from rag_plugin.message import CLOSEST

if TYPE_CHECKING:
    from besser.bot.core.session import Session
    from besser.bot.platforms.telegram.telegram_platform import TelegramPlatform

    from rag_plugin.host import Host
    from rag_plugin.message import RAGMessage

logger = logging.getLogger(__name__)

TELEGRAM_MAX_MESSAGE_LENGTH = 4096
"""int: the longest text of one Telegram message (counted here in UTF-16 code units, escapes included)."""

HTML = 'HTML'
"""str: Telegram's HTML parse mode (the default)."""

MARKDOWN_V2 = 'MarkdownV2'
"""str: Telegram's MarkdownV2 parse mode."""

SOURCES_HEADER = 'Sources:'
"""str: the first line of the footer (bold in HTML and MarkdownV2), in English; a reply's footer is in its own
``language`` (``MESSAGES['label_sources']``)."""

SEND_TIMEOUT = 60.0
"""float: seconds to wait for Telegram to accept one message before giving up on the rest of the answer."""

MAX_SOURCE_NAME = 200
"""int: longer source names are shortened with an ellipsis in the footer."""

MARKDOWN_V2_SPECIAL = '\\_*[]()~`>#+-=|{}.!'
"""str: the characters MarkdownV2 requires to be escaped with a backslash outside entities (Telegram Bot API,
"MarkdownV2 style"); the backslash itself is escaped too."""

_MARKDOWN_V2_ESCAPE = re.compile('([' + re.escape(MARKDOWN_V2_SPECIAL) + '])')
_HTML_COSTS = {'&': 5, '<': 4, '>': 4}

# Split boundaries, best first: (pattern, whether the cut is at the end of the match, rather than at its start).
_PARAGRAPH = (re.compile(r'\n[ \t]*\n\s*'), False)
_LINE = (re.compile(r'\n\s*'), False)
# the end of a sentence, with closing quotes or brackets and trailing citation markers: "... recovered [1]."
_SENTENCE = (re.compile(r'[.!?\u2026]+["\'\u201d\u2019)\]]*(?:[ \t]*(?:\[\d+\])+)*(?=\s)'), True)
_WORD = (re.compile(r'\s+'), False)
_BOUNDARIES = (_PARAGRAPH, _LINE, _SENTENCE)


# ---- parse modes and escaping ----------------------------------------------------------------------------------------
def normalize_parse_mode(parse_mode: Optional[str]) -> Optional[str]:
    """Return Telegram's spelling of a parse mode: ``'HTML'``, ``'MarkdownV2'``, or None for plain text.

    Args:
        parse_mode (str | None): ``'HTML'``, ``'MarkdownV2'`` (any case, or PTB's ``ParseMode`` members), or None

    Raises:
        ValueError: for legacy ``'Markdown'`` (it cannot escape every character) and unknown modes
    """
    if parse_mode is None:
        return None
    value = str(getattr(parse_mode, 'value', parse_mode)).strip()
    canonical = {'html': HTML, 'markdownv2': MARKDOWN_V2}.get(value.lower())
    if canonical is None:
        hint = ' (legacy Markdown cannot escape every character: use MarkdownV2)' if value.lower() == 'markdown' else ''
        raise ValueError(f"Unsupported Telegram parse mode {parse_mode!r}: use 'HTML', 'MarkdownV2' or None{hint}")
    return canonical


def escape_html(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` for Telegram's HTML parse mode (quotes need no escaping in text)."""
    return html.escape(text, quote=False)


def escape_markdown_v2(text: str) -> str:
    """Escape every MarkdownV2 special character (and the backslash) with a backslash."""
    return _MARKDOWN_V2_ESCAPE.sub(r'\\\1', text)


def escape(text: str, parse_mode: Optional[str]) -> str:
    """Escape plain text so Telegram shows it as written in this parse mode.

    Args:
        text (str): plain text
        parse_mode (str | None): ``'HTML'``, ``'MarkdownV2'`` or None (no escaping)
    """
    parse_mode = normalize_parse_mode(parse_mode)
    if parse_mode == HTML:
        return escape_html(text)
    if parse_mode == MARKDOWN_V2:
        return escape_markdown_v2(text)
    return text


def bold(text: str, parse_mode: Optional[str]) -> str:
    """Return plain ``text`` escaped and in bold for the parse mode (unchanged when there is none)."""
    parse_mode = normalize_parse_mode(parse_mode)
    if parse_mode == HTML:
        return f'<b>{escape_html(text)}</b>'
    if parse_mode == MARKDOWN_V2:
        return f'*{escape_markdown_v2(text)}*'
    return text


def telegram_length(text: str) -> int:
    """The length of a text as Telegram counts it: UTF-16 code units (an emoji outside the BMP counts 2)."""
    return len(text.encode('utf-16-le')) // 2


def _char_cost(char: str, parse_mode: Optional[str]) -> int:
    """The Telegram length of one character once escaped."""
    units = 2 if ord(char) > 0xFFFF else 1
    if parse_mode == HTML:
        return _HTML_COSTS.get(char, units)
    if parse_mode == MARKDOWN_V2 and char in MARKDOWN_V2_SPECIAL:
        return 2
    return units


# ---- splitting -------------------------------------------------------------------------------------------------------
def _fitting_prefix(text: str, parse_mode: Optional[str], limit: int) -> int:
    """The number of leading characters of ``text`` whose escaped form fits in ``limit``."""
    total = 0
    for i, char in enumerate(text):
        total += _char_cost(char, parse_mode)
        if total > limit:
            return i
    return len(text)


def _last_cut(window: str, boundary: tuple[re.Pattern, bool], minimum: int) -> Optional[int]:
    """The last cut position of a boundary in ``window`` that keeps at least ``minimum`` characters before it."""
    pattern, at_end = boundary
    best = None
    for match in pattern.finditer(window):
        cut = match.end() if at_end else match.start()
        if cut >= minimum and cut < len(window):
            best = cut
    return best


def _cut_point(text: str, parse_mode: Optional[str], limit: int) -> int:
    """Where to cut ``text`` so that the first part fits: at a paragraph, line, sentence or word boundary, else
    at the last character that fits."""
    fits = max(1, _fitting_prefix(text, parse_mode, limit))
    if fits >= len(text):
        return len(text)
    window = text[:fits + 1]  # the character after the fitting prefix may be the whitespace to cut at
    for boundary in _BOUNDARIES:  # structural boundaries, unless they leave a part of less than a third
        cut = _last_cut(window, boundary, max(1, fits // 3))
        if cut is not None and cut <= fits:
            return cut
    cut = _last_cut(window, _WORD, 1)
    if cut is not None and cut <= fits:
        return cut
    return fits


def split_text(text: str, parse_mode: Optional[str] = HTML, limit: int = TELEGRAM_MAX_MESSAGE_LENGTH) -> list[str]:
    """Split plain text into escaped parts that each fit in one Telegram message.

    The text is cut before escaping, so a cut never falls inside an escape sequence or an HTML entity. Cuts prefer
    paragraph breaks, then line breaks, then sentence ends (with their citation markers), then spaces; a part with
    no space at all is cut at the last character that fits. Whitespace at the cuts is dropped.

    Args:
        text (str): plain (unescaped) text
        parse_mode (str | None): ``'HTML'``, ``'MarkdownV2'`` or None
        limit (int): the longest part, in UTF-16 code units once escaped

    Returns:
        list[str]: the escaped parts, none empty (an empty list for a blank text)
    """
    parse_mode = normalize_parse_mode(parse_mode)
    if limit < 2:
        raise ValueError(f'limit must be at least 2, got {limit}')
    parts: list[str] = []
    rest = text.strip()
    while rest:
        cut = _cut_point(rest, parse_mode, limit)
        head, rest = rest[:cut].rstrip(), rest[cut:].lstrip()
        if head:
            parts.append(escape(head, parse_mode))
    return parts


def _pack_lines(lines: list[str], limit: int) -> list[str]:
    """Join escaped lines with newlines into as few messages as fit in ``limit`` (a line is never cut)."""
    messages: list[str] = []
    for line in lines:
        if messages and telegram_length(messages[-1]) + 1 + telegram_length(line) <= limit:
            messages[-1] += '\n' + line
        else:
            messages.append(line)
    return messages


# ---- the RAG message -------------------------------------------------------------------------------------------------
def _field(rag_message: Union['RAGMessage', Mapping], name: str, default: Any = None) -> Any:
    """A field of a RAGMessage or of its ``to_dict()`` form."""
    if isinstance(rag_message, Mapping):
        return rag_message.get(name, default)
    return getattr(rag_message, name, default)


def _doc_metadata(doc: Any) -> dict:
    """The metadata of a LangChain Document or of its dict form."""
    metadata = doc.get('metadata') if isinstance(doc, Mapping) else getattr(doc, 'metadata', None)
    return metadata or {}


def _short_name(name: str) -> str:
    name = ' '.join(str(name).split())  # a line break in a name would break the footer's lines
    return name if len(name) <= MAX_SOURCE_NAME else name[:MAX_SOURCE_NAME - 1] + '\u2026'


def _fragment_numbers(rag_message: Union['RAGMessage', Mapping]) -> dict[tuple, list[int]]:
    """Map ``(source, page)`` to the 1-based numbers of the fragments that come from it."""
    numbers: dict[tuple, list[int]] = {}
    for i, doc in enumerate(_field(rag_message, 'docs') or [], start=1):
        metadata = _doc_metadata(doc)
        key = (metadata.get('source') or metadata.get('source_id') or 'unknown', metadata.get('page'))
        numbers.setdefault(key, []).append(i)
    return numbers


def source_lines(rag_message: Union['RAGMessage', Mapping], only_cited: bool = False) -> list[str]:
    """The plain-text footnotes of an answer, one per file and page, cited ones first: ``[1] file.pdf, p. 3``.

    The numbers are the fragment numbers the answer's ``[n]`` markers use (each source's ``n``): a file and page
    is labelled with the fragments the answer cites from it (``[1][4]`` when it cites two), else with all its
    fragments. Sources without ``n`` (older dicts) are numbered like the fragments that come from them.

    Args:
        rag_message (RAGMessage | dict): the RAG answer (or its ``to_dict()``)
        only_cited (bool): leave out the sources the answer does not cite

    Returns:
        list[str]: the footnotes; empty when the reply is not an answer (not found, the store unavailable; an older
        abstained dict without ``outcome``) or has no sources. A ``closest`` reply has its passages' footnotes.
    """
    if _field(rag_message, 'abstained', False) and _field(rag_message, 'outcome') != CLOSEST:
        return []
    fragments = _fragment_numbers(rag_message)
    groups: dict[tuple, dict[str, list[int]]] = {}
    for position, source in enumerate(_field(rag_message, 'sources') or [], start=1):
        is_cited = bool(source.get('cited'))
        if only_cited and not is_cited:
            continue
        key = (source.get('source') or 'unknown', source.get('page'))
        numbers = [source['n']] if isinstance(source.get('n'), int) else fragments.get(key) or [position]
        group = groups.setdefault(key, {'cited': [], 'other': []})
        for n in numbers:
            if n not in group['cited'] and n not in group['other']:
                group['cited' if is_cited else 'other'].append(n)
    cited = set(_field(rag_message, 'cited') or [])
    lines: list[str] = []
    for (name, page), group in groups.items():
        numbers = [n for n in group['cited'] if not cited or n in cited] or group['cited'] or group['other']
        label = ''.join(f'[{n}]' for n in numbers)
        where = f', p. {page}' if page not in (None, '') else ''
        lines.append(f'{label} {_short_name(name)}{where}')
    return lines


def format_rag_message(rag_message: Union['RAGMessage', Mapping], parse_mode: Optional[str] = HTML,
                       max_length: int = TELEGRAM_MAX_MESSAGE_LENGTH, only_cited: bool = False) -> list[str]:
    """Render a RAG answer as the texts of Telegram messages: the answer, then its numbered sources.

    Pure: nothing is sent. The answer's ``note`` (a question over the length limit was cut) comes first, in
    parentheses. Every text is escaped for ``parse_mode``, at most ``max_length`` long (UTF-16 code units, escapes
    included) and valid on its own. The sources go with the last part of the answer, or in a message
    of their own when they do not fit; there are none when the RAG found nothing (a ``closest`` reply, its preface
    and passages, has its passages' sources).

    Args:
        rag_message (RAGMessage | dict): the RAG answer (or its ``to_dict()``)
        parse_mode (str | None): ``'HTML'`` (default), ``'MarkdownV2'`` or None for plain text
        max_length (int): the longest message
        only_cited (bool): list only the sources the answer cites

    Returns:
        list[str]: the message texts, in order (empty only for an empty answer without sources)
    """
    parse_mode = normalize_parse_mode(parse_mode)
    answer, note = str(_field(rag_message, 'answer') or ''), _field(rag_message, 'note')
    parts = split_text(f'({note})\n\n{answer}' if note else answer, parse_mode, max_length)
    lines = source_lines(rag_message, only_cited)
    if not lines:
        return parts
    language = _field(rag_message, 'language')
    header = say('label_sources', language if isinstance(language, str) else 'en') + ':'
    footer = _pack_lines([bold(header, parse_mode)] + [escape(line, parse_mode) for line in lines],
                         max_length)
    if parts and telegram_length(parts[-1]) + 2 + telegram_length(footer[0]) <= max_length:
        parts[-1] += '\n\n' + footer.pop(0)
    return parts + footer


# ---- sending through BBF's or BAF's TelegramPlatform ----------------------------------------------------------------
def _telegram_host(platform: 'TelegramPlatform', session: 'Session') -> 'Host':
    """The host whose TelegramPlatform ``platform`` is (BBF's or BAF's), after checking the session is on it."""
    from rag_plugin.host import BAF, BBF
    for host in (BBF, BAF):
        platform_class = host.telegram_platform_class()
        if platform_class is not None and isinstance(platform, platform_class):
            if session.platform is not platform:
                raise host.platform_mismatch(platform, session)
            return host
    raise TypeError(f"reply_rag needs BBF's or BAF's TelegramPlatform (use_telegram_platform()), got "
                    f'{type(platform).__name__}; other platforms have their own reply_rag')


def _call_telegram(platform: 'TelegramPlatform', timeout: float, method: str, **kwargs: Any) -> Any:
    """Call a method of the platform's Telegram bot on the platform's event loop, as the ``reply`` of BBF and BAF does,
    and wait
    at most ``timeout`` seconds for the result."""
    app = platform.__dict__.get('_telegram_app')  # not getattr: TelegramPlatform forwards unknown names to PTB
    loop: Optional[asyncio.AbstractEventLoop] = platform.__dict__.get('_event_loop')
    if app is None or loop is None or loop.is_closed():
        raise RuntimeError('The Telegram platform is not running (start the bot first)')
    future = asyncio.run_coroutine_threadsafe(getattr(app.bot, method)(**kwargs), loop)
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError(f'Telegram did not answer {method} within {timeout:g} s') from None


def reply_rag(platform: 'TelegramPlatform', session: 'Session', rag_message: 'RAGMessage',
              parse_mode: Optional[str] = HTML, only_cited: bool = False,
              timeout: float = SEND_TIMEOUT) -> None:
    """Send a RAG answer with its numbered sources to a Telegram user (the TelegramPlatform of BBF 1.5 and BAF 4.5 has
    no reply_rag).

    Like the frameworks' other ``reply_rag`` methods, the answer is saved in the session's history as a
    ``RAG_ANSWER`` message (``rag_message.to_dict()``) and passed through the bot's (agent's) processors of bot
    messages; it is then sent as the messages of :func:`format_rag_message`, through the platform's Telegram
    application and event loop, as the platform's ``reply`` does. A message Telegram refuses is logged and the rest
    of the answer is not sent; this function does not raise for it, so the state body goes on.

    Args:
        platform (TelegramPlatform): the bot's Telegram platform (``bot.use_telegram_platform()``; BAF:
            ``agent.use_telegram_platform()``)
        session (Session): the user session (its id is the Telegram chat id)
        rag_message (RAGMessage): the answer of ``session.run_rag()`` (BAF: ``session.run_rag(message)``)
        parse_mode (str | None): ``'HTML'`` (default), ``'MarkdownV2'`` or None for plain text
        only_cited (bool): list only the sources the answer cites
        timeout (float): seconds to wait for Telegram to accept each message

    Raises:
        TypeError: when ``platform`` is not a TelegramPlatform
        PlatformMismatchError: when the session belongs to another platform (the framework's error)
        ValueError: for an unsupported parse mode
    """
    from telegram.error import TelegramError
    host = _telegram_host(platform, session)
    parse_mode = normalize_parse_mode(parse_mode)
    content = rag_message.to_dict()
    session.save_message(host.message('RAG_ANSWER', content, False, datetime.now()))
    content = host.platform_owner(platform).process(session=session, message=content, is_user_message=False)
    for number, text in enumerate(format_rag_message(content, parse_mode, only_cited=only_cited), start=1):
        try:
            _call_telegram(platform, timeout, 'send_message', chat_id=session.id, text=text, parse_mode=parse_mode)
        except (TelegramError, TimeoutError, RuntimeError) as e:
            logger.error('[Telegram] Could not send part %d of the RAG answer to chat %s: %s: %s',
                         number, session.id, type(e).__name__, e)
            return


def send_typing(platform: 'TelegramPlatform', session: 'Session', timeout: float = 10.0) -> None:
    """Show "typing..." in the user's chat (for 5 s, or until the next message) while the RAG works.

    Failures are logged, never raised.

    Args:
        platform (TelegramPlatform): the bot's Telegram platform
        session (Session): the user session
        timeout (float): seconds to wait for Telegram
    """
    from telegram.constants import ChatAction
    from telegram.error import TelegramError
    _telegram_host(platform, session)
    try:
        _call_telegram(platform, timeout, 'send_chat_action', chat_id=session.id, action=ChatAction.TYPING)
    except (TelegramError, TimeoutError, RuntimeError) as e:
        logger.warning('[Telegram] Could not send the typing action to chat %s: %s', session.id, e)


def add_start_command(platform: 'TelegramPlatform') -> None:
    """Make ``/start`` greet the user: it starts the user's session (running the initial state's body), or
    restarts it when there is one.

    The TelegramPlatform of BBF 1.5 (and BAF 4.5) ignores commands other than ``/reset``, so the ``/start`` Telegram
    sends when a user opens the bot gets no answer and the greeting only comes with the user's first question. Call
    this before the bot runs.

    Args:
        platform (TelegramPlatform): the bot's (or agent's) Telegram platform
    """
    from telegram.ext import CommandHandler

    from rag_plugin.host import STANDALONE
    bot = STANDALONE.platform_owner(platform)  # the bot or agent: same session methods in BBF and BAF

    async def start(update, context) -> None:  # noqa: ARG001 - PTB's handler signature
        session_id = str(update.effective_chat.id)
        if session_id in bot._sessions:
            await asyncio.to_thread(bot.reset, session_id)
        else:
            await asyncio.to_thread(bot.get_or_create_session, session_id, platform)

    platform.add_handler(CommandHandler('start', start, block=False))
