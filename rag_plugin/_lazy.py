"""Lazy package exports: names are imported from their module on first use (PEP 562)."""
from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_exports(package: str, exports: dict[str, str], namespace: dict[str, Any]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return a package's ``__getattr__`` and ``__dir__`` for ``exports`` (name -> module)."""
    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        raise AttributeError(f'module {package!r} has no attribute {name!r}')

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))
    return __getattr__, __dir__
