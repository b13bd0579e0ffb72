"""A complete BBF bot that answers from data/pdfs with sources, on Telegram.

1. Create a bot with @BotFather in Telegram and put its token in ``bots/telegram_config.ini``
   (``[telegram_platform]`` ``telegram.token = ...``), or in another file named by the env var
   ``RAG_TELEGRAM_CONFIG``.
2. Run ``python bots/telegram_rag_bot.py`` inside the virtualenv (``HF_HUB_OFFLINE=1`` once the embedding model is
   cached), then write to your bot in Telegram.

Like ``bots/rag_bot.py``, it answers with OpenAI when ``OPENAI_API_KEY`` (or an OpenAI-compatible
``OPENAI_BASE_URL``) is set, else with the offline extractive answerer; documents are ingested on the first start and
found unchanged later. Answers come with their sources as numbered footnotes, split under Telegram's 4096-character
limit (see :func:`rag_plugin.channels.telegram.reply_rag`). Env vars: ``RAG_TELEGRAM_CONFIG``, ``RAG_BOT_PDFS``,
``RAG_PLUGIN_STORE``, ``RAG_PLUGIN_TRACE``. The RAG's settings come from the ``[rag]`` section of the config file
(``bots/telegram_config.ini`` keeps 6 previous messages in the prompt: ``rag.num_previous_messages = 6``; a config
file without it gets the default, 0). A missing, placeholder or malformed token stops the bot with one line saying
how to set it.
"""
import logging
import os
import re
import sys
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from besser.bot.core.bot import Bot  # noqa: E402
from besser.bot.core.session import Session  # noqa: E402
from besser.bot.platforms import telegram  # noqa: E402

from rag_plugin import RAG, RAGMessage, default_llm, default_splitter, default_vector_store  # noqa: E402
from rag_plugin.channels.telegram import add_start_command, reply_rag, send_typing  # noqa: E402
from rag_plugin.settings import RAG_STORE, RAG_TRACE_FILE, resolve  # noqa: E402

logging.basicConfig(level=logging.INFO, format='{levelname} - {asctime}: {message}', style='{')
logging.getLogger('httpx').setLevel(logging.WARNING)

CONFIG = os.environ.get('RAG_TELEGRAM_CONFIG', str(HERE / 'telegram_config.ini'))
PDFS = os.environ.get('RAG_BOT_PDFS', str(ROOT / 'data' / 'pdfs'))

_TOKEN_FORMAT = re.compile(r'^\d+:\S+$')  # what @BotFather gives: "123456789:AAH..."


class TelegramTokenError(ValueError):
    """The config file has no usable Telegram bot token."""


def check_token(token: Optional[str], config_path: str) -> str:
    """Return the Telegram bot token, or raise an error that says how to set it.

    Args:
        token (str | None): the ``telegram.token`` property read from the config file
        config_path (str): the config file (for the message)

    Raises:
        TelegramTokenError: when the file is missing, or the token is missing, a placeholder or malformed
    """
    how = (f'Create a bot with @BotFather in Telegram and put its token in {config_path}, section '
           f'[{telegram.SECTION_TELEGRAM}]: "{telegram.TELEGRAM_TOKEN.name} = 123456789:AAH..." '
           f'(or name another config file with the env var RAG_TELEGRAM_CONFIG).')
    if not os.path.isfile(config_path):
        raise TelegramTokenError(f'The Telegram bot config file {config_path} does not exist. {how}')
    token = (token or '').strip()
    if not token:
        raise TelegramTokenError(f'No Telegram bot token in {config_path}. {how}')
    if not _TOKEN_FORMAT.match(token):
        raise TelegramTokenError(f'The Telegram bot token in {config_path} is a placeholder or malformed '
                                 f'({token[:12]!r}...). {how}')
    return token


# Create the bot; check the token before the (slower) RAG set-up
bot = Bot('telegram_rag_bot')
try:
    if os.path.isfile(CONFIG):
        bot.load_properties(CONFIG)
    check_token(bot.get_property(telegram.TELEGRAM_TOKEN), CONFIG)
except TelegramTokenError as error:
    if __name__ == '__main__':
        sys.exit(f'telegram_rag_bot: {error}')  # one line, no traceback
    raise
telegram_platform = bot.use_telegram_platform()
add_start_command(telegram_platform)  # BBF 1.5 ignores /start, the first message of every Telegram user

# The RAG: local embeddings in a persistent Chroma store, the default splitter, and the default LLM
# The RAG's settings: env RAG_PLUGIN_*, else the [rag] section of the config file, else their defaults (k=4, ...).
# The store is the command line's default store (`python -m rag_plugin ask ...` from the checkout answers from it; a
# relative folder is the checkout's), and the trace goes into it.
STORE = str(ROOT / resolve(RAG_STORE, bot))
TRACE = resolve(RAG_TRACE_FILE, bot) or str(Path(STORE) / 'rag_trace.jsonl')
vector_store = default_vector_store(STORE, bot=bot)
llm = default_llm(bot, embeddings=vector_store.embeddings)
rag = RAG(
    bot=bot,
    vector_store=vector_store,
    splitter=default_splitter(),
    llm_name=llm.name,
    trace_file=TRACE,
)
report = rag.ingest(PDFS)  # first start: embeds; later starts: every file 'unchanged'
logging.info('[telegram_rag_bot] %s', str(report).splitlines()[0])

# STATES
initial_state = bot.new_state('initial_state', initial=True)
rag_state = bot.new_state('rag_state')


def initial_body(session: Session):
    session.reply("Hi! I answer questions about the Nimbus Notes guides, with the pages I found the answer on. "
                  "What would you like to know?")


initial_state.set_body(initial_body)
initial_state.when_no_intent_matched_go_to(rag_state)


def rag_body(session: Session):
    send_typing(telegram_platform, session)
    rag_message: RAGMessage = session.run_rag()
    reply_rag(telegram_platform, session, rag_message)


rag_state.set_body(rag_body)
rag_state.when_no_intent_matched_go_to(rag_state)

if __name__ == '__main__':
    bot.run()
