"""Do two questions ask the same thing? The wording rules a semantic-cache hit needs beyond embedding similarity.

"What is the deductible for the Standard plan?" and "...for the Plus plan?" are very close in embedding space and
have different answers. Embeddings cannot tell a synonym ("kept" / "stay") from a sibling ("desktop" / "mobile",
"admins" / "owners": measured, both score 0.1-0.8 as single words), so the rules are about form, and about what the
corpus itself says, not about meaning:

- **One spelling**: both questions are read the same way first: case, accents, word forms and typos aside, and
  hyphenation, spacing and compounds made equal on both sides ("in-network" / "in network", "e-mail" / "email",
  "battery-saver" / "battery saver", "end-to-end" / "end to end", "version 1" / "v1"): the other question is the
  reference, not a list.
- **Marks** must be equal: numbers and codes ("NN-4012", "2023", "Q3", "$8", "first" as 1), negation ("not",
  "no", "without", "n't", "no", "sin", "sense"), and contrast words (maximum / minimum / default, in- / out-of-network,
  monthly / yearly, increase / decrease, upgrade / downgrade, add / remove, include / exclude, before / after...).
- **Names** the corpus uses to tell things apart (words it writes capitalised mid-sentence: plan names, companies,
  products, roles) and words capitalised mid-question: one question may not have one the other lacks. A name the
  corpus writes in more than half of its texts (the product's own name) tells nothing apart and is not compared.
- **No swap**: when each question has a content word the other lacks, they ask about different things, unless none
  of those words, on either side, is one the corpus writes (in any form or close spelling): the corpus cannot answer
  one differently from the other ("save notes manually" / "save notes by hand"); such a rewording needs the higher
  similarity, as extra words do. A swap of a word the corpus writes is refused even for a synonym ("bank transfer" /
  "wire transfer"): measured, no signal at hand (word similarity, word frequency, the corpus) tells it from a
  sibling ("julio" / "octubre", "menores" / "mayores").
- **No exchanged words**: the same content words, two of them trading places with more than function words between
  them ("Can an admin reset it for a member?" / "Can a member reset it for an admin?"), ask the reverse question.
- **No swapped function word** in a minimal pair: a question that is the other with the function words of one place
  replaced ("turn on" / "turn off", "this session" / "my other sessions") asks something else. Auxiliaries after the
  question word only frame it ("How are ... signed?" / "How is a ... signed?"), and a question reworded in more than
  one place is judged by the other rules.
- **Extra words** on one side only ("What does error NN-4012 mean?" / "what does NN-4012 mean") need the higher
  similarity, unless the corpus writes them in more than half of its texts ("note" in a notes app's guides, "health"
  in a health plan's): they tell nothing apart.

The corpus's words come with its names (:func:`corpus_names`, a :class:`CorpusNames`); without them (a store that
cannot list its chunks) every swap is refused and every extra word needs the higher similarity. A miss costs one
normal RAG run; the rules exist so that a near-miss never gets another question's answer (measured on
``data/eval/cache_near_miss.jsonl``, ``data/eval/cache_near_miss_user.jsonl`` and pairs of different questions:
``docs/cache.md``).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from rag_plugin.cache.names import CorpusNames
from rag_plugin.cache.words import (_CODE, _CONTRACTION_STEMS, _MAX_JOIN, _NUMBER, _QUARTER, CONTRAST, FRAME, NEGATIONS,
                                    ORDINALS, SYNONYMS, _key, _number)
from rag_plugin.text import STOP_WORDS, WORD, fold, normalise

__all__ = ['QuestionTerms', 'question_terms', 'disagreement', 'extra_words']

@dataclass(frozen=True)
class Token:
    """One word of a question as the rules read it.

    Attributes:
        written (str): as typed
        kind (str): ``mark``, ``name``, ``word`` (a content word), ``frame`` (a question-frame word) or ``stop``
        value (str): the word's normalised base (names and words), the folded word (frame and stop words)
        marks (tuple[str, ...]): the marks it gives (numbers, codes, negation, contrast labels)
    """
    written: str
    kind: str
    value: str
    marks: tuple = ()


@dataclass(frozen=True)
class QuestionTerms:
    """What a question's wording pins down.

    Attributes:
        marks (frozenset[str]): numbers and codes, negation, contrast labels (must be equal)
        names (frozenset[str]): names (folded) the question uses
        words (frozenset[str]): the other content words (normalised, stop and frame words left out)
        tokens (tuple[Token, ...]): every word in order (for the spelling, order and function-word rules)
        corpus (frozenset): the names it was read with (a :class:`CorpusNames` carries the corpus's words)
    """
    marks: frozenset = field(default_factory=frozenset)
    names: frozenset = field(default_factory=frozenset)
    words: frozenset = field(default_factory=frozenset)
    tokens: tuple = ()
    corpus: frozenset = field(default_factory=frozenset, compare=False, repr=False)


def _read(written: list[str], names: frozenset) -> list[Token]:
    tokens = []
    for i, word in enumerate(written):
        folded = fold(word)
        if _NUMBER.search(folded):
            quarter = _QUARTER.match(folded)
            marks = ('#' + quarter.group(1), 'quarter') if quarter else (_number(folded),)
            tokens.append(Token(word, 'mark', folded, marks))
        elif folded in ORDINALS:
            tokens.append(Token(word, 'mark', folded, ('#' + ORDINALS[folded],)))
        elif folded in ('quarter', 'quarters', 'trimestre'):
            tokens.append(Token(word, 'mark', folded, ('quarter',)))
        elif folded in NEGATIONS or (folded == 't' and i and fold(written[i - 1]) in _CONTRACTION_STEMS):
            tokens.append(Token(word, 'mark', folded, ('not',)))
        elif folded in CONTRAST:
            tokens.append(Token(word, 'mark', folded, (CONTRAST[folded],)))
        elif folded in STOP_WORDS:
            tokens.append(Token(word, 'stop', folded))
        else:
            base = SYNONYMS.get(folded, normalise(folded))
            if base in FRAME or folded in FRAME:
                tokens.append(Token(word, 'frame', base))
                continue
            capitalised = i > 0 and word[:1].isupper() and not word.isupper() or (len(word) > 1 and word.isupper())
            kind = 'name' if folded in names or base in names or capitalised else 'word'
            tokens.append(Token(word, kind, base))
    return tokens


def _terms(tokens: list[Token], corpus: frozenset) -> QuestionTerms:
    marks = {m for t in tokens for m in t.marks}
    names = {t.value for t in tokens if t.kind == 'name'}
    words = {t.value for t in tokens if t.kind == 'word'}
    return QuestionTerms(frozenset(marks), frozenset(names), frozenset(words), tuple(tokens), corpus)


def question_terms(text: str, names: Iterable[str] = ()) -> QuestionTerms:
    """Read a question's marks, names and content words.

    Args:
        text (str): the question
        names (Iterable[str]): folded words the corpus uses as names (see :func:`corpus_names`, whose
            :class:`CorpusNames` also carries the corpus's other words)
    """
    names = names if isinstance(names, frozenset) else frozenset(names)
    return _terms(_read(WORD.findall(text), names), names)


def _joined(these: list[str], those: list[str]) -> list[str]:
    """``these`` words with each run written apart (or with other separators) that is one word of ``those`` written
    as that word ("in network" -> "in-network" when the other question writes "in-network"; "email" -> "e-mail"), and
    a word and a number that a short code of ``those`` abbreviates written as that code ("version 1" -> "v1")."""
    targets: dict[str, str] = {}
    codes: dict[tuple[str, str], str] = {}
    for word in those:
        key = _key(word)
        code = _CODE.match(key)
        if code:
            codes[code.groups()] = word
        elif len(key) > 1 and not _NUMBER.search(key):
            targets.setdefault(key, word)
    out, i = [], 0
    while i < len(these):
        if i + 1 < len(these) and codes:
            word, number = fold(these[i]), fold(these[i + 1])
            code = next((w for (letters, digits), w in codes.items() if number == digits
                         and word.startswith(letters) and len(word) > len(letters) and word.isalpha()), None)
            if code is not None:
                out.append(code)
                i += 2
                continue
        for size in range(min(_MAX_JOIN, len(these) - i), 0, -1):
            run = these[i:i + size]
            key = ''.join(_key(w) for w in run)
            if key in targets and (size > 1 or run[0] != targets[key]) and not _NUMBER.search(key):
                out.append(targets[key] if not run[0][:1].isupper() or targets[key][:1].isupper()
                           else targets[key][:1].upper() + targets[key][1:])
                i += size
                break
        else:
            out.append(these[i])
            i += 1
    return out


def _one_spelling(a: QuestionTerms, b: QuestionTerms) -> tuple[QuestionTerms, QuestionTerms]:
    """Both questions read with hyphenation, spacing and compounds made equal (see :func:`_joined`)."""
    if not a.tokens or not b.tokens:
        return a, b
    written_a, written_b = [t.written for t in a.tokens], [t.written for t in b.tokens]
    joined_a = _joined(written_a, written_b)
    joined_b = _joined(written_b, joined_a)
    if joined_a == written_a and joined_b == written_b:
        return a, b
    return _terms(_read(joined_a, a.corpus), a.corpus), _terms(_read(joined_b, b.corpus), b.corpus)


def _same_word(a: str, b: str) -> bool:
    """One word typed two ways: a typo, another form or spacing ("attachmnet" / "attachment", "covered" / "cover",
    "e-mail" / "email")."""
    if a == b:
        return True
    if min(len(a), len(b)) >= 4 and (a.startswith(b) or b.startswith(a)) and abs(len(a) - len(b)) <= 2:
        return True
    if min(len(a), len(b)) >= 4 and difflib.SequenceMatcher(None, a, b).ratio() >= 0.8:
        return True
    return (_key(a) == _key(b)) if ('-' in a + b or '/' in a + b or '.' in a + b) else False


def _unmatched(these: Iterable[str], those: Iterable[str], similar: Any = None) -> list[str]:
    those = list(those)
    left = [w for w in these if not any(_same_word(w, other) for other in those)]
    if left and those and similar is not None:
        left = [w for w in left if not similar(w, those)]
    return left


def _corpus(a: QuestionTerms, b: QuestionTerms) -> Optional[CorpusNames]:
    for terms in (a, b):
        if isinstance(terms.corpus, CorpusNames) and terms.corpus.n_texts:
            return terms.corpus
    return None


def _names_compared(terms: QuestionTerms, corpus: Optional[CorpusNames]) -> set:
    """The names that tell something apart (not the product's own name, which the corpus writes everywhere)."""
    if corpus is None:
        return set(terms.names)
    return {n for n in terms.names if not corpus.everywhere(n)}


def _exchanged(a: QuestionTerms, b: QuestionTerms) -> Optional[tuple[str, str]]:
    """Two content words that trade places, everything else equal in the order of content words, with more than
    function words between them ("an admin ... for a member" / "a member ... for an admin"; "Team and Enterprise" /
    "Enterprise and Team" lists the same two things)."""
    places_a = [i for i, t in enumerate(a.tokens) if t.kind in ('word', 'name')]
    seq_a = [a.tokens[i].value for i in places_a]
    seq_b = [t.value for t in b.tokens if t.kind in ('word', 'name')]
    if len(seq_a) != len(seq_b) or seq_a == seq_b or sorted(seq_a) != sorted(seq_b):
        return None
    differ = [i for i, (x, y) in enumerate(zip(seq_a, seq_b)) if x != y]
    if len(differ) != 2:
        return None
    i, j = differ
    between = a.tokens[places_a[i] + 1:places_a[j]]
    if seq_a[i] == seq_b[j] and seq_a[j] == seq_b[i] and any(t.kind != 'stop' for t in between):
        return seq_a[i], seq_a[j]
    return None


def _function_swap(a: QuestionTerms, b: QuestionTerms) -> Optional[tuple[list[str], list[str]]]:
    """The function words replaced when two questions are the same but for one function word (or a few in one
    place): "How do I turn on ...?" / "How do I turn off ...?", "... sign out this session?" / "... sign out my other
    sessions?". Only such a minimal pair counts: a rewording changes more than one place. The auxiliaries after the
    question word frame the question ("How are ... signed?" / "How is a ... signed?") and are not compared."""
    def sequence(terms: QuestionTerms) -> list[str]:
        return [t.value if t.kind != 'mark' else '|'.join(t.marks) for t in terms.tokens]
    seq_a, seq_b = sequence(a), sequence(b)
    for i, value in enumerate(seq_b):  # one word typed two ways is the same word here
        for other in seq_a:
            if value != other and _same_word(value, other):
                seq_b[i] = other
                break
    blocks = [op for op in difflib.SequenceMatcher(None, seq_a, seq_b, autojunk=False).get_opcodes()
              if op[0] != 'equal']
    if len(blocks) != 1 or blocks[0][0] != 'replace':
        return None
    _, i1, i2, j1, j2 = blocks[0]
    kinds = [t.kind for t in a.tokens[i1:i2] + b.tokens[j1:j2]]
    if any(kind not in ('stop', 'frame') for kind in kinds) or all(kind == 'frame' for kind in kinds):
        return None

    def head(terms: QuestionTerms) -> int:  # the question word and the function words after it
        return next((i for i, t in enumerate(terms.tokens) if t.kind in ('word', 'name', 'mark')), 0)
    if 0 < i1 and i2 <= head(a) and 0 < j1 and j2 <= head(b):
        return None
    return seq_a[i1:i2], seq_b[j1:j2]


def disagreement(a: QuestionTerms, b: QuestionTerms, similar: Any = None) -> Optional[str]:
    """Why two questions may ask different things (None when their wording agrees), e.g.
    ``'marks differ: #2023 / #2022'``, ``'names differ: standard / plus'``, ``'words swapped: desktop / mobile'``.

    Args:
        a, b (QuestionTerms): the two questions (read with the corpus's names, :func:`question_terms`)
        similar: ``similar(word, words) -> bool``, whether a word means the same as one of ``words`` (the embedding
            model's word similarity at its calibrated threshold; None: only spelling counts)
    """
    a, b = _one_spelling(a, b)
    if a.marks != b.marks:
        only_a, only_b = ' '.join(sorted(a.marks - b.marks)) or '-', ' '.join(sorted(b.marks - a.marks)) or '-'
        return f'marks differ: {only_a} / {only_b}'
    corpus = _corpus(a, b)
    names_a = _unmatched(_names_compared(a, corpus), b.names | b.words)
    names_b = _unmatched(_names_compared(b, corpus), a.names | a.words)
    if names_a or names_b:
        return f"names differ: {' '.join(sorted(names_a)) or '-'} / {' '.join(sorted(names_b)) or '-'}"
    words_a = _unmatched(a.words, b.words | b.names, similar)
    words_b = _unmatched(b.words, a.words | a.names, similar)
    if words_a and words_b and not _reworded(words_a, words_b, corpus):
        return f"words swapped: {' '.join(sorted(words_a))} / {' '.join(sorted(words_b))}"
    exchanged = _exchanged(a, b)
    if exchanged:
        return f'words exchanged: {exchanged[0]} / {exchanged[1]}'
    if not words_a and not words_b:
        swapped = _function_swap(a, b)
        if swapped:
            return f"function words swapped: {' '.join(swapped[0])} / {' '.join(swapped[1])}"
    return None


def _reworded(words_a: list[str], words_b: list[str], corpus: Optional[CorpusNames]) -> bool:
    """Whether a swap is only wording: every swapped word, on both sides, unknown to the corpus (it cannot answer
    one differently from the other: "save notes manually" / "save notes by hand")."""
    if corpus is None:
        return False
    return not any(corpus.knows(w) for w in words_a + words_b)


def extra_words(a: QuestionTerms, b: QuestionTerms, similar: Any = None) -> list[str]:
    """The words that need the higher similarity: the content words one question has and the other lacks (one asks
    a little more precisely, or the other drops a word, e.g. "keyboard shortcut" / "shortcut"), leaving out those the
    corpus writes everywhere, or the words of a rewording :func:`disagreement` lets through (a swap of words the
    corpus never writes). Call it on questions whose wording agrees."""
    a, b = _one_spelling(a, b)
    corpus = _corpus(a, b)
    words_a = _unmatched(a.words, b.words | b.names, similar)
    words_b = _unmatched(b.words, a.words | a.names, similar)
    if words_a and words_b:
        return words_a + words_b
    extra = words_a + words_b
    return [w for w in extra if corpus is None or not corpus.everywhere(w)]
