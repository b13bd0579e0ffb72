"""The grounding stage (after generate, before deliver): every sentence of a generated answer checked against the
fragment it cites, re-cited when another fragment says it, removed or flagged when none does
(:class:`~rag_plugin.grounding.check.GroundingCheck`)."""
from rag_plugin.grounding.check import (FLAG, MODES, OFF, REMOVE, Grounding, GroundingCheck, SentenceCheck,
                                        Verdict)

__all__ = ['FLAG', 'Grounding', 'GroundingCheck', 'MODES', 'OFF', 'REMOVE', 'SentenceCheck', 'Verdict']
