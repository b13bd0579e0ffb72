"""The plugin's own words, in English, Spanish and Catalan: one table for every sentence and label the plugin writes.

Each reply is worded in the question's language (:func:`reply_language`): a question that tells its language by its
words ("¿cuánto cuesta...?", "quant costa...?") gets its reply in it; a short one that does not ("precio plan
equipo", "ok") gets the session's previous language, else the documents', else ``rag.language``. The reply records
it (:attr:`rag_plugin.message.RAGMessage.language`) and every channel labels it in it (the web chat's badges,
Telegram's sources, the command line's). A bot's own ``not_found_answer`` is left as written.

To change a sentence, change the table (``MESSAGES['not_found']['es'] = '...'``); a missing language falls back to
English (``tests/test_wording.py`` fails on one). Nothing here imports LangChain: the web chat's renderer uses it.
"""
from __future__ import annotations

from typing import Optional

LANGUAGE_KEY = 'rag_plugin.language'
"""str: the session key of the language of the session's last reply (a short question, an upload's reply, are
worded in it)."""

LANGUAGES = ('en', 'es', 'ca')
"""tuple[str, ...]: the languages of the table; ``en`` is the fallback."""

LANGUAGE_NAMES = {
    'en': {'en': 'English', 'es': 'Spanish', 'ca': 'Catalan'},
    'es': {'en': 'inglés', 'es': 'español', 'ca': 'catalán'},
    'ca': {'en': 'anglès', 'es': 'castellà', 'ca': 'català'},
}
"""dict[str, dict[str, str]]: the name of each language (inner key), in each language (outer key)."""

