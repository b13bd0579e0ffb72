"""Which files an ingestion reads: the files of a folder (hidden ones left out) or one file, the supported ones among
them, and each file's bytes within the size limit."""
from __future__ import annotations

from pathlib import Path

from rag_plugin.ingest.document import SkipFile
from rag_plugin.ingest.loaders import SUPPORTED_EXTENSIONS
from rag_plugin.ingest.report import FileResult


def walk(path: Path) -> tuple[Path, list[Path]]:
    """The root a path's files are named from and its files: a folder's, recursively and in order, without those
    under a hidden (dot) name; or the file itself.

    Raises:
        FileNotFoundError: the path is neither a file nor a folder
    """
    if path.is_file():
        return path.parent, [path]
    if not path.is_dir():
        raise FileNotFoundError(f'No such file or folder: {path}')
    files = sorted(p for p in path.rglob('*') if p.is_file() and not any(
        part.startswith('.') for part in p.relative_to(path).parts))
    return path, files


def supported(root: Path, files: list[Path]) -> tuple[list[tuple[str, Path]], list[FileResult]]:
    """The files of a supported format as ``(source_id, path)``, ``source_id`` the path under ``root``, and the
    others as ``skipped`` results that say their format."""
    sources, skipped = [], []
    for file_path in files:
        source_id = file_path.relative_to(root).as_posix()
        if file_path.suffix.lower() not in SUPPORTED_EXTENSIONS:
            skipped.append(FileResult(source_id, 'skipped', reason=f'unsupported format '
                                      f'{file_path.suffix or "(no extension)"}'))
            continue
        sources.append((source_id, file_path))
    return sources, skipped


def read_file(file_path: Path, max_file_mb: float) -> bytes:
    """A file's bytes.

    Raises:
        SkipFile: the file is empty or larger than ``max_file_mb``
        OSError: the file cannot be read
    """
    size = file_path.stat().st_size
    if size == 0:
        raise SkipFile('empty file (0 bytes)')
    if size > max_file_mb * 1024 * 1024:
        raise SkipFile(f'file too large: {size / 1024 / 1024:.1f} MB > {max_file_mb:g} MB limit')
    return file_path.read_bytes()
