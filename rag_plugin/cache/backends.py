"""Where cached answers live: in this process (default) or in Redis, shared by several bot processes.

A backend stores entries (a question, its vector and the answer as a dict) in *namespaces*: one per scope, LLM,
prompt and corpus version (see :meth:`rag_plugin.cache.SemanticCache.namespace`), so an entry is never even compared
with a question asked under other conditions. Similarity is computed in the process (numpy) for both backends.
"""
from __future__ import annotations

import copy
import json
import logging
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from rag_plugin.errors import RAGPluginError

logger = logging.getLogger(__name__)

__all__ = ['EntryList', 'CacheEntry', 'CacheBackend', 'InProcessBackend', 'RedisBackend', 'CacheUnavailable']


class CacheUnavailable(RAGPluginError):
    """The backend cannot be reached (the cache then answers as if it were empty)."""


@dataclass
class CacheEntry:
    """One cached answer.

    Attributes:
        id (str): the entry's id
        question (str): the text it was stored under (the searched question)
        vector (np.ndarray): the question's unit-length embedding
        answer (dict): the answer (:meth:`RAGMessage.to_dict`)
        created (float): when it was stored (epoch seconds)
        same (str | None): the question's text without casing and punctuation (set on first use)
    """
    id: str
    question: str
    vector: np.ndarray
    answer: dict
    created: float
    same: Optional[str] = None


class EntryList(list):
    """The live entries of a namespace, with their vectors stacked once (a backend hands out the same list until
    the namespace changes, so a lookup does not stack a thousand vectors again)."""
    _matrix: Optional[np.ndarray] = None

    def matrix(self) -> np.ndarray:
        """The entries' vectors as rows, in order."""
        if self._matrix is None:
            self._matrix = np.vstack([entry.vector for entry in self])
        return self._matrix


class CacheBackend:
    """What :class:`~rag_plugin.cache.SemanticCache` needs from a store of entries."""

    def entries(self, namespace: str, ttl: float) -> EntryList:
        """The live entries (younger than ``ttl`` seconds) of a namespace, without their answers loaded if costly."""
        raise NotImplementedError

    def answer(self, namespace: str, entry: CacheEntry) -> Optional[dict]:
        """The answer of an entry (None when it expired or was evicted meanwhile); marks it as recently used."""
        raise NotImplementedError

    def put(self, namespace: str, question: str, vector: np.ndarray, answer: dict, ttl: float,
            max_entries: int) -> None:
        """Store an entry, evicting the least recently used beyond ``max_entries`` in the namespace."""
        raise NotImplementedError

    def clear(self) -> int:
        """Delete every entry; return how many there were."""
        raise NotImplementedError

    def count(self, name: str) -> None:
        """Add one to a counter shared by every process using this backend (nothing for in-process backends)."""

    def counters(self) -> Optional[dict]:
        """The shared counters (None when the backend keeps none)."""
        return None

    def size(self) -> int:
        """How many entries are stored (all namespaces)."""
        raise NotImplementedError


class InProcessBackend(CacheBackend):
    """Entries in this process's memory (thread-safe), at most ``max_namespaces`` namespaces (the oldest go first:
    after an ingestion the old corpus version's namespace is never read again)."""

    def __init__(self, max_namespaces: int = 64):
        self.max_namespaces: int = max_namespaces
        self._spaces: OrderedDict[str, OrderedDict[str, CacheEntry]] = OrderedDict()
        self._lists: dict[str, EntryList] = {}
        self._lock = threading.Lock()

    def entries(self, namespace: str, ttl: float) -> EntryList:
        now = time.time()
        with self._lock:
            space = self._spaces.get(namespace)
            if not space:
                return EntryList()
            expired = [k for k, e in space.items() if now - e.created >= ttl]
            for key in expired:
                del space[key]
            listed = self._lists.get(namespace)
            if listed is None or expired:
                listed = self._lists[namespace] = EntryList(space.values())
            return listed

    def answer(self, namespace: str, entry: CacheEntry) -> Optional[dict]:
        with self._lock:
            space = self._spaces.get(namespace)
            if space is None or entry.id not in space:
                return None
            space.move_to_end(entry.id)
            return copy.deepcopy(entry.answer)  # a caller that changes the message never changes the entry

    def put(self, namespace: str, question: str, vector: np.ndarray, answer: dict, ttl: float,
            max_entries: int) -> None:
        entry = CacheEntry(uuid.uuid4().hex, question, vector, copy.deepcopy(answer), time.time())
        with self._lock:
            space = self._spaces.setdefault(namespace, OrderedDict())
            self._spaces.move_to_end(namespace)
            space[entry.id] = entry
            while len(space) > max_entries:
                space.popitem(last=False)
            self._lists.pop(namespace, None)
            while len(self._spaces) > self.max_namespaces:
                self._lists.pop(self._spaces.popitem(last=False)[0], None)

    def clear(self) -> int:
        with self._lock:
            n = self.size_unlocked()
            self._spaces.clear()
            self._lists.clear()
        return n

    def size(self) -> int:
        with self._lock:
            return self.size_unlocked()

    def size_unlocked(self) -> int:
        return sum(len(space) for space in self._spaces.values())


