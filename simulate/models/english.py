"""Real English text that ships with CPython: the help topics of ``pydoc_data.topics``.

About 465K characters of hand-written documentation prose (the text behind ``help("if")``),
used to measure pretrained models on natural language (issue 13) without any download.
"""

from __future__ import annotations

__all__ = ["english_text"]


def english_text() -> str:
    """The ``pydoc_data.topics`` help texts joined in sorted topic order, separated by blank
    lines (deterministic: the same string on every run of one Python version)."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[k].strip() for k in sorted(topics))
