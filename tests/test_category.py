"""The answer contract's ``category``: the topic of an answer, from its cited documents' metadata."""
from langchain_core.documents import Document

from rag_plugin._citations import answer_category, document_category


def doc(**metadata) -> Document:
    return Document(page_content='text', metadata=metadata)


def test_category_prefers_an_explicit_category_then_a_tag_then_the_title():
    assert document_category({'category': 'Billing', 'tags': 'faq'}) == 'Billing'
    assert document_category({'tags': 'faq,Product_Docs'}) == 'faq'
    assert document_category({'tags': 'critical,security'}) == 'security'  # 'critical' marks, it is no topic
    assert document_category({'tags': 'critical', 'title': 'Guide'}) is None
    assert answer_category([doc(title='Nimbus Notes Sync Guide', source='sync.pdf')], [1]) == 'Nimbus Notes Sync Guide'
    assert answer_category([doc(source='notes.txt')], []) == 'notes.txt'
    assert answer_category([], []) is None


def test_category_comes_from_the_cited_fragments_the_most_common_first():
    docs = [doc(title='A', tags='alpha'), doc(title='B', category='Beta'), doc(title='C', category='Beta'),
            doc(title='D')]
    assert answer_category(docs, [2]) == 'Beta'
    assert answer_category(docs, [1, 2, 3]) == 'Beta'  # two of the three cited fragments
    assert answer_category(docs, [1, 2]) == 'alpha'  # a tie: the one cited first
    assert answer_category(docs, [4, 1]) == 'alpha'  # a cited fragment with a category beats the title
    assert answer_category(docs, [4]) == 'D'
    assert answer_category(docs, []) == 'Beta'  # no citation: every fragment counts
    assert answer_category(docs, [9]) == 'Beta'  # an invalid number counts as no citation


def test_an_answer_carries_the_title_of_its_top_cited_document_and_an_abstention_none(make_rag):
    rag = make_rag()
    result = rag.run(message='How long do deleted notes stay in the trash?')
    assert not result.abstained and result.cited
    top = result.docs[result.cited[0] - 1].metadata
    assert result.category == top['title'] and result.category.startswith('Nimbus Notes')
    assert result.to_dict()['category'] == result.category
    refused = rag.run(message='Who won the 2018 FIFA World Cup?')
    assert refused.abstained and refused.category is None and refused.to_dict()['category'] is None


def test_a_category_or_tag_given_at_ingestion_is_the_answers_category(make_rag, tmp_path):
    rag = make_rag()
    rag.add_text('Nimbus Notes gift cards can be redeemed under Settings > Billing > Redeem gift card. A gift card '
                 'adds its value as account credit that pays for the next renewal.',
                 {'source_id': 'gift_cards', 'category': 'Gift cards'})
    result = rag.run(message='Where do I redeem a Nimbus Notes gift card?')
    assert not result.abstained and result.sources[0]['source'] == 'gift_cards.txt'
    assert result.category == 'Gift cards'

    guide = tmp_path / 'docs' / 'loyalty.md'
    guide.parent.mkdir()
    guide.write_text('---\ncategory: Loyalty programme\n---\n# Loyalty points\n\nEvery paid month of Nimbus Notes '
                     'earns 10 loyalty points; 500 loyalty points give one free month.\n', encoding='utf-8')
    tagged = tmp_path / 'tagged' / 'referrals.md'
    tagged.parent.mkdir()
    tagged.write_text('# Referrals\n\nInviting a friend who subscribes to Nimbus Notes gives both of you a referral '
                      'bonus of one free month.\n', encoding='utf-8')
    rag.ingest(str(guide.parent))
    rag.ingest(str(tagged.parent), tags=['promotions'])
    loyalty = rag.run(message='How many loyalty points give a free month?')
    assert not loyalty.abstained and loyalty.sources[0]['source'] == 'loyalty.md'
    assert loyalty.category == 'Loyalty programme'
    referral = rag.run(message='What referral bonus do I get for inviting a friend?')
    assert not referral.abstained and referral.sources[0]['source'] == 'referrals.md'
    assert referral.category == 'promotions'
