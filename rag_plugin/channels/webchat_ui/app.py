"""The RAG web chat, a Streamlit app: ``streamlit run app.py <bot name> <websocket host> <websocket port>``.

Started by :func:`rag_plugin.channels.webchat.use_rag_webchat` (the same arguments as BBF's UI). Answers show their
citation markers and sources (file, page, score, snippet); "not found", "closest passages" (with their sources)
and fallback answers have their own styles;
streamed answers grow in one bubble until the final answer replaces it; the sidebar uploads documents to the bot.
"""
import base64
import logging
import sys
import threading
import time
from io import StringIO
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[3])  # the folder holding rag_plugin (a checkout that is not installed)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import streamlit as st  # noqa: E402
from streamlit.runtime import Runtime  # noqa: E402
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx  # noqa: E402

from rag_plugin.channels.webchat_ui import render  # noqa: E402
from rag_plugin.channels.webchat_ui.client import ChatConnection, ChatMessage  # noqa: E402

logger = logging.getLogger('rag_plugin.webchat')

CONNECTION = 'rag_webchat_connection'
CHAT_INPUT = 'rag_webchat_input'
UPLOAD_COUNTER = 'rag_webchat_upload_counter'
NOTICE = 'rag_webchat_notice'
UPLOAD_TYPES = ['pdf', 'md', 'txt', 'docx']
DISCONNECT_GRACE = 10.0  # seconds a closed browser tab keeps its bot session (a reconnecting tab finds it again)


def script_args(argv: list) -> tuple[str, str, str]:
    """The page title, websocket host and port given after the script (BBF's UI defaults otherwise)."""
    bot_name = argv[1] if len(argv) > 1 else 'RAG bot'
    host = argv[2] if len(argv) > 2 else 'localhost'
    port = argv[3] if len(argv) > 3 else '8765'
    return bot_name, host, port


def _current_app_session():
    ctx = get_script_run_ctx()
    runtime = Runtime.instance()
    info = runtime._session_mgr.get_session_info(ctx.session_id)  # as BBF's UI does: no public API for this
    return runtime, ctx.session_id, (info.session if info else None)


def _rerun_trigger(app_session):
    """A function that asks Streamlit (from any thread) to rerun this page."""
    def trigger() -> None:
        if app_session is None:
            return
        loop = getattr(app_session, '_event_loop', None)
        if loop is not None:
            loop.call_soon_threadsafe(app_session.request_rerun, None)
        else:
            app_session.request_rerun(None)
    return trigger


def _watch_session(runtime, session_id: str, connection: ChatConnection) -> None:
    """Close the bot connection once the browser tab has been gone for :data:`DISCONNECT_GRACE` seconds."""
    gone_since = None
    while True:
        time.sleep(1.0)
        try:
            active = runtime.is_active_session(session_id)
        except Exception:  # noqa: BLE001 - the runtime is stopping
            active = False
        if connection.snapshot().closed:
            return
        if active:
            gone_since = None
        elif gone_since is None:
            gone_since = time.monotonic()
        elif time.monotonic() - gone_since >= DISCONNECT_GRACE:
            connection.close()
            return


def get_connection(host: str, port: str) -> ChatConnection:
    """This tab's connection to the bot (opened on the first run)."""
    if CONNECTION not in st.session_state:
        runtime, session_id, app_session = _current_app_session()
        connection = ChatConnection(f'ws://{host}:{port}/', _rerun_trigger(app_session)).start()
        st.session_state[CONNECTION] = connection
        threading.Thread(target=_watch_session, args=(runtime, session_id, connection), daemon=True,
                         name='rag-webchat-watch').start()
    return st.session_state[CONNECTION]


# ---- callbacks (run before the page, so a rerun requested by the bot can't lose them) --------------------------------
def _submit_text(connection: ChatConnection) -> None:
    text = (st.session_state.get(CHAT_INPUT) or '').strip()
    if text:
        connection.send_text(text)


def _submit_file(connection: ChatConnection, key: str) -> None:
    uploaded = st.session_state.get(key)
    if uploaded is None:
        return
    data = uploaded.getvalue()
    if not data:
        st.session_state[NOTICE] = f'{uploaded.name} is empty; nothing was sent.'
    else:
        connection.send_file(uploaded.name, uploaded.type, data)
    st.session_state[UPLOAD_COUNTER] = st.session_state.get(UPLOAD_COUNTER, 0) + 1  # a fresh, empty uploader


def _reset(connection: ChatConnection) -> None:
    connection.reset()


# ---- the page -------------------------------------------------------------------------------------------------------
def _plain(text) -> str:
    return str(text).replace('$', '\\$')


