"""bots/rag_bot.py as a BESSER Agentic Framework 4.5 agent (``baf``): answers from data/pdfs with sources, on BAF's
websocket platform with BAF's own Streamlit UI.

The same RAG, states and settings as the BBF demo bot: the answer with its sources (BAF's UI shows them under the
answer), one message per abstention asking to clarify (an outcome event moves the agent to a clarify state),
``/overview`` for the map of the documents, and files uploaded in the chat added for that conversation
(rag.uploads = session). Its properties are ``config.yaml`` beside it (BAF reads YAML; the ``rag`` keys are
config.ini's ``[rag]`` settings).

Run it with ``python bots/rag_agent.py`` in the BAF virtualenv (``rag_plugin[baf]``). It answers with OpenAI when
``OPENAI_API_KEY`` (or an OpenAI-compatible ``OPENAI_BASE_URL``) is set, else with the offline extractive answerer.
``RAG_AGENT_UI=rag`` shows this plugin's web chat instead of BAF's UI (answers then stream as they are written);
``RAG_AGENT_UI=0`` runs without a UI (the tests).
"""
import logging
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from baf.core.agent import Agent  # noqa: E402
from baf.core.session import Session  # noqa: E402
from baf.library.transition.events.base_events import ReceiveJSONEvent  # noqa: E402
from baf.platforms import websocket  # noqa: E402

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
UI = os.environ.get('RAG_AGENT_UI', 'baf')  # baf (BAF's Streamlit UI), rag (this plugin's web chat) or 0 (none)

# Create the agent
agent = Agent('rag_agent')
agent.load_properties(str(HERE / 'config.yaml'))
if UI == 'rag':
    websocket_platform = use_rag_webchat(agent, title='Nimbus Notes guides')
else:
    websocket_platform = agent.use_websocket_platform(use_ui=UI != '0')  # BAF's UI on streamlit.host / .port
if os.environ.get('RAG_BOT_WEBSOCKET_PORT'):
    agent.set_property(websocket.WEBSOCKET_PORT, int(os.environ['RAG_BOT_WEBSOCKET_PORT']))

# The RAG, as in bots/rag_bot.py: local embeddings in the checkout's persistent Chroma store (shared with the BBF demo
# bot and the command line), the default splitter, the default LLM, the trace in the store.
STORE = str(ROOT / resolve(RAG_STORE, agent))
TRACE = resolve(RAG_TRACE_FILE, agent) or str(Path(STORE) / 'rag_trace.jsonl')
try:
    vector_store = store_from_env(STORE, bot=agent)
except ImportError as e:  # a database URL without the postgres extra: one line, no traceback
    sys.exit(f'rag_agent: {e}')
llm = default_llm(agent, embeddings=vector_store.embeddings)
rag = RAG(
    agent,
    vector_store=vector_store,
    splitter=default_splitter(),
    llm_name=llm.name,
    trace_file=TRACE,
    not_found_answer=f'{resolve(RAG_NOT_FOUND_ANSWER, agent)} {CLARIFY}',  # one message per abstention
)
report = rag.ingest(PDFS, progress=True)  # first start: embeds; later starts: every file 'unchanged'
logging.info('[rag_agent] %s', str(report).splitlines()[0])

# STATES
initial_state = agent.new_state('initial_state', initial=True)
rag_state = agent.new_state('rag_state')
clarify_state = agent.new_state('clarify_state')
upload_state = agent.new_state('upload_state')


def initial_body(session: Session) -> None:
    session.reply("Hi! I answer questions about the Nimbus Notes guides, with the pages I found the answer on. "
                  "What would you like to know?")


def rag_body(session: Session) -> None:
    message = session.event.message  # BAF keeps the user's message on the event that moved the agent here
    json_object = isinstance(session.event, ReceiveJSONEvent) and not session.event.contains_message
    if json_object or not isinstance(message, str):  # a JSON payload's message may be any value
        session.set(LAST_RAG_MESSAGE_KEY, None)  # no RAG answer this turn: no outcome event fires
        session.reply(TEXT_ONLY)
        return
    if message.strip().lower() == '/overview':
        session.set(LAST_RAG_MESSAGE_KEY, None)
        websocket_platform.reply_rag(session, rag.synthesis())
        return
    if UI == 'rag':  # the web chat shows the answer as it is written (agent_reply_rag_partial), then its sources
        rag_message: RAGMessage = reply_rag_streaming(websocket_platform, session, rag)
    else:  # BAF's UI has no partial answers: the whole answer, with its sources
        rag_message = rag.run(message, session)
        websocket_platform.reply_rag(session, rag_message)
    if rag_message.degraded:
        logging.warning('[rag_agent] the LLM failed; the answer was extracted from the documents')


def clarify_body(session: Session) -> None:
    # the abstention already asked to clarify; the next message is searched with this question as context
    logging.info('[rag_agent] nothing relevant found for %r; waiting for a clarification', session.event.message)


def upload_body(session: Session) -> None:
    # a file uploaded in the chat (BAF: the file event's file): added for this conversation (rag.uploads = session)
    if rag.uploads == 'shared':
        rag.allow_shared_uploads(session)
    report = rag.add_file(session.event.file, session=session)  # BAF's int of chunks added, which reads as the report
    logging.info('[rag_agent] upload: %s', str(report.report).splitlines()[0])
    session.reply(describe_ingestion(report, session))


initial_state.set_body(initial_body)
rag_state.set_body(rag_body)
on_rag_outcomes(rag_state, abstained=clarify_state)  # nothing relevant found: ask the user to clarify
clarify_state.set_body(clarify_body)
upload_state.set_body(upload_body)
for state in (initial_state, rag_state, clarify_state, upload_state):
    state.when_no_intent_matched().go_to(rag_state)
    state.when_event(ReceiveJSONEvent()).go_to(rag_state)  # a JSON object as the message: asked for text there
    state.when_file_received().go_to(upload_state)

if __name__ == '__main__':
    agent.run()
