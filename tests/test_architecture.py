"""The package's shape, checked from its source: which modules import which, the import cycles, the store layer's
independence and the size of its files (docs/architecture.md says why each holds).

The import graph is read from the AST of every module under ``rag_plugin/``, without importing anything: module-level
and function-level imports count (a function-level import is still a dependency, only a later one), imports inside
``if TYPE_CHECKING:`` do not (they never run). ``from a.b import c`` is an edge to ``a.b``, and to ``a.b.c`` when
that is a module; importing ``a.b.c`` also imports its parent packages ``a.b`` and ``a``, except the packages the
importing module is itself inside (those are imported before it runs). A name a package exports lazily (its
``_EXPORTS`` map, :mod:`rag_plugin._lazy`) is an edge to the module it comes from.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, Optional

PACKAGE = 'rag_plugin'
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

STORE = 'rag_plugin.store'
"""str: the store layer: the one package that knows a backend."""

STORE_MAY_IMPORT = frozenset({'rag_plugin.errors', 'rag_plugin._paths', 'rag_plugin.text', 'rag_plugin.text.abbreviations',
                              'rag_plugin.text.chunks', 'rag_plugin.text.frequency', 'rag_plugin.text.repair',
                              'rag_plugin.text.stopwords'})
"""frozenset[str]: the modules outside ``rag_plugin.store`` that it may import: neutral leaves (errors, the cache
folder, text helpers).
Not ``rag_plugin`` itself: its names are imported lazily from every layer."""

STORE_MUST_NOT_IMPORT = ('rag_plugin.ingest', 'rag_plugin.rag', 'rag_plugin.defaults', 'rag_plugin.generate')
"""tuple[str, ...]: the layers above the store, named in the failure message when one of them is imported."""

PUBLIC_MODULES = ('rag', 'message', 'wording', 'settings', 'defaults', 'errors', 'server', 'standalone', 'calibrate',
                  'retrieve', 'rewrite', 'rerank', 'guard', 'augment')
"""tuple[str, ...]: the top-level modules of ``rag_plugin/`` that are public (users import them, or the pipeline's
stages); every other top-level helper module is private (``_name.py``), behind ``rag_plugin/__init__.py``'s exports."""

MAX_LINES = 450
"""int: the most lines a module of the package may have (one job per module)."""


def module_name(path: Path) -> str:
    """The dotted module name of a file under ``rag_plugin/`` (a package's ``__init__.py`` is the package)."""
    parts = list(path.relative_to(ROOT.parent).with_suffix('').parts)
    if parts[-1] == '__init__':
        parts.pop()
    return '.'.join(parts)


def modules() -> dict[str, Path]:
    """Every module of the package, by name."""
    return {module_name(path): path for path in sorted(ROOT.rglob('*.py'))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == 'TYPE_CHECKING'
            or isinstance(test, ast.Attribute) and test.attr == 'TYPE_CHECKING')


