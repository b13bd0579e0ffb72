"""Wheel check: build the wheel and the sdist, install the wheel with its BBF host and NO other extra into a fresh venv,
and run it.

Usage::

    python benchmarks/wheel_check.py [--python PY] [--keep] [--no-isolation]

Not a unit test: it installs the whole BBF stack (TensorFlow, PyTorch, ...) into a new venv, a few minutes. Steps,
each a row of the table it prints (check, result, seconds); the exit status is 1 when a check fails:

1. ``python -m build`` (wheel + sdist) from a copy of the checkout's files (tracked and untracked-but-not-ignored:
   what a clean checkout holds, nothing from ``.venv`` or caches);
2. both hold the web chat's Streamlit app (``rag_plugin/channels/webchat_ui``) and the licence; the wheel's metadata
   has the version, licence, Python requirement, classifiers, the README as long description, URLs and the extras;
3. a fresh venv in a temporary folder and ONE ``pip install '<wheel>[bbf]'`` (the core and its host, BBF 1.5, as the
   README tells a BBF user to install it; no other extra), resolved like ``make``'s install (the same pip
   configuration); no other extra's package is there unless a core or BBF package requires it;
4. ``python -m rag_plugin --help``;
5. the example bot's RAG path: ``bots/rag_bot.py`` (copied out of the checkout, so it imports the installed package;
   without its web UI) ingests ``data/pdfs`` into a temporary store and answers a question with sources, offline;
6. the resolved versions of the packages BBF pins, next to this venv's (the same one-call resolution);
7. the missing-extra message: with FastAPI removed from that venv (chromadb 0.5.4, pinned by BBF, brings it into the
   BBF install), ``python -m rag_plugin serve`` exits 2 with one line, ``error: install rag_plugin[server] for the
   HTTP API``, and no traceback.
"""
from __future__ import annotations

import argparse
import email
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Callable, Optional

REPO_ROOT = Path(__file__).resolve().parent.parent

WEBCHAT_FILES = ('rag_plugin/channels/webchat_ui/app.py', 'rag_plugin/channels/webchat_ui/client.py',
                 'rag_plugin/channels/webchat_ui/launch.py', 'rag_plugin/channels/webchat_ui/render.py',
                 'rag_plugin/channels/webchat.py')
PINNED = ('besser-bot-framework', 'langchain', 'langchain-core', 'chromadb', 'numpy', 'openai', 'transformers',
          'websockets', 'torch', 'tensorflow', 'fastapi', 'uvicorn')
EXTRA_MODULES = ('fastapi', 'uvicorn', 'matplotlib', 'docx', 'redis', 'psycopg', 'pgserver', 'fpdf', 'pytest')
DISTRIBUTIONS = {'docx': 'python-docx', 'fpdf': 'fpdf2'}
QUESTION = 'How long do deleted notes stay in the trash?'

DEMO_SCRIPT = r'''
import json, os, runpy, sys
import rag_plugin
ns = runpy.run_path(sys.argv[1], run_name='rag_bot')
message = ns['rag'].run(message=sys.argv[2])
print(json.dumps({'package': rag_plugin.__file__, 'answer': message.answer, 'abstained': message.abstained,
                  'sources': [f"{s['source']} p.{s['page']}" for s in message.sources],
                  'chunks_added': ns['report'].chunks_added, 'llm': message.llm_name,
                  'k': ns['rag'].k, 'num_previous_messages': ns['rag'].num_previous_messages}))
'''


class Checks:
    """The table of checks: each row is (check, result, seconds); a failed check marks the run as failed."""

    def __init__(self):
        self.rows: list[tuple[str, str, float]] = []
        self.failed = False

    def run(self, name: str, step: Callable[[], str]) -> Optional[str]:
        start = time.perf_counter()
        try:
            result = step()
            ok = True
        except Exception as e:  # noqa: BLE001 - every failure is a row of the report
            result, ok = f'FAILED: {type(e).__name__}: {e}', False
        seconds = time.perf_counter() - start
        self.rows.append((name, result, seconds))
        print(f"[{'ok' if ok else 'FAILED'}] {name} ({seconds:.1f} s): {result}", flush=True)
        self.failed |= not ok
        return result if ok else None

    def table(self) -> str:
        width = max(len(r[0]) for r in self.rows)
        lines = [f"{'check'.ljust(width)}  {'seconds':>8}  result", '-' * (width + 60)]
        for name, result, seconds in self.rows:
            lines.append(f'{name.ljust(width)}  {seconds:8.1f}  {result}')
        return '\n'.join(lines)


