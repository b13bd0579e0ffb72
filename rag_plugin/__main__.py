"""``python -m rag_plugin``: see :mod:`rag_plugin.cli`."""
from rag_plugin.cli import main

if __name__ == '__main__':
    raise SystemExit(main())