def _import_nodes(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements under a node, at any depth (functions, classes, ``try``), leaving out the body of
    ``if TYPE_CHECKING:`` (its ``else`` runs, and counts)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                if isinstance(other, (ast.Import, ast.ImportFrom)):
                    yield other
                else:
                    yield from _import_nodes(other)
        else:
            yield from _import_nodes(child)


def _parents(name: str) -> list[str]:
    parts = name.split('.')
    return ['.'.join(parts[:i]) for i in range(1, len(parts))]


def _resolve(node: ast.ImportFrom, importer: str, is_package: bool) -> Optional[str]:
    """The absolute module a ``from ... import`` names (relative imports resolved)."""
    if not node.level:
        return node.module
    base = importer.split('.') if is_package else importer.split('.')[:-1]
    base = base[:len(base) - (node.level - 1)]
    return '.'.join(base + ([node.module] if node.module else []))


def lazy_exports(path: Path) -> dict[str, str]:
    """A package's lazy exports (its ``_EXPORTS = {name: module}`` literal), or none."""
    tree = ast.parse(path.read_text(encoding='utf-8'), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == '_EXPORTS' for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


def imports_of(name: str, path: Path, known: set[str], lazy: Optional[dict[str, dict[str, str]]] = None
               ) -> set[str]:
    """The modules of the package that a module imports (see the module docstring for what counts).

    Args:
        name (str): the module's dotted name
        path (Path): its file
        known (set[str]): every module of the package (a ``from`` import's names that are modules count as edges)
        lazy (dict[str, dict[str, str]]): package -> its lazy exports (name -> module)

    Returns:
        set[str]: the modules it imports, itself and the packages it is inside left out
    """
    tree = ast.parse(path.read_text(encoding='utf-8'), filename=str(path))
    is_package = path.name == '__init__.py'
    own = set(_parents(name)) | {name}
    edges: set[str] = set()

    def add(target: str, force: bool = False) -> None:
        edges.update(m for m in _parents(target) if m not in own)
        if force or target not in own:
            edges.add(target)

    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
            continue
        source = _resolve(node, name, is_package)
        if source is None:
            continue
        submodules = [f'{source}.{alias.name}' for alias in node.names if f'{source}.{alias.name}' in known]
        for module in submodules:
            add(module)
        for alias in node.names:
            if alias.name in (lazy or {}).get(source, {}):
                add(lazy[source][alias.name])
        # a name that is not a submodule is read from the package's namespace: its __init__ must have run, even for
        # a package the importing module is inside
        add(source, force=len(submodules) < len(node.names))
    return {m for m in edges if m in known and m != name}


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    found = modules()
    known = set(found)
    lazy = {name: lazy_exports(path) for name, path in found.items() if path.name == '__init__.py'}
    return {name: imports_of(name, path, known, lazy) for name, path in found.items()}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def part_of(name: str) -> str:
    """The part of the package a module belongs to: its top-level module or subpackage (``rag_plugin.store``)."""
    return '.'.join(name.split('.')[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph between the package's parts (:func:`part_of`): a part imports another when one of its modules
    does."""
    parts: dict[str, set[str]] = {}
    for name, targets in graph.items():
        parts.setdefault(part_of(name), set()).update(part_of(t) for t in targets if part_of(t) != part_of(name))
    return parts


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + '.')


def _describe(component: frozenset[str], graph: dict[str, set[str]]) -> str:
    edges = sorted(f'{a} -> {b}' for a in component for b in graph[a] if b in component)
    return '{' + ', '.join(sorted(component)) + '}: ' + '; '.join(edges)


# ---- the checks ------------------------------------------------------------------------------------------------------
def test_the_graph_reader_counts_imports_as_python_runs_them(tmp_path):
    known = {'rag_plugin', 'rag_plugin.errors', 'rag_plugin.rag', 'rag_plugin.text', 'rag_plugin.text.chunks',
             'rag_plugin.store', 'rag_plugin.store.base', 'rag_plugin.store.budget', 'rag_plugin.store.probe'}
    probe = tmp_path / 'probe.py'
    probe.write_text('from typing import TYPE_CHECKING\n'
                     'import rag_plugin.store.base\n'
                     'from . import budget\n'
                     'if TYPE_CHECKING:\n    from rag_plugin.rag import RAG\nelse:\n    from rag_plugin import errors\n'
                     'def f():\n    from ..text import chunks\n', encoding='utf-8')
    # a function-level import counts, a TYPE_CHECKING one does not; the packages the module is in are left out
    assert imports_of('rag_plugin.store.probe', probe, known) == {
        'rag_plugin.store.base', 'rag_plugin.store.budget', 'rag_plugin.errors', 'rag_plugin.text',
        'rag_plugin.text.chunks'}
    probe.write_text('from rag_plugin.store import DenseHit, budget\n', encoding='utf-8')  # a name of its __init__
    assert imports_of('rag_plugin.store.probe', probe, known) == {'rag_plugin.store', 'rag_plugin.store.budget'}
    assert imports_of('rag_plugin.rag', probe, known) == {'rag_plugin.store', 'rag_plugin.store.budget'}
    probe.write_text('def f():\n    from rag_plugin import RAG\n', encoding='utf-8')  # a lazy export of rag_plugin
    assert imports_of('rag_plugin.store.probe', probe, known, {'rag_plugin': {'RAG': 'rag_plugin.rag'}}) == {
        'rag_plugin', 'rag_plugin.rag'}
    assert cycles({'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}, 'e': set()}) == [frozenset({'a', 'b', 'c'})]
    graph = import_graph()
    assert {'rag_plugin.store.filters', 'rag_plugin.store.chroma'} <= graph['rag_plugin.store']
    assert 'rag_plugin.store' in graph['rag_plugin.retrieve']


def test_the_store_layer_imports_nothing_above_it():
    graph = import_graph()
    store = [name for name in graph if _in(name, STORE)]
    assert len(store) > 5
    wrong = {}
    for name in store:
        outside = {m for m in reachable(graph, name) if not _in(m, STORE) and m not in STORE_MAY_IMPORT}
        if outside:
            wrong[name] = sorted(outside)
    assert not wrong, f'the store layer reaches modules above it (it may import only {sorted(STORE_MAY_IMPORT)}): ' \
                      f'{wrong}'
    above = {name: sorted(m for m in graph[name] if any(_in(m, layer) for layer in STORE_MUST_NOT_IMPORT))
             for name in store}
    assert not any(above.values()), above


def test_no_import_cycle_involves_the_store_layer():
    graph = import_graph()
    involved = [c for c in cycles(graph) if any(_in(m, STORE) for m in c)]
    assert not involved, 'import cycles through rag_plugin.store: ' + ' | '.join(_describe(c, graph)
                                                                                for c in involved)
    parts = package_graph(graph)
    assert not [c for c in cycles(parts) if STORE in c]


def test_no_import_cycle_between_modules():
    graph = import_graph()
    found = cycles(graph)
    assert not found, 'import cycles: ' + ' | '.join(_describe(c, graph) for c in found)


def test_no_import_cycle_between_parts():
    # The same between the package's parts (each top-level module and subpackage one node): context/ ->
    # evaluation.py -> rag.py -> context/ was a cycle of parts although no module imported itself back.
    parts = package_graph(import_graph())
    found = cycles(parts)
    assert not found, 'import cycles between parts: ' + ' | '.join(_describe(c, parts) for c in found)


def test_every_top_level_module_is_private_or_named_public():
    # A new helper module is private (_name.py) unless it is added to PUBLIC_MODULES on purpose: the public API is
    # what rag_plugin/__init__.py exports (docs/architecture.md, "Packages and modules").
    top = {path.stem for path in ROOT.glob('*.py')} - {'__init__', '__main__'}
    assert {'rag', '_lazy'} <= top
    stray = sorted(name for name in top if not name.startswith('_') and name not in PUBLIC_MODULES)
    assert not stray, f'top-level modules neither private (_name.py) nor in PUBLIC_MODULES: {stray}'
    missing = sorted(name for name in PUBLIC_MODULES if name not in top)
    assert not missing, f'PUBLIC_MODULES names modules that do not exist: {missing}'


def test_no_module_is_over_450_lines():
    long = {name: n for name, path in modules().items()
            if (n := len(path.read_text(encoding='utf-8').splitlines())) > MAX_LINES}
    assert not long, f'modules over {MAX_LINES} lines (one job per module): {long}'