def _size(n: int) -> str:
    return f'{n / 1024 / 1024:.1f} MB' if n >= 1024 * 1024 else f'{max(1, round(n / 1024))} KB'


def write_message(message: ChatMessage, index: int, connection: ChatConnection) -> None:
    """Show one message; a message that can't be shown says so instead of breaking the page."""
    with st.chat_message(message.role):
        try:
            _write_content(message, index, connection)
        except Exception as e:  # noqa: BLE001
            logger.warning('could not show a %s message: %s', message.kind, e)
            st.caption(f'(This {message.kind} message could not be shown.)')


def _write_content(message: ChatMessage, index: int, connection: ChatConnection) -> None:
    kind, content = message.kind, message.content
    if kind == 'rag':
        for block in render.rag_message_blocks(content):
            st.markdown(block, unsafe_allow_html=True)
    elif kind == 'markdown':
        st.markdown(_plain(content))
    elif kind == 'upload':
        st.markdown(f'<div class="rag-upload">Sent <b>{render.escape(content.get("name"))}</b> '
                    f'({_size(content.get("size") or 0)}) to add to the documents</div>', unsafe_allow_html=True)
    elif kind == 'html':
        st.html(str(content))
    elif kind == 'file':
        data = base64.b64decode(content.get('base64') or '')
        st.download_button(f'Download {content.get("name") or "file"}', data=data,
                           file_name=content.get('name') or 'file', mime=content.get('type'), key=f'file_{index}')
    elif kind == 'image':
        st.image(base64.b64decode(content))
    elif kind == 'options':
        columns = st.columns(max(1, len(content)))
        for i, (column, option) in enumerate(zip(columns, content)):
            column.button(option, key=f'option_{index}_{i}', on_click=connection.send_option, args=(option,))
    elif kind == 'dataframe':
        import pandas as pd
        st.dataframe(pd.read_json(StringIO(content)), key=f'df_{index}')
    elif kind == 'plotly':
        import plotly
        st.plotly_chart(plotly.io.from_json(content), key=f'plotly_{index}')
    elif kind == 'location':
        st.map({'latitude': [content['latitude']], 'longitude': [content['longitude']]})
    else:
        st.write(content)


def sidebar(connection: ChatConnection) -> None:
    with st.sidebar:
        st.subheader('Add a document')
        key = f'rag_webchat_upload_{st.session_state.get(UPLOAD_COUNTER, 0)}'
        st.file_uploader('PDF, Markdown, text or Word files: the bot adds them to the documents it answers from.',
                         type=UPLOAD_TYPES, accept_multiple_files=False, key=key, on_change=_submit_file,
                         args=(connection, key))
        if st.session_state.get(NOTICE):
            st.warning(st.session_state.pop(NOTICE))
        st.divider()
        st.button('New conversation', on_click=_reset, args=(connection,))


def main() -> None:
    bot_name, host, port = script_args(sys.argv)
    connection = get_connection(host, port)
    # Bot messages that arrive while the page is drawn don't interrupt the run (a stream of partial answers would keep
    # a slow page from ever being drawn): the page is drawn once more at the end instead.
    snapshot = connection.begin_render()
    drawn = False
    try:
        draw_page(bot_name, connection, snapshot)
        drawn = True
    finally:
        changed = connection.end_render(snapshot)
    if drawn and changed:
        st.rerun()


def draw_page(bot_name: str, connection: ChatConnection, snapshot) -> None:
    st.set_page_config(page_title=bot_name, page_icon='📚', initial_sidebar_state='expanded')
    st.markdown(render.CSS, unsafe_allow_html=True)
    st.header(bot_name)
    st.caption('Answers come from the documents, with the sources they were found in.')
    sidebar(connection)
    draw_chat(connection, snapshot)


def draw_chat(connection: ChatConnection, snapshot) -> None:
    for index, message in enumerate(snapshot.messages):
        write_message(message, index, connection)
    if snapshot.partial is not None:
        with st.chat_message('assistant'):
            st.markdown(render.partial_markdown(snapshot.partial), unsafe_allow_html=True)
    elif snapshot.waiting:
        with st.chat_message('assistant'):
            st.markdown('<span class="rag-thinking">Searching the documents… '
                        '<span class="rag-cursor rag-waiting">&#9612;</span></span>', unsafe_allow_html=True)
    if snapshot.closed:
        st.warning('The connection to the bot is closed. Reload the page to start a new conversation.')
    elif not snapshot.connected:
        st.info('Connecting to the bot…')
    elif snapshot.error:
        st.error(snapshot.error)

    st.chat_input('Ask a question about the documents', key=CHAT_INPUT, on_submit=_submit_text, args=(connection,))


if __name__ == '__main__':
    main()
