"""Stop words: function words of English, Spanish and Catalan, accent-folded and lower-case.

They are removed from every bag of words the plugin builds (BM25, the guard, the answerer, rewriting), so they must
never be content words in another of the three languages: Spanish/Catalan words that are English content words
("van", "pots", "son", "dos") are left out.
"""
from __future__ import annotations

ENGLISH = frozenset('''a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had has have having he her
here hers him his how i if in into is it its itself just me more most my no nor not now of off on once only or other
our ours out over own same she should so some such than that the their theirs them then there these they this those
through to too under until up very was we were what when where which while who whom why will with would you your
yours one tell please know'''.split())
"""The English function words the plugin has always removed (retrieval's BM25 terms depend on this list)."""

ENGLISH_INFORMAL = frozenset('''whats thats cant dont doesnt didnt isnt arent wasnt werent wont wouldnt couldnt
shouldnt im ive youre youve theyre weve hows wheres whos whys theres heres lets u ur pls plz thx thanks hi hey
hello ok okay yeah yes also anyone somebody someone anybody r b4 w/o thru bc cuz abt smth tho re ve ll d m s t
gonna wanna gotta'''.split())
"""Contractions typed without an apostrophe ("whats", "cant") and what is left of one written with it ("we're" ->
"re"), chat shorthand ("r", "b4", "w/o", "thru") and greetings: function words too ("whats" is "what is", not an
unknown word of the question)."""

SPANISH = frozenset('''el la los las un una unos unas lo al del de a en y e o u ni que se es fue ser estar esta
este esto estos estas ese esa eso esos esas aquel con sin por para como cuando donde quien quienes cual cuales cuanto
cuanta cuantos cuantas porque pero mas muy ya hay me mi mis te tu tus su sus nos nuestro nuestra le les yo usted
ustedes ellos ellas el ella puedo puede pueden hacer hago hace debo tengo tiene tienen qué cómo cuándo dónde
algun alguna algunos algunas otro otra otros otras todo toda todos todas sobre entre hasta desde si no'''.split())
"""Spanish function words (accent-folded by :func:`rag_plugin.text.fold` before the lookup)."""

CATALAN = frozenset('''el la els les un una uns unes lo al als del dels de d l a en i o ni que es ser estar aquest
aquesta aquests aquestes aixo aquell aquella amb sense per com quan on qui quin quina quins quines quant quanta
quants quantes perque pero mes molt ja hi ha em m meu meva meus meves et t teu teva seu seva seus seves ens nostre
nostra li jo vosaltres ells elles ella puc pot poden fer faig fa he tinc te tenen algun alguna alguns algunes altre
altra altres tot tota tots totes sobre entre fins des si no'''.split())
"""Catalan function words (accent-folded)."""


def _fold(word: str) -> str:
    import unicodedata
    return ''.join(c for c in unicodedata.normalize('NFKD', word) if not unicodedata.combining(c))


STOP_WORDS = frozenset(_fold(w) for w in ENGLISH | ENGLISH_INFORMAL | SPANISH | CATALAN)
"""All of the above, folded: what :func:`rag_plugin.text.tokens` removes."""