MESSAGES: dict[str, dict[str, str]] = {
    # ---- replies (rag_plugin._pipeline, rag_plugin._outcome) ------------------------------------------------------
    'not_found': {
        'en': "I can't find this in the available documents.",
        'es': 'No encuentro esto en los documentos disponibles.',
        'ca': 'No trobo això als documents disponibles.'},
    'closest_preface': {
        'en': 'These passages of the documents are the closest to your question; see if they answer it:',
        'es': 'Estos pasajes de los documentos son los más cercanos a tu pregunta; mira si la responden:',
        'ca': 'Aquests passatges dels documents són els més propers a la teva pregunta; mira si la responen:'},
    'other_language': {
        'en': 'The documents are in {documents}, and your question in {question} could not be matched with them.',
        'es': 'Los documentos están en {documents} y tu pregunta en {question} no se ha podido emparejar con ellos.',
        'ca': 'Els documents són en {documents} i la teva pregunta en {question} no s\'ha pogut aparellar amb ells.'},
    'other_language_closest': {
        'en': 'These are the closest passages; see if they answer it:',
        'es': 'Estos son los pasajes más cercanos; mira si la responden:',
        'ca': 'Aquests són els passatges més propers; mira si la responen:'},
    'other_language_ask': {
        'en': 'Try asking in {documents}.',
        'es': 'Prueba a preguntar en {documents}.',
        'ca': 'Prova de preguntar en {documents}.'},
    'store_unavailable': {
        'en': "I can't search the documents right now; please try again later.",
        'es': 'Ahora mismo no puedo buscar en los documentos; inténtalo de nuevo más tarde.',
        'ca': 'Ara mateix no puc cercar als documents; torna-ho a provar més tard.'},
    'empty_scope': {
        'en': 'There are no documents in this scope.',
        'es': 'No hay documentos en este ámbito.',
        'ca': 'No hi ha documents en aquest àmbit.'},
    'question_cut': {
        'en': 'question too long: only its first {used} of {total} characters were used',
        'es': 'pregunta demasiado larga: solo se han usado sus primeros {used} de {total} caracteres',
        'ca': 'pregunta massa llarga: només se n\'han fet servir els primers {used} de {total} caràcters'},
    'degraded_note': {
        'en': '(The language model is unavailable right now; these are the most relevant passages from the '
              'documents.)',
        'es': '(El modelo de lenguaje no está disponible ahora mismo; estos son los pasajes más relevantes de los '
              'documentos.)',
        'ca': '(El model de llenguatge no està disponible ara mateix; aquests són els passatges més rellevants dels '
              'documents.)'},
    'not_in_sources': {'en': ' (not in the sources)', 'es': ' (no está en las fuentes)', 'ca': ' (no és a les fonts)'},
    'page': {'en': '{source}, page {page}', 'es': '{source}, página {page}', 'ca': '{source}, pàgina {page}'},
    # ---- smalltalk (rag_plugin._outcome.smalltalk_reply) ----------------------------------------------------------
    'hello': {'en': 'Hello!', 'es': '¡Hola!', 'ca': 'Hola!'},
    'thanks': {'en': "You're welcome!", 'es': '¡De nada!', 'ca': 'De res!'},
    'bye': {'en': 'Goodbye!', 'es': '¡Hasta luego!', 'ca': 'Fins aviat!'},
    'about': {
        'en': 'I can answer questions about these documents: {titles}.',
        'es': 'Puedo responder preguntas sobre estos documentos: {titles}.',
        'ca': 'Puc respondre preguntes sobre aquests documents: {titles}.'},
    'ask': {'en': 'Ask me anything about them.', 'es': 'Pregúntame lo que quieras sobre ellos.',
            'ca': "Pregunta'm el que vulguis sobre ells."},
    'more': {'en': 'Ask me anything else about the documents.',
             'es': 'Pregúntame lo que quieras sobre los documentos.',
             'ca': "Pregunta'm el que vulguis sobre els documents."},
    # ---- overviews (rag_plugin.context.synthesis) -----------------------------------------------------------------
    'overview_one': {'en': 'I can answer questions about this document ({n}):',
                     'es': 'Puedo responder preguntas sobre este documento ({n}):',
                     'ca': 'Puc respondre preguntes sobre aquest document ({n}):'},
    'overview_many': {'en': 'I can answer questions about these documents ({n}):',
                      'es': 'Puedo responder preguntas sobre estos documentos ({n}):',
                      'ca': 'Puc respondre preguntes sobre aquests documents ({n}):'},
    'overview_more': {'en': '- and {n} more.', 'es': '- y {n} más.', 'ca': '- i {n} més.'},
    'key_points': {'en': 'Key points by document:', 'es': 'Puntos clave por documento:',
                   'ca': 'Punts clau per document:'},
    'critical_points': {'en': 'Critical points:', 'es': 'Puntos críticos:', 'ca': 'Punts crítics:'},
    'also_in_scope': {'en': 'Also in scope: {topics}.', 'es': 'También en el ámbito: {topics}.',
                      'ca': "També a l'àmbit: {topics}."},
    'go_further': {'en': 'To go further:', 'es': 'Para ir más allá:', 'ca': 'Per anar més enllà:'},
    'you_could_ask': {'en': 'You could ask, for example:', 'es': 'Podrías preguntar, por ejemplo:',
                      'ca': 'Podries preguntar, per exemple:'},
    # ---- uploads (rag_plugin.channels.webchat.describe_ingestion) -------------------------------------------------
    'upload_added': {'en': 'Added {name}: {chunks}. You can ask about it now.',
                     'es': 'Añadido {name}: {chunks}. Ya puedes preguntar sobre él.',
                     'ca': 'Afegit {name}: {chunks}. Ja hi pots preguntar.'},
    'upload_updated': {'en': 'Updated {name}: {chunks}.', 'es': 'Actualizado {name}: {chunks}.',
                       'ca': 'Actualitzat {name}: {chunks}.'},
    'upload_unchanged': {'en': '{name} is already in the documents ({chunks}); nothing changed.',
                         'es': '{name} ya está en los documentos ({chunks}); no ha cambiado nada.',
                         'ca': '{name} ja és als documents ({chunks}); no ha canviat res.'},
    'upload_failed': {'en': 'Could not add {name}: {reason}.', 'es': 'No se ha podido añadir {name}: {reason}.',
                      'ca': "No s'ha pogut afegir {name}: {reason}."},
    'upload_unreadable': {'en': 'it could not be read', 'es': 'no se ha podido leer', 'ca': "no s'ha pogut llegir"},
    'upload_nothing': {'en': 'Nothing was added.', 'es': 'No se ha añadido nada.', 'ca': "No s'ha afegit res."},
    'chunks_one': {'en': '1 chunk', 'es': '1 fragmento', 'ca': '1 fragment'},
    'chunks_many': {'en': '{n} chunks', 'es': '{n} fragmentos', 'ca': '{n} fragments'},
    # ---- labels: the web chat (rag_plugin.channels.webchat_ui), Telegram, the command line ------------------------
    'label_not_found': {'en': 'Not found in the documents', 'es': 'No está en los documentos',
                        'ca': 'No és als documents'},
    'label_closest': {'en': 'Closest passages', 'es': 'Pasajes más cercanos', 'ca': 'Passatges més propers'},
    'label_other_language': {'en': 'Another language', 'es': 'Otro idioma', 'ca': 'Una altra llengua'},
    'label_fallback_note': {'en': 'the language model failed; these are passages extracted from the documents.',
                            'es': 'el modelo de lenguaje ha fallado; estos son pasajes extraídos de los documentos.',
                            'ca': 'el model de llenguatge ha fallat; aquests són passatges extrets dels documents.'},
    'label_answered_by': {'en': 'answered by {name}', 'es': 'respondido por {name}', 'ca': 'respost per {name}'},
    'label_fallback': {'en': 'Fallback answer', 'es': 'Respuesta de reserva', 'ca': 'Resposta de reserva'},
    'label_sources': {'en': 'Sources', 'es': 'Fuentes', 'ca': 'Fonts'},
    'label_more_fragments': {'en': '{n} more retrieved fragments', 'es': '{n} fragmentos recuperados más',
                             'ca': '{n} fragments recuperats més'},
    'label_more_fragment': {'en': '1 more retrieved fragment', 'es': '1 fragmento recuperado más',
                            'ca': '1 fragment recuperat més'},
    'label_sources_cited': {'en': 'Sources (* cited):', 'es': 'Fuentes (* citadas):', 'ca': 'Fonts (* citades):'},
    'label_confidence': {'en': 'confidence', 'es': 'confianza', 'ca': 'confiança'},
    'label_outcome_closest': {'en': 'the closest passages', 'es': 'los pasajes más cercanos',
                              'ca': 'els passatges més propers'},
    'label_outcome_not_found': {'en': 'not found', 'es': 'no encontrado', 'ca': 'no trobat'},
    'label_outcome_unavailable': {'en': 'the store is unavailable', 'es': 'el almacén no está disponible',
                                  'ca': "el magatzem no està disponible"},
    'label_outcome_smalltalk': {'en': 'small talk: not searched', 'es': 'charla: sin búsqueda',
                                'ca': 'conversa: sense cerca'},
    'label_outcome_other_language': {'en': 'another language than the documents\'',
                                     'es': 'otro idioma que el de los documentos',
                                     'ca': 'una altra llengua que la dels documents'},
    'label_degraded': {'en': 'degraded', 'es': 'degradada', 'ca': 'degradada'},
    'label_cached': {'en': 'from the answer cache', 'es': 'de la caché de respuestas',
                     'ca': 'de la memòria cau de respostes'},
    'ui_caption': {'en': 'Answers come from the documents, with the sources they were found in.',
                   'es': 'Las respuestas salen de los documentos, con las fuentes donde se encontraron.',
                   'ca': 'Les respostes surten dels documents, amb les fonts on es van trobar.'},
    'ui_add_document': {'en': 'Add a document', 'es': 'Añadir un documento', 'ca': 'Afegir un document'},
    'ui_new_conversation': {'en': 'New conversation', 'es': 'Nueva conversación', 'ca': 'Nova conversa'},
    'ui_ask': {'en': 'Ask a question about the documents', 'es': 'Haz una pregunta sobre los documentos',
               'ca': 'Fes una pregunta sobre els documents'},
    'ui_connecting': {'en': 'Connecting to the bot…', 'es': 'Conectando con el bot…', 'ca': 'Connectant amb el bot…'},
    'ui_closed': {'en': 'The connection to the bot is closed. Reload the page to start a new conversation.',
                  'es': 'La conexión con el bot está cerrada. Recarga la página para empezar una nueva conversación.',
                  'ca': 'La connexió amb el bot està tancada. Torna a carregar la pàgina per començar una nova '
                        'conversa.'},
    'ui_send_failed': {'en': 'The message could not be sent: the connection to the bot is closed.',
                       'es': 'No se ha podido enviar el mensaje: la conexión con el bot está cerrada.',
                       'ca': "No s'ha pogut enviar el missatge: la connexió amb el bot està tancada."},
}
"""dict[str, dict[str, str]]: every sentence and label the plugin writes, by key and language (``str.format``
fields in braces)."""


