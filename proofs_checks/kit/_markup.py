"""The report's words: its mathematics — statements, summaries, captions and table cells written
in plain Unicode with ``_``/``^`` scripts (λ_t, e^{2λ}, A_ij) and figure titles in TeX
(``$\\lambda_t$``), read as HTML sub- and superscripts (:func:`_math`) and Unicode
(:func:`_tex`) — and its seconds, timing labels and dates as a reader wants them."""

from __future__ import annotations

import datetime
import re

from markupsafe import Markup, escape

# Unicode mathematics in statements and summaries (λ_t, e^{2λ}, Σ_{j≥1}, A_ij, R_99, e_(n−1),
# μ_∞, R_0R_1) as HTML sub- and superscripts: a braced or parenthesised group, a signed number
# (a capital may follow it: R_0R_1), a short lower-case index run after a one-letter base (A_ij,
# not near_far), or one character after _ or ^ that ends the word (identifiers such as
# U_MIN_DEPTH or near_far_mass stay as they are)
_SCRIPT = re.compile(
    r"([_^])(?:\{([^{}]*)\}|(\([^()]*\))|([−-]?\d+(?:\.\d+)?(?![a-z\d_]|\.\d))|([a-z]{2,3}(?!\w))"
    r"|([^\W_]|∞)(?![\w]|\.\d))"
)

# TeX of figure titles ($\lambda_t = 0.5/(t+1)^\beta$) read as Unicode, for HTML captions
_TEX_WORDS = {
    **dict(zip(("alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa "
                "lambda mu nu xi pi rho sigma tau upsilon phi varphi chi psi omega Gamma Delta "
                "Theta Lambda Xi Pi Sigma Phi Psi Omega").split(),
               "αβγδεεζηθϑικλμνξπρστυφφχψωΓΔΘΛΞΠΣΦΨΩ", strict=True)),
    "cdot": "·", "times": "×", "infty": "∞", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥",
    "ne": "≠", "neq": "≠", "approx": "≈", "sim": "∼", "sum": "Σ", "prod": "∏", "ldots": "…",
    "dots": "…", "cdots": "⋯", "to": "→", "in": "∈", "pm": "±", "ell": "ℓ", "langle": "⟨",
    "rangle": "⟩", "|": "‖", ",": "\u2009", ";": " ", ":": " ", "!": "", " ": " ", "{": "{",
    "}": "}", "%": "%", "$": "$", "big": "", "Big": "", "bigg": "", "Bigg": "", "left": "",
    "right": "", "quad": " ", "qquad": "  ",
}  # fmt: skip
_TEX_COMMAND = re.compile(
    r"\\(?:(?:mathrm|mathbf|mathit|mathbb|text|operatorname)\{([^{}]*)\}"
    r"|frac\{([^{}]*)\}\{([^{}]*)\}|([A-Za-z]+)|(.))"
)


def _tex(text: str) -> str:
    """``text`` with each ``$…$`` read as Unicode: commands by name (``\\lambda`` → λ,
    ``\\mathrm{x}`` → x, ``\\frac{a}{b}`` → a/b, an unknown ``\\name`` → name), ``-`` → −;
    ``_`` and ``^`` are left for :func:`_math`."""

    def command(m):
        if m.group(1) is not None:
            return m.group(1)
        if m.group(2) is not None:
            return f"{m.group(2)}/{m.group(3)}"
        name = m.group(4) if m.group(4) is not None else m.group(5)
        return _TEX_WORDS.get(name, name)

    def segment(m):
        return _TEX_COMMAND.sub(command, m.group(1)).replace("-", "−")

    return re.sub(r"\$([^$]+)\$", segment, str(text))


def _math(text) -> Markup:
    """HTML-escaped ``text`` with ``$…$`` read as Unicode (:func:`_tex`) and ``_x``/``_{…}``/
    ``_(…)``/``_12``/``A_ij`` and ``^x``/``^{…}`` as <sub>/<sup>."""

    def sub(m):
        tag = "sub" if m.group(1) == "_" else "sup"
        if m.group(5) is not None:  # a short run: only after a one-letter base (A_ij, P_ii)
            i = m.start()
            if i == 0 or not m.string[i - 1].isalpha() or (i > 1 and (
                    m.string[i - 2].isalnum() or m.string[i - 2] == "_")):  # fmt: skip
                return m.group(0)
        body = next(g for g in m.groups()[1:] if g is not None)
        return f"<{tag}>{body}</{tag}>"

    return Markup(_SCRIPT.sub(sub, str(escape(_tex(text)))))


def _seconds(s) -> str:
    """Seconds to read: 0.44, 4.34, 12.3, 123."""
    s = float(s)
    return f"{s:.2f}" if s < 10 else f"{s:.1f}" if s < 100 else f"{s:.0f}"


def _timing_short(timing: str) -> str:
    """The timing label in a word or two: ``alone`` or ``after K`` (see :data:`TIMING_NOTE`)."""
    if timing.startswith("alone"):
        return "alone"
    m = re.match(r"after (\d+) check", timing)
    return f"after {m.group(1)}" if m else timing


def _when(date) -> str:
    """An ISO date of the provenance as ``2026-01-31 18:05 UTC``."""
    try:
        d = datetime.datetime.fromisoformat(str(date))
    except ValueError:
        return str(date)
    if d.utcoffset() is not None:
        d = d.astimezone(datetime.UTC)
    return d.strftime("%Y-%m-%d %H:%M") + (" UTC" if d.tzinfo is not None else "")
