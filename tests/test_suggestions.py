"""Suggestions the bot makes are answerable by construction: every question it proposes on data/pdfs (the
bootstrap map, /overview, the clarify message) is answered by RAG.run from the document it was made from."""
import json
import re

from conftest import ROOT

from rag_plugin.context.suggest import Suggestion, heading_question, in_sentence_case

META_WORDS = re.compile(r'\b(documents?|docs|guides?|say|says|tell me about|mention)\b', re.I)
NIMBUS_QA = ROOT / 'data' / 'eval' / 'nimbus_qa.jsonl'
CORPUS_SRC = ROOT / 'data' / 'corpus_src'


def unanswerable_questions(n: int) -> list[str]:
    rows = [json.loads(line) for line in NIMBUS_QA.read_text(encoding='utf-8').splitlines() if line.strip()]
    return [r['question'] for r in rows if r.get('answerable') is False][:n]


def test_a_heading_becomes_a_question_in_its_own_words():
    assert heading_question('Supported platforms') == 'What about Supported platforms?'
    assert heading_question('NN-4090: note too large to sync') == 'What about NN-4090: note too large to sync?'
    assert heading_question('How do I export my notes?') == 'How do I export my notes?'
    assert heading_question('  Rate   limits: ') == 'What about Rate limits?'
    assert heading_question('') is None
    texts = ['Nimbus Notes posts to a Slack channel. Supported platforms are listed below.']
    assert in_sentence_case('What about Supported platforms?', texts) == 'What about supported platforms?'
    assert in_sentence_case('What about Slack and Microsoft Teams?', texts) == 'What about Slack and Microsoft Teams?'
    assert in_sentence_case('What about NN-4090: note too large?', texts) == 'What about NN-4090: note too large?'


def sources_by_question(rag) -> dict[str, str]:
    """Suggested question (lower case) -> the document whose heading it was made from."""
    out = {}
    for source_id, info in rag.context.catalog.documents().items():
        for section in info.sections:
            question = heading_question(section)
            if question:
                out[question.lower()] = source_id
    return out


def assert_answered_from(rag, question: str, source_id: str) -> None:
    result = rag.run(message=question)
    assert not result.abstained, (question, result.answer)
    cited = [s['source'] for s in result.sources if s['cited']]
    assert source_id in cited, (question, source_id, cited, result.answer)


def test_every_suggestion_on_the_sample_corpus_is_answered_from_its_document(make_rag):
    rag = make_rag()
    made_from = sources_by_question(rag)
    proposed: dict[str, str] = {}

    package = rag.retrieve_context('')  # the bootstrap map (also `retrieve` without a question)
    synthesis = rag.context_plus_summary('')['synthesis']  # what /overview shows
    shown = re.findall(r'^- (.+\?)$', synthesis.split('To go further:')[-1], flags=re.M)
    assert package['follow_up_refs']['suggested_questions'] and shown
    for question in package['follow_up_refs']['suggested_questions'] + shown:
        assert question.lower() in made_from, question
        proposed[question] = made_from[question.lower()]
    # the clarify message: near what the user asked and could not be answered, or across the corpus
    for asked in [''] + unanswerable_questions(4):
        suggestions = rag.context.suggestions(asked, n=3)
        assert len(suggestions) == 3, asked
        for suggestion in suggestions:
            assert suggestion.question.lower() in made_from
            proposed[suggestion.question] = suggestion.source_ids[0]

    assert len(proposed) >= 8
    for question, source_id in proposed.items():
        assert not META_WORDS.search(question), question
        assert_answered_from(rag, question, source_id)


def test_a_candidate_the_rag_would_not_answer_from_its_document_is_not_proposed(make_rag):
    rag = make_rag()
    checker = rag.context.suggestion_checker
    good = checker.check(Suggestion('What about Webhooks?', ('integrations_and_api.pdf',), 'Webhooks'))
    assert good is not None and good.question == 'What about webhooks?'
    assert checker.check(Suggestion('What about webhooks?', ('accounts_and_billing.pdf',), 'Webhooks')) is None
    assert checker.check(Suggestion('What about the FIFA World Cup?', ('getting_started.pdf',))) is None
    # the old wording, which the guard refuses ("the documents never mention: document, say")
    old = Suggestion('What do the documents say about "Supported platforms"?', ('getting_started.pdf',))
    assert rag.run(message=old.question).abstained == (checker.check(old) is None)
    assert checker._cache
    rag.add_text('Nimbus Notes gift cards are redeemed under Settings > Billing.', {'source_id': 'gift_cards'})
    assert not checker._cache, 'new documents: the verdicts are judged again'


def source_sections() -> dict[str, str]:
    """Heading -> the text of its section (whitespace folded), from the Markdown sources of data/pdfs."""
    sections: dict[str, str] = {}
    for path in CORPUS_SRC.glob('*.md'):
        parts = re.split(r'^#{2,6} +(.+)$', path.read_text(encoding='utf-8'), flags=re.M)
        for heading, text in zip(parts[1::2], parts[2::2]):
            sections[heading.strip()] = ' '.join(text.replace('- ', ' ').split())
    return sections


def cited_sentences(answer: str) -> list[str]:
    """The sentences of an extractive answer without their ``[n]`` citations and list dashes."""
    return [re.sub(r'^- ', '', (text + end).strip()) for text, end in re.findall(r'(.*?) \[\d+\]([.!?:]?)', answer)]


def test_a_suggestion_is_answered_by_its_own_section(make_rag):
    """"What about <heading>?" is answered with sentences of that section, the heading not glued to the first one:
    the platforms for "supported platforms", the integrations for the overview of integrations."""
    rag = make_rag()
    made_from = {heading_question(section).lower(): section
                 for info in rag.context.catalog.documents().values() for section in info.sections}
    asked = set(rag.retrieve_context('')['follow_up_refs']['suggested_questions'])
    asked |= {s.question for q in [''] + unanswerable_questions(4) for s in rag.context.suggestions(q, n=3)}
    assert {'What about supported platforms?', 'What about overview of integrations?',
            'What about your Nimbus account?'} <= asked
    sections = source_sections()
    answers = {}
    for question in sorted(asked):
        answers[question] = rag.run(message=question).answer
        section = made_from[question.lower()]
        sentences = cited_sentences(answers[question])
        assert sentences, question
        for sentence in sentences:
            assert sentence in sections[section], (question, sentence)
    assert all(name in answers['What about supported platforms?'] for name in ('Windows', 'macOS', 'iOS', 'Android'))
    assert all(name in answers['What about overview of integrations?']
               for name in ('Slack', 'Microsoft Teams', 'Google Drive', 'GitHub', 'Jira', 'Zapier'))
