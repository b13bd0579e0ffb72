"""The files of a persisted Chroma store: what is damaged in them, and moving damaged ones aside.

A store folder holds ``chroma.sqlite3`` (the table and the write log) and one folder per collection's saved vector
index (an HNSW graph: ``header.bin``, ``data_level0.bin``, ``length.bin``, ``link_lists.bin``). Damage is found here
before Chroma opens the files (Chroma builds an empty store in an empty database, and hnswlib crashed the process on a
truncated index), and the damaged files are moved aside, kept for inspection, so that the store can be built again
(``python -m rag_plugin ingest --repair``).
"""
from __future__ import annotations

import logging
import os
import struct
import time
from typing import Callable, Optional

from rag_plugin.errors import StoreDamaged

logger = logging.getLogger(__name__)

SQLITE_FILE = 'chroma.sqlite3'
"""str: the file of a persisted Chroma store's table and write log."""

REPAIR_HINT = 'run `python -m rag_plugin ingest --repair --store {folder}` to rebuild it'
"""str: what to do about a damaged store (``{folder}``: the store's folder)."""

DAMAGED_SUFFIX = '.damaged-'
"""str: a damaged vector index folder is moved aside to ``<folder>.damaged-<unix time>`` (kept for inspection)."""

_folders: dict[tuple[str, str], str] = {}  # (store folder, collection id) -> its saved vector index's folder
_checked: dict[str, tuple] = {}  # vector index folders found sound in this process -> their files' stat then

_HNSW_HEADER = struct.Struct('<iQQQQQQiIQQQdQ')
"""struct.Struct: the header.bin of a persisted HNSW index (chroma-hnswlib, persistence version 1): version, offset
of level 0, capacity, element count, bytes per element, label offset, data offset, top level, entry point, maxM,
maxM0, M, mult, ef_construction."""


def sqlite_damage(folder: str) -> Optional[str]:
    """What is wrong with a store folder's ``chroma.sqlite3`` at a glance (empty, or not a SQLite database), else
    None (also when there is none: a new store). Chroma would silently build an empty store in an empty file."""
    path = os.path.join(folder, SQLITE_FILE)
    try:
        with open(path, 'rb') as f:
            head = f.read(16)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f'{SQLITE_FILE} cannot be read: {e.strerror or e}'
    if not head:
        return f'{SQLITE_FILE} is empty (0 bytes)'
    if head != b'SQLite format 3\x00':
        return f'{SQLITE_FILE} is not a SQLite database'
    return None


def sqlite_integrity(folder: str) -> Optional[str]:
    """What SQLite's own check (``PRAGMA quick_check``, read-only) finds wrong in ``chroma.sqlite3``, else None."""
    import sqlite3
    damage = sqlite_damage(folder)
    if damage or not os.path.exists(os.path.join(folder, SQLITE_FILE)):
        return damage
    try:
        db = sqlite3.connect(f'file:{os.path.join(folder, SQLITE_FILE)}?mode=ro', uri=True)
        try:
            rows = [row[0] for row in db.execute('PRAGMA quick_check').fetchmany(3)]
        finally:
            db.close()
    except sqlite3.DatabaseError as e:
        return f'{SQLITE_FILE} is damaged: {e}'
    return None if rows == ['ok'] else f'{SQLITE_FILE} is damaged: ' + '; '.join(map(str, rows))


def index_damage(folder: str) -> Optional[str]:
    """What is wrong with a persisted HNSW vector index folder, else None (also for no folder, or a folder without
    saved files: Chroma builds the index again from its write log).

    The files are checked against their header before Chroma loads them: a truncated ``data_level0.bin`` crashed the
    process (a segmentation fault in hnswlib), a header of garbage raised at every question."""
    header_path = os.path.join(folder, 'header.bin')
    if not os.path.exists(header_path):
        return None
    name = os.path.basename(os.path.normpath(folder))
    try:
        with open(header_path, 'rb') as f:
            header = f.read()
        if len(header) != _HNSW_HEADER.size:
            return f'vector index {name}: header.bin has {len(header)} bytes, not {_HNSW_HEADER.size}'
        version, _, capacity, count, per_element, label_offset, _, level, _, max_m, max_m0, m, _, _ = \
            _HNSW_HEADER.unpack(header)
        if version != 1 or not 0 <= count <= capacity or not 0 < per_element < 1 << 24 or \
                label_offset + 8 != per_element or not (-1 if count == 0 else 0) <= level < 64 or \
                not 0 < m <= max_m <= max_m0 < 1 << 16:
            return f'vector index {name}: header.bin does not describe an index (version {version})'
        # the vectors, then their norms: saved for the vectors held, or for the whole capacity (a new index)
        for file, size in (('data_level0.bin', per_element), ('length.bin', 4)):
            found = os.path.getsize(os.path.join(folder, file))
            if not count * size <= found <= capacity * size:
                return (f'vector index {name}: {file} has {found} bytes, {count * size} expected for {count} '
                        f'vectors')
        if not os.path.exists(os.path.join(folder, 'link_lists.bin')):
            return f'vector index {name}: link_lists.bin is missing'
    except FileNotFoundError as e:
        return f'vector index {name}: {os.path.basename(e.filename or "")} is missing'
    except (OSError, struct.error) as e:
        return f'vector index {name}: {e}'
    return None


