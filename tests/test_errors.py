"""Every error the package raises on purpose sits under ``rag_plugin.RAGPluginError`` and keeps its built-in base."""
import json
import subprocess
import sys

from conftest import ROOT
from helpers import subprocess_env

# Imports every module of the package (in a child process: the Streamlit app, BBF and the servers stay out of the
# test process; a module that needs the framework this venv lacks is left out) and lists every exception class defined in it, classes nested in classes too.
WALK = r'''
import importlib, inspect, json, pkgutil
import rag_plugin
from rag_plugin import RAGPluginError

found = {}

def visit(owner, module):
    for value in vars(owner).values():
        if inspect.isclass(value) and value.__module__ == module and value.__qualname__ not in found.get(module, {}):
            if issubclass(value, BaseException):
                found.setdefault(module, {})[value.__qualname__] = issubclass(value, RAGPluginError)
            visit(value, module)

for info in pkgutil.walk_packages(rag_plugin.__path__, 'rag_plugin.'):
    try:
        module = importlib.import_module(info.name)
    except ModuleNotFoundError as e:  # a channel of the other framework (BBF's in the BAF venv): not installed here
        if (e.name or '').split('.')[0] in ('besser', 'baf'):
            continue
        raise
    visit(module, info.name)
print(json.dumps(found))
'''


def _exception_classes() -> dict:
    env = subprocess_env()
    result = subprocess.run([sys.executable, '-c', WALK], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_every_exception_class_of_the_package_is_a_rag_plugin_error():
    found = _exception_classes()
    outside = [f'{module}.{name}' for module, classes in found.items() for name, under in classes.items() if not under]
    assert not outside, f'not under RAGPluginError: {outside}'
    names = {name for classes in found.values() for name in classes}
    assert {'RAGPluginError', 'StoreDamaged', 'MissingExtra', 'SettingsChanged', 'StoreBusy', 'SkipFile',
            'InflationLimit', 'LLMTimeout', 'LLMSkipped', 'CacheUnavailable', 'UsageError'} <= names, names


def test_errors_keep_their_built_in_bases():
    """``except ValueError`` / ``ImportError`` / ``RuntimeError`` / ``TimeoutError`` code still catches them."""
    from rag_plugin import RAGPluginError
    from rag_plugin.cache.backends import CacheUnavailable
    from rag_plugin.errors import StoreDamaged
    from rag_plugin._extras import MissingExtra
    from rag_plugin.generate.resilient import LLMSkipped, LLMTimeout
    from rag_plugin.ingest import SettingsChanged, SkipFile, StoreBusy
    from rag_plugin.ingest.limits import InflationLimit
    for cls, builtin in [(MissingExtra, ImportError), (SettingsChanged, ValueError), (StoreBusy, RuntimeError),
                         (LLMTimeout, TimeoutError), (LLMSkipped, RuntimeError), (InflationLimit, SkipFile),
                         (SkipFile, Exception), (CacheUnavailable, Exception), (StoreDamaged, Exception)]:
        assert issubclass(cls, RAGPluginError) and issubclass(cls, builtin), cls
    error = MissingExtra('server', 'the HTTP API')
    assert isinstance(error, ImportError) and 'rag_plugin[server]' in str(error)
    assert str(LLMTimeout('no answer in 5 s')) == 'no answer in 5 s'