def sh(*args: str, env: Optional[dict] = None, cwd: Optional[Path] = None, check: bool = True
       ) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, cwd=cwd)
    if check and result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-8:]
        raise RuntimeError(f"{' '.join(map(str, args[:4]))}... exit {result.returncode}: " + ' | '.join(tail))
    return result


def checkout_files() -> list[str]:
    """The files a clean checkout holds (tracked, plus untracked files git does not ignore)."""
    out = sh('git', 'ls-files', '-co', '--exclude-standard', cwd=REPO_ROOT).stdout
    return [f for f in out.splitlines() if (REPO_ROOT / f).is_file()]


def copy_checkout(dest: Path) -> int:
    files = checkout_files()
    for f in files:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / f, dest / f)
    return len(files)


def check_contents(wheel: Path, sdist: Path) -> str:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        [meta_name] = [n for n in names if n.endswith('.dist-info/METADATA')]
        meta = email.message_from_string(z.read(meta_name).decode())
    missing = [f for f in WEBCHAT_FILES if f not in names]
    if not any(n.endswith('/LICENSE') for n in names):
        missing.append('LICENSE')
    with tarfile.open(sdist) as t:
        snames = {n.split('/', 1)[1] for n in t.getnames() if '/' in n}
    missing += [f'sdist:{f}' for f in (*WEBCHAT_FILES, 'LICENSE', 'README.md', 'CHANGELOG.md') if f not in snames]
    if missing:
        raise AssertionError(f'missing: {", ".join(missing)}')
    extras = sorted(meta.get_all('Provides-Extra') or [])
    fields = {'Version': meta['Version'], 'License': meta['License'] or meta['License-Expression'],
              'Requires-Python': meta['Requires-Python']}
    empty = [k for k, v in fields.items() if not v]
    if empty or not meta.get_all('Classifier') or not meta.get_all('Project-URL') or 'rag_plugin' not in \
            meta.get_payload() or meta['Description-Content-Type'] != 'text/markdown':
        raise AssertionError(f'incomplete metadata: {empty or "classifiers / URLs / long description"}')
    return (f"web chat files, LICENSE, README in both; version {fields['Version']}, licence {fields['License']}, "
            f"Python {fields['Requires-Python']}, {len(meta.get_all('Classifier'))} classifiers, "
            f"{len(meta.get_all('Project-URL'))} URLs, extras {', '.join(extras)}")


def required_by(python: Path, distribution: str, env: dict) -> str:
    """The installed distributions that require ``distribution`` (pip show's Required-by), '' when none."""
    out = sh(python, '-m', 'pip', 'show', distribution, env=env, check=False).stdout
    return next((line.split(':', 1)[1].strip() for line in out.splitlines() if line.startswith('Required-by:')), '')


