"""What each mistake of a reply costs its reader: the one rule ``eval --answers`` reports and ``calibrate`` minimises.

An unanswerable question presented as an ``answer`` (or an answer citing a passage that does not hold it) misleads: the
reader leaves believing the documents said it. An answerable question shown as ``closest`` with the right passage
costs a few seconds of reading; one whose reply shows no right passage sends the reader elsewhere (issue 42). The
operating point of the extractive answerer is the one with the lowest expected cost, not the highest answer rate.
"""
from __future__ import annotations

MISLEADING_COST = 5.0
"""float: what a question presented as answered by a passage that does not answer it costs the user (an unanswerable
question ending ``answer``, or an answer citing no gold page), in units of :data:`CLOSEST_COST` (``--misleading-cost``
of ``eval`` and ``calibrate``)."""
CLOSEST_COST = 1.0
"""float: what an answerable question shown as ``closest`` with a gold-page passage costs: a few seconds of reading."""
MISSED_COST = 3.0
"""float: what an answerable question costs whose reply shows no gold-page passage (``closest`` without one,
``not_found``): the reader looks elsewhere."""


def mistake_cost(answerable: bool, outcome: str, shows_gold: bool, misleading: float = MISLEADING_COST) -> float:
    """What a reply costs its reader (0: the right answer, or no answer to a question the documents do not answer).

    Args:
        answerable (bool): the documents answer the question
        outcome (str): how the run ended
        shows_gold (bool): the reply shows a passage on a gold page (+-1): the cited fragment of an answer, a
            closest passage
        misleading (float): the cost of an answer that does not answer (:data:`MISLEADING_COST`)
    """
    if outcome == 'answer':
        return 0.0 if answerable and shows_gold else misleading
    if not answerable:
        return 0.0
    return CLOSEST_COST if outcome == 'closest' and shows_gold else MISSED_COST
