"""Common English abbreviations people type in questions, and what they stand for.

A general list (chat and office shorthand, units, common acronyms), not one written for any corpus: the guard reads
"pwd" as "password" and "2fa" as "two-factor authentication" when the documents spell the words out, and retrieval
searches the expansion too.
"""
from __future__ import annotations

ABBREVIATIONS: dict[str, str] = {
    'acct': 'account', 'addr': 'address', 'admin': 'administrator', 'admins': 'administrators', 'amt': 'amount',
    'app': 'application', 'approx': 'approximately', 'appt': 'appointment', 'apps': 'applications',
    'asap': 'as soon as possible', 'attn': 'attention', 'auth': 'authentication', 'avg': 'average',
    'config': 'configuration', 'cust': 'customer', 'db': 'database', 'dept': 'department', 'dev': 'developer',
    'devs': 'developers', 'diff': 'difference', 'doc': 'document', 'docs': 'documents', 'dr': 'doctor',
    'emp': 'employee', 'esp': 'especially', 'etc': 'et cetera', 'faq': 'frequently asked questions',
    'gb': 'gigabytes', 'hr': 'hours', 'hrs': 'hours', 'id': 'identifier', 'img': 'image', 'info': 'information',
    'kb': 'kilobytes', 'max': 'maximum', 'mb': 'megabytes', 'mgmt': 'management', 'mgr': 'manager', 'min': 'minimum',
    'mins': 'minutes', 'misc': 'miscellaneous', 'mo': 'month', 'mos': 'months', 'msg': 'message', 'msgs': 'messages',
    'no.': 'number', 'num': 'number', 'org': 'organization', 'pic': 'picture', 'pics': 'pictures', 'pkg': 'package',
    'pls': 'please', 'pref': 'preference', 'prefs': 'preferences', 'pw': 'password', 'pwd': 'password',
    'qty': 'quantity', 'ref': 'reference', 'req': 'request', 'reqs': 'requirements', 'sec': 'second',
    'secs': 'seconds', 'sso': 'single sign-on', 'mfa': 'multi-factor authentication',
    '2fa': 'two-factor authentication', 'tfa': 'two-factor authentication', 'temp': 'temporary', 'tmp': 'temporary',
    'txt': 'text', 'usr': 'user', 'vs': 'versus', 'wk': 'week', 'wks': 'weeks', 'yr': 'year', 'yrs': 'years',
    'er': 'emergency room', 'pcp': 'primary care physician', 'rx': 'prescription', 'oon': 'out-of-network',
    'pto': 'paid time off', 'hsa': 'health savings account', 'fsa': 'flexible spending account',
    'ssn': 'social security number', 'dob': 'date of birth', 'eta': 'estimated time of arrival',
    'q1': 'first quarter', 'q2': 'second quarter', 'q3': 'third quarter', 'q4': 'fourth quarter',
    'yoy': 'year over year', 'qoq': 'quarter over quarter', 'rev': 'revenue', 'fy': 'fiscal year',
}
"""dict[str, str]: lower-case abbreviation -> the words it stands for."""


def expand(text: str, known) -> str:
    """The text followed by what its abbreviations stand for, for those the documents do not use as written
    ("how short can my pwd be?" -> "how short can my pwd be? (password)").

    Args:
        text (str): a question or query
        known (Callable[[str], bool]): whether the documents use a normalised word
    """
    from rag_plugin.text import WORD, fold, normalise
    extra = [ABBREVIATIONS[w] for w in dict.fromkeys(fold(w) for w in WORD.findall(text))
             if w in ABBREVIATIONS and not known(normalise(w))]
    return f'{text} ({"; ".join(extra)})' if extra else text
