"""Benchmarks of rag_plugin against BBF 1.5's original RAG (run them as scripts, e.g. ``python benchmarks/ingest.py``)."""