class RedisBackend(CacheBackend):
    """Entries in Redis, shared by every process that points at the same server; similarity in this process.

    Per namespace ``ns``: a sorted set ``{prefix}:{ns}:lru`` (entry id -> last use), a hash ``{prefix}:{ns}:vec``
    (id -> question and float32 vector) and one string key per answer ``{prefix}:{ns}:a:{id}`` with the TTL, and a
    write mark ``{prefix}:{ns}:gen`` (a new random value on every write, so a restarted or cleared server never
    repeats one). A lookup reads the counter (one round trip); the process keeps the vectors
    of the namespace and fetches them again only after a write. Every key of a namespace expires ``ttl`` after its
    last write, so namespaces of old corpus versions disappear by themselves. Plain Redis (no search module).

    Args:
        url (str): the server, e.g. ``redis://127.0.0.1:6379/0`` (``rediss://`` for TLS, ``redis://:password@host``)
        prefix (str): the key prefix (several caches can share a server)
        timeout (float): seconds per Redis call; a slower server counts as unavailable
        client (Any): a ready ``redis.Redis`` client (instead of ``url``)

    Raises:
        ImportError: with a one-line message when the ``redis`` package is missing
    """

    def __init__(self, url: str = 'redis://127.0.0.1:6379/0', prefix: str = 'rag_plugin:cache', timeout: float = 0.5,
                 client: Any = None):
        if client is None:
            try:
                import redis
            except ImportError:
                raise ImportError("The shared cache needs the 'redis' package: "
                                  "pip install 'rag_plugin[redis]'") from None
            client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        self.client = client
        self.url: str = url
        self.prefix: str = prefix
        self._mirror: dict[str, tuple[Any, list[CacheEntry]]] = {}
        self._lock = threading.Lock()

    def _key(self, namespace: str, part: str) -> str:
        return f'{self.prefix}:{namespace}:{part}'

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - any client error (connection, timeout, protocol) means "no cache"
            raise CacheUnavailable(f'{type(e).__name__}: {e}') from e

    def entries(self, namespace: str, ttl: float) -> EntryList:
        generation = self._call(self.client.get, self._key(namespace, 'gen'))
        if generation is None:
            return EntryList()
        with self._lock:
            mirrored = self._mirror.get(namespace)
        if mirrored is None or mirrored[0] != generation:
            raw = self._call(self.client.hgetall, self._key(namespace, 'vec'))
            loaded = EntryList()
            for entry_id, value in raw.items():
                record = json.loads(value)
                vector = np.frombuffer(bytes.fromhex(record['v']), dtype=np.float32)
                loaded.append(CacheEntry(entry_id.decode() if isinstance(entry_id, bytes) else entry_id,
                                         record['q'], vector, {}, record['t']))
            with self._lock:
                self._mirror[namespace] = (generation, loaded)
                while len(self._mirror) > 64:
                    self._mirror.pop(next(iter(self._mirror)))
            mirrored = (generation, loaded)
        now = time.time()
        live = mirrored[1]
        if any(now - e.created >= ttl for e in live):  # expired ones never come back: drop them from the mirror
            live = EntryList(e for e in live if now - e.created < ttl)
            with self._lock:
                self._mirror[namespace] = (generation, live)
        return live

    def answer(self, namespace: str, entry: CacheEntry) -> Optional[dict]:
        raw = self._call(self.client.get, self._key(namespace, f'a:{entry.id}'))
        if raw is None:  # expired or evicted by another process
            return None
        try:
            self.client.zadd(self._key(namespace, 'lru'), {entry.id: time.time()})
        except Exception:  # noqa: BLE001 - recency is best effort; the answer is already here
            pass
        return json.loads(raw)

    def put(self, namespace: str, question: str, vector: np.ndarray, answer: dict, ttl: float,
            max_entries: int) -> None:
        entry_id = uuid.uuid4().hex
        now = time.time()
        seconds = max(1, int(round(ttl)))
        record = json.dumps({'q': question, 'v': np.asarray(vector, dtype=np.float32).tobytes().hex(), 't': now})
        lru, vec, gen = self._key(namespace, 'lru'), self._key(namespace, 'vec'), self._key(namespace, 'gen')

        def write():
            pipe = self.client.pipeline()
            pipe.set(self._key(namespace, f'a:{entry_id}'), json.dumps(answer, default=str), ex=seconds)
            pipe.hset(vec, entry_id, record)
            pipe.zadd(lru, {entry_id: now})
            pipe.set(gen, uuid.uuid4().hex)
            for key in (lru, vec, gen):
                pipe.expire(key, seconds)
            pipe.zcard(lru)
            size = pipe.execute()[-1]
            if size > max_entries:  # evict the least recently used
                old = [i.decode() if isinstance(i, bytes) else i
                       for i in self.client.zrange(lru, 0, size - max_entries - 1)]
                if old:
                    pipe = self.client.pipeline()
                    pipe.zrem(lru, *old)
                    pipe.hdel(vec, *old)
                    pipe.delete(*[self._key(namespace, f'a:{i}') for i in old])
                    pipe.set(gen, uuid.uuid4().hex, ex=seconds)
                    pipe.execute()
        self._call(write)

    def count(self, name: str) -> None:
        try:
            self.client.hincrby(f'{self.prefix}:counters', name, 1)
        except Exception:  # noqa: BLE001 - counters are best effort
            pass

    def counters(self) -> Optional[dict]:
        raw = self._call(self.client.hgetall, f'{self.prefix}:counters')
        return {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in raw.items()}

    def clear(self) -> int:
        def run():
            n = 0
            keys = list(self.client.scan_iter(match=f'{self.prefix}:*', count=500))
            for key in keys:
                if key.endswith(b':lru') if isinstance(key, bytes) else key.endswith(':lru'):
                    n += self.client.zcard(key)
            for i in range(0, len(keys), 500):
                self.client.delete(*keys[i:i + 500])
            return n
        n = self._call(run)
        with self._lock:
            self._mirror.clear()
        return n

    def size(self) -> int:
        def run():
            return sum(self.client.zcard(key) for key in self.client.scan_iter(match=f'{self.prefix}:*:lru', count=500))
        return self._call(run)
