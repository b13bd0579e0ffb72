"""A complete BBF bot that answers from data/pdfs with sources, in the RAG web chat (websocket platform + Streamlit).

Answers stream into the chat as they are written, then show their sources (file, page, score, snippet). Users can
upload pdf / md / txt / docx files from the chat; the bot answers from them in that conversation (rag.uploads =
session) and says what it added.

Run it with ``make demo`` (or ``python bots/rag_bot.py`` inside the virtualenv). It answers with OpenAI when
``OPENAI_API_KEY`` (or an OpenAI-compatible ``OPENAI_BASE_URL``) is set, else with the offline extractive answerer.
Documents are ingested on the first start; later starts find them unchanged and add nothing. Its semantic answer
cache is on (``rag.answer_cache = memory`` in config.ini; ``RAG_PLUGIN_ANSWER_CACHE=redis://...`` shares it).
"""
import logging
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from besser.bot.core.bot import Bot  # noqa: E402
from besser.bot.core.session import Session  # noqa: E402
from besser.bot.platforms import websocket  # noqa: E402

from rag_plugin import (LAST_RAG_MESSAGE_KEY, RAG, RAGMessage, default_llm, default_splitter,  # noqa: E402
                        store_from_env)
from rag_plugin.channels.events import on_rag_outcomes  # noqa: E402
from rag_plugin.channels.webchat import describe_ingestion, use_rag_webchat  # noqa: E402
from rag_plugin.channels.websocket import reply_rag_streaming  # noqa: E402
from rag_plugin.settings import RAG_NOT_FOUND_ANSWER, RAG_STORE, RAG_TRACE_FILE, resolve  # noqa: E402

logging.basicConfig(level=logging.INFO, format='{levelname} - {asctime}: {message}', style='{')
logging.getLogger('httpx').setLevel(logging.WARNING)

PDFS = os.environ.get('RAG_BOT_PDFS', str(ROOT / 'data' / 'pdfs'))
CLARIFY = ('Could you name the feature, setting or error code you mean? '
           'Type /overview to see what the guides cover.')
TEXT_ONLY = 'Please send your question as text.'

# Create the bot
bot = Bot('rag_bot')
bot.load_properties(str(HERE / 'config.ini'))
if os.environ.get('RAG_BOT_UI', '1') != '0':
    # the RAG web chat (instead of BBF's UI) on streamlit.host / streamlit.port, started and stopped with the bot
    websocket_platform = use_rag_webchat(bot, title='Nimbus Notes guides')
else:
    websocket_platform = bot.use_websocket_platform(use_ui=False)
if os.environ.get('RAG_BOT_WEBSOCKET_PORT'):  # e.g. benchmarks/startup.py on a free port
    bot.set_property(websocket.WEBSOCKET_PORT, int(os.environ['RAG_BOT_WEBSOCKET_PORT']))

# The RAG: local embeddings in a persistent Chroma store (or PostgreSQL + pgvector when RAG_PLUGIN_DATABASE_URL or
# rag.database_url is set: several replicas of this bot then share one store), the default splitter, the default LLM.
# The RAG's settings: env RAG_PLUGIN_*, else the [rag] section of the config file, else their defaults (k=4, ...).
# The Chroma store is the command line's default store (`python -m rag_plugin ask ...` from the checkout answers from
# it; a relative folder is the checkout's), and the trace goes into it.
STORE = str(ROOT / resolve(RAG_STORE, bot))
TRACE = resolve(RAG_TRACE_FILE, bot) or str(Path(STORE) / 'rag_trace.jsonl')
try:
    vector_store = store_from_env(STORE, bot=bot)
except ImportError as e:  # a database URL without the postgres extra: one line, no traceback
    sys.exit(f'rag_bot: {e}')
llm = default_llm(bot, embeddings=vector_store.embeddings)
rag = RAG(
    bot=bot,
    vector_store=vector_store,
    splitter=default_splitter(),
    llm_name=llm.name,
    trace_file=TRACE,
    not_found_answer=f'{resolve(RAG_NOT_FOUND_ANSWER, bot)} {CLARIFY}',  # one message per abstention, asking to clarify
)
report = rag.ingest(PDFS, progress=True)  # first start: embeds; later starts: every file 'unchanged'
logging.info('[rag_bot] %s', str(report).splitlines()[0])

# STATES
initial_state = bot.new_state('initial_state', initial=True)
rag_state = bot.new_state('rag_state')
clarify_state = bot.new_state('clarify_state')
upload_state = bot.new_state('upload_state')


def initial_body(session: Session):
    session.reply("Hi! I answer questions about the Nimbus Notes guides, with the pages I found the answer on. "
                  "What would you like to know?")


initial_state.set_body(initial_body)
initial_state.when_no_intent_matched_go_to(rag_state)
initial_state.when_file_received_go_to(upload_state)


def rag_body(session: Session):
    if not isinstance(session.message, str):  # a websocket payload's message may be any JSON value
        session.set(LAST_RAG_MESSAGE_KEY, None)  # no RAG answer this turn: no outcome event fires
        session.reply(TEXT_ONLY)
        return
    if session.message.strip().lower() == '/overview':
        # the bootstrap map of the documents: summary, key points per document, critical points, follow-ups; its
        # [n] cite fragments shown as its sources, like any answer's
        session.set(LAST_RAG_MESSAGE_KEY, None)  # no RAG answer this turn: no outcome event fires
        websocket_platform.reply_rag(session, rag.synthesis())
        return
    # streams the answer as the LLM writes it (bot_reply_rag_partial), then sends the final one with its sources
    rag_message: RAGMessage = reply_rag_streaming(websocket_platform, session, rag)
    if rag_message.degraded:
        logging.warning('[rag_bot] the LLM failed; the answer was extracted from the documents')


rag_state.set_body(rag_body)
on_rag_outcomes(rag_state, abstained=clarify_state)  # nothing relevant found: ask the user to clarify
rag_state.when_no_intent_matched_go_to(rag_state)
rag_state.when_file_received_go_to(upload_state)


def clarify_body(session: Session):
    # The abstention already asked the user to clarify (one message, not two); the next message is searched with
    # this question as context, since the RAG rewrites follow-ups into standalone queries.
    logging.info('[rag_bot] nothing relevant found for %r; waiting for a clarification', session.message)


clarify_state.set_body(clarify_body)
clarify_state.when_no_intent_matched_go_to(rag_state)
clarify_state.when_file_received_go_to(upload_state)


def upload_body(session: Session):
    # a file uploaded in the chat: add it (nothing is written to disk) and say what happened; a file over
    # rag.max_upload_mb (the limit the web chat's uploader states) is refused, with the limit. By default
    # (rag.uploads = session) only this conversation searches it, until it ends. This demo has no logins: with
    # rag.uploads = shared it lets every user add to everyone's documents (benchmarks/load.py does, for its replicas),
    # so set that only where every user is trusted.
    if rag.uploads == 'shared':
        rag.allow_shared_uploads(session)
    report = rag.add_file(session.file, session=session)
    logging.info('[rag_bot] upload: %s', str(report).splitlines()[0])
    session.reply(describe_ingestion(report, session))


upload_state.set_body(upload_body)
upload_state.when_no_intent_matched_go_to(rag_state)
upload_state.when_file_received_go_to(upload_state)

if __name__ == '__main__':
    bot.run()