def folder_damage(folder: str) -> Optional[str]:
    """What is wrong with a store folder's files (its database at a glance, every vector index), else None; Chroma is
    not opened."""
    damage = sqlite_damage(folder)
    if damage:
        return damage
    try:
        subfolders = sorted(e.path for e in os.scandir(folder) if e.is_dir() and DAMAGED_SUFFIX not in e.name)
    except OSError:
        return None
    return next((d for d in map(_settled_damage, subfolders) if d), None)


def set_aside_store(folder: str) -> Optional[str]:
    """Move a damaged store's Chroma files (``chroma.sqlite3`` and its vector index folders) into
    ``<folder>/damaged-<unix time>/`` (kept for inspection), leaving the ledger, so that a new store can be built in the
    folder from the ledger's files. Returns where they went (None: there was nothing to move)."""
    names = [e.name for e in os.scandir(folder) if e.name == SQLITE_FILE or e.name.startswith(SQLITE_FILE + '-')
             or e.is_dir() and DAMAGED_SUFFIX not in e.name and os.path.exists(os.path.join(e.path, 'header.bin'))
             or e.is_dir() and _is_uuid(e.name)]
    if not names:
        return None
    target = os.path.join(folder, f'damaged-{int(time.time())}')
    os.makedirs(target, exist_ok=True)
    for name in names:
        os.rename(os.path.join(folder, name), os.path.join(target, name))
    forget_store_folder(folder)
    logger.warning('[RAG] The damaged store files of %s were moved to %s', folder, target)
    return target


def _is_uuid(name: str) -> bool:
    import uuid
    try:
        uuid.UUID(name)
    except ValueError:
        return False
    return True


def index_folder(store_folder: str, collection_id: str, lookup: Callable[[], Optional[str]]) -> Optional[str]:
    """The folder of a collection's saved vector index, remembered per process.

    Args:
        store_folder (str): the store's folder
        collection_id (str): the collection's id
        lookup (Callable[[], str | None]): finds the index's folder name (Chroma's segment id) when not remembered

    Returns:
        str | None: the folder (None: the collection has no vector segment)
    """
    key = (store_folder, collection_id)
    if key not in _folders:
        name = lookup()
        if name is None:
            return None
        _folders[key] = os.path.join(store_folder, name)
    return _folders[key]


def forget_store_folder(store_folder: str) -> None:
    """Forget the vector index folders remembered for a store folder (its files were replaced or moved)."""
    for key in [k for k in _folders if k[0] == store_folder]:
        _folders.pop(key)


def check_index(index_folder_path: str, store_folder: str) -> None:
    """Refuse a saved vector index whose files disagree with their header (:func:`index_damage`); an index found
    sound is not checked again until its files change.

    Args:
        index_folder_path (str): the index's folder
        store_folder (str): the store's folder (named in the message)

    Raises:
        StoreDamaged: the index is damaged (the message names the file and what to do)
    """
    seen = _stamp(index_folder_path)
    if seen is not None and _checked.get(index_folder_path) == seen:
        return
    damage = _settled_damage(index_folder_path)
    if damage:
        raise StoreDamaged(f'{store_folder}: {damage}: ' + REPAIR_HINT.format(folder=store_folder))
    checked = _stamp(index_folder_path)
    if checked is not None and checked == seen:  # files that changed while they were checked are checked again
        _checked[index_folder_path] = checked


def _stamp(index_folder_path: str) -> Optional[tuple]:
    """The size and modification time (ns) of an index's header and vectors (None when one cannot be read)."""
    try:
        return tuple((s.st_size, s.st_mtime_ns) for s in (os.stat(os.path.join(index_folder_path, f))
                                                          for f in ('header.bin', 'data_level0.bin')))
    except OSError:
        return None


SETTLE_SECONDS = 1.0
"""float: how long a vector index found damaged must stay unchanged before it is said to be damaged: another process
saving the index rewrites its files in place (a reader once found ``header.bin`` with 0 bytes mid-save)."""


def _settled_damage(index_folder_path: str, settle: float = SETTLE_SECONDS, most: float = 10.0) -> Optional[str]:
    """:func:`index_damage`, looked at again while the index's files are changing: damage is reported once the files
    stayed as they are for ``settle`` seconds (at most ``most`` seconds in all); a save in progress ends sound."""
    start = last_change = time.monotonic()
    files = _files(index_folder_path)
    damage = index_damage(index_folder_path)
    while damage and time.monotonic() - last_change < settle and time.monotonic() - start < most:
        time.sleep(0.05)
        now = _files(index_folder_path)
        if now != files:
            files, last_change = now, time.monotonic()
        damage = index_damage(index_folder_path)
    return damage


def _files(folder: str) -> tuple:
    """Each file of a folder with its size and modification time (empty when the folder cannot be read)."""
    try:
        return tuple(sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(folder)))
    except OSError:
        return ()


def set_aside_index(index_folder_path: str) -> str:
    """Move a vector index folder aside, to ``<folder>.damaged-<unix time>`` (kept); returns where it went."""
    target = f'{index_folder_path}{DAMAGED_SUFFIX}{int(time.time())}'
    os.rename(index_folder_path, target)
    _checked.pop(index_folder_path, None)
    return target
