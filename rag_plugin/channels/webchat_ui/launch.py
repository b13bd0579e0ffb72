"""Run Streamlit (``python -m rag_plugin.channels.webchat_ui.launch run [options] app.py args...``, the arguments of
``streamlit``) and stop it when the process that started it ends, however it ends.

The bot keeps this process's stdin open and never writes to it; when the bot exits (even killed), the pipe closes, and
this process stops Streamlit as Ctrl-C would. So a crashed bot leaves no UI behind holding its port.
"""
import os
import signal
import sys
import threading


def _stop_when_stdin_closes() -> None:
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except (OSError, ValueError):
        pass
    os.kill(os.getpid(), signal.SIGTERM)  # Streamlit's handler stops the server


def main(argv: list) -> int:
    if os.environ.get('RAG_WEBCHAT_STOP_ON_EOF') == '1':
        threading.Thread(target=_stop_when_stdin_closes, name='rag-webchat-parent-watch', daemon=True).start()
    from streamlit.web import cli
    sys.argv = ['streamlit', *argv]
    return cli.main()


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