def versions(python: Path) -> dict[str, str]:
    code = ('import importlib.metadata as m, json, sys\n'
            'out = {}\n'
            'for name in sys.argv[1:]:\n'
            '    try: out[name] = m.version(name)\n'
            '    except m.PackageNotFoundError: out[name] = "-"\n'
            'print(json.dumps(out))')
    return json.loads(sh(python, '-c', code, *PINNED).stdout)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--python', default=sys.executable,
                        help='the interpreter of the fresh venv (default: this one; Python 3.11)')
    parser.add_argument('--keep', action='store_true', help='keep the temporary folder (printed)')
    parser.add_argument('--no-isolation', action='store_true',
                        help="build with this venv's setuptools instead of an isolated build environment")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix='rag_plugin_wheel_check_'))
    checks = Checks()
    env = {k: v for k, v in os.environ.items() if k not in ('VIRTUAL_ENV', 'PYTHONPATH')}
    env.update(HF_HUB_OFFLINE='1', USE_TF='0', ANONYMIZED_TELEMETRY='False', PYTHONNOUSERSITE='1')
    try:
        src, dist, venv = tmp / 'src', tmp / 'dist', tmp / 'venv'
        src.mkdir()
        checks.run('copy the checkout (tracked + untracked, not ignored)', lambda: f'{copy_checkout(src)} files')

        def build() -> str:
            sh(sys.executable, '-m', 'build', *(['--no-isolation'] if args.no_isolation else []),
               '--outdir', dist, src, env=env)
            return ', '.join(sorted(p.name for p in dist.iterdir()))
        if checks.run('python -m build (wheel + sdist)', build) is None:
            return finish(checks, tmp, args.keep)
        [wheel] = dist.glob('*.whl')
        [sdist] = dist.glob('*.tar.gz')
        checks.run('contents and metadata', lambda: check_contents(wheel, sdist))

        python = venv / 'bin' / 'python'

        def install() -> str:
            sh(args.python, '-m', 'venv', venv, env=env)
            sh(python, '-m', 'pip', 'install', '-q', '--upgrade', 'pip', env=env)
            sh(python, '-m', 'pip', 'install', '-q', f'{wheel}[bbf]', env=env)  # one call, the host only
            present = [m for m in EXTRA_MODULES
                       if sh(python, '-c', f'import {m}', env=env, check=False).returncode == 0]
            # an extra's package may still come with the core: chromadb 0.5.4 (BBF's pin) requires fastapi and
            # uvicorn. Fine when a core package requires it; anything else would be an extra installed unasked.
            brought = {m: required_by(python, DISTRIBUTIONS.get(m, m), env) for m in present}
            unasked = [m for m, by in brought.items() if not by]
            if unasked:
                raise AssertionError(f'extras installed without being asked for: {", ".join(unasked)}')
            absent = [m for m in EXTRA_MODULES if m not in present]
            return (f'core + bbf only: {", ".join(absent)} absent'
                    + ''.join(f'; {m} present, required by {by}' for m, by in brought.items()))
        if checks.run('fresh venv + pip install <wheel>[bbf] (one call)', install) is None:
            return finish(checks, tmp, args.keep)

        def help_runs() -> str:
            out = sh(python, '-m', 'rag_plugin', '--help', env=env, cwd=tmp).stdout
            assert 'serve' in out and 'ingest' in out, out[:200]
            return f'{len(out.splitlines())} lines of help'
        checks.run('python -m rag_plugin --help', help_runs)

        def demo() -> str:
            bots = tmp / 'app' / 'bots'
            bots.mkdir(parents=True)
            for f in ('rag_bot.py', 'config.ini'):
                shutil.copy2(REPO_ROOT / 'bots' / f, bots / f)
            (tmp / 'demo.py').write_text(DEMO_SCRIPT)
            demo_env = dict(env, RAG_BOT_UI='0', RAG_BOT_PDFS=str(REPO_ROOT / 'data' / 'pdfs'),
                            RAG_PLUGIN_STORE=str(tmp / 'store'), RAG_PLUGIN_CACHE=str(tmp / 'cache'))
            out = sh(python, tmp / 'demo.py', bots / 'rag_bot.py', QUESTION, env=demo_env, cwd=tmp).stdout
            result = json.loads(out.strip().splitlines()[-1])
            assert str(venv) in result['package'], f"imported {result['package']}, not the installed wheel"
            assert not result['abstained'] and result['sources'], result
            assert result['num_previous_messages'] == 6, 'bots/config.ini [rag] was not read'
            return (f"{result['chunks_added']} chunks ingested, {result['llm']} answered {QUESTION!r} citing "
                    f"{result['sources'][0]}; rag.num_previous_messages=6 read from config.ini")
        checks.run("the example bot's RAG path (bots/rag_bot.py, no UI)", demo)

        def same_resolution() -> str:
            here, there = versions(Path(sys.executable)), versions(python)
            differ = [f'{k} {here[k]} vs {there[k]}' for k in PINNED if here[k] != there[k]]
            if differ:
                raise AssertionError('resolved differently from this venv: ' + '; '.join(differ))
            return ', '.join(f'{k} {there[k]}' for k in PINNED)
        checks.run('same versions as this venv (BBF pins)', same_resolution)

        def missing_extra() -> str:
            # FastAPI arrives with chromadb in the BBF install: remove it from this throwaway venv, as in an
            # environment without it, and the command must say which extra to install
            sh(python, '-m', 'pip', 'uninstall', '-q', '-y', 'fastapi', env=env)
            result = sh(python, '-m', 'rag_plugin', 'serve', '--store', tmp / 'store', env=env, cwd=tmp, check=False)
            expected = 'error: install rag_plugin[server] for the HTTP API\n'
            assert (result.returncode, result.stderr) == (2, expected), (result.returncode, result.stderr[-500:])
            return f'(fastapi uninstalled) exit 2, stderr: {expected.strip()!r}'
        checks.run('python -m rag_plugin serve without [server]', missing_extra)

        return finish(checks, tmp, args.keep)
    except BaseException:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        raise


def finish(checks: Checks, tmp: Path, keep: bool) -> int:
    print()
    print('Wheel check')
    print(checks.table())
    if keep:
        print(f'kept: {tmp}')
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    print('result:', 'FAILED' if checks.failed else 'all checks passed')
    return 1 if checks.failed else 0


if __name__ == '__main__':
    sys.exit(main())
