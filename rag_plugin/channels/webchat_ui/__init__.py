"""The Streamlit app of the RAG web chat (see :mod:`rag_plugin.channels.webchat`).

``app.py`` is the Streamlit script, ``render.py`` the HTML of answers and sources, ``client.py`` the websocket
connection to the bot. ``render`` and ``client`` import neither Streamlit nor BBF.
"""