def say(key: str, language: Optional[str] = 'en', **fields: object) -> str:
    """The message ``key`` in ``language`` (English when the table lacks it), its fields filled in.

    Args:
        key (str): a key of :data:`MESSAGES`
        language (str): ``en``, ``es`` or ``ca`` (another: English)
        **fields: the values of the message's ``{fields}``

    Raises:
        KeyError: no message has that key
    """
    texts = MESSAGES[key]
    text = texts.get(language or 'en') or texts['en']
    return text.format(**fields) if fields else text


def language_name(language: str, in_language: Optional[str] = 'en') -> str:
    """The name of ``language`` written in ``in_language`` (``language_name('en', 'es')`` is ``inglés``); an
    unknown code is returned as it is."""
    names = LANGUAGE_NAMES.get(in_language or 'en') or LANGUAGE_NAMES['en']
    return names.get(language, language)


def reply_language(question: str, previous: Optional[str] = None, documents: Optional[str] = None,
                   default: Optional[str] = 'en') -> str:
    """The language a reply to ``question`` is worded in: the question's, when its words tell it
    (:func:`rag_plugin.text.question_language`); else the session's previous reply's; else the documents'; else
    ``default``; each only if the table has it. A message of one or two words ("ok", "y el precio?") is too short
    to tell against a conversation: the session's language comes first.

    Args:
        question (str): what the user wrote
        previous (str): the language of the session's previous reply
        documents (str): the documents' main language
        default (str): ``rag.language``
    """
    from rag_plugin.text import question_language  # the stopword lists load on first use
    asked_in = question_language(question)
    order = (previous, asked_in) if len(question.split()) < 3 else (asked_in, previous)
    for candidate in (*order, documents, default):
        if candidate in LANGUAGES:
            return candidate
    return 'en'


__all__ = ['LANGUAGE_KEY', 'LANGUAGES', 'LANGUAGE_NAMES', 'MESSAGES', 'language_name', 'reply_language', 'say']
