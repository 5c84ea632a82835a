"""The scope of an empirical verdict, and the setting a paper's claim was made in.

Every empirical record names what it was run on (:class:`Scope`: model, its size and the
precision of its weights, the text, n, the windows / prompts / seeds, the training steps). A
paper's claim is stated in the paper's setting (:class:`Setting`: the values of the scope's
fields the paper's experiment used, e.g. [A]'s n = 256 on pretrained LMs). A run outside that
setting cannot refute the claim: its failing comparisons become *undecided* for the claim
(:func:`scoped`), the run's own sub-verdict is kept and names its scope, and the claim reads
INCONCLUSIVE "not run in the paper's setting". A run inside the setting, or a run the claim's
statement covers as stated, decides as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

__all__ = ["SCOPE_FIELDS", "Scope", "Setting", "checked_scopes", "scope_line", "scopes_from_json"]

SCOPE_FIELDS = ("model", "parameters", "precision", "text", "n", "samples", "seeds", "steps")


def _text(name: str, value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string; got {value!r}")
    return value


@dataclass(frozen=True)
class Scope:
    """What one empirical verdict was obtained on.

    Parameters
    ----------
    model : str
        The model (name and architecture, e.g. "SmolLM2-135M-Instruct (Llama, RoPE, 30
        layers)"), or the trained family of a synthetic study.
    parameters : str
        Its size ("135M", "≈ 10⁵").
    precision : str
        The weights' precision as measured ("Q4_1 GGUF dequantised, float32").
    text : str
        The data: text source or task.
    n : int or str
        Sequence length(s) measured (tokens); a string for several ("64–1024").
    samples : str
        Windows, prompts or contexts ("16 windows", "6 contexts per cell").
    seeds : str
        Seeds of the run (splits, training).
    steps : str
        Training steps ("pretrained" for a released model).
    """

    model: str
    parameters: str
    precision: str
    text: str
    n: int | str
    samples: str
    seeds: str = "0"
    steps: str = "pretrained"
    extra: tuple = field(default=())
    """Further ``(name, value)`` pairs (e.g. ``("layers × d_model", "2 × 64")``)."""

    def __post_init__(self):
        for name in SCOPE_FIELDS:
            value = getattr(self, name)
            if name == "n" and not isinstance(value, str):
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(f"n must be a positive integer or a string; got {value!r}")
            elif not _text(name, value).strip():
                raise ValueError(f"{name} must not be empty")
        for pair in self.extra:
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
                raise TypeError(f"extra must hold (name, value) pairs; got {pair!r}")

    def line(self) -> str:
        """The scope in one short line (the verify table, the report, the lock)."""
        more = "".join(f", {k} {v}" for k, v in self.extra)
        steps = ("" if self.steps == "pretrained" else f", {self.steps} steps"
                 if self.steps.isdigit() else f", steps: {self.steps}")  # fmt: skip
        return (f"{self.model} ({self.parameters}, {self.precision}); {self.text}; n = {self.n}; "
                f"{self.samples}; seeds {self.seeds}{steps}{more}")  # fmt: skip

    def as_json(self) -> dict:
        out = asdict(self)
        out["extra"] = {k: v for k, v in self.extra}
        return out


@dataclass(frozen=True)
class Setting:
    """The setting a paper's claim was made in: ``gaps(scope)`` lists how a run differs from
    it (empty: in the setting).

    Parameters
    ----------
    source : str
        The paper ("[A]", "[B]").
    description : str
        The setting in words ("pretrained LMs, n = 256, 1000 web-text sequences").
    gaps : callable
        ``gaps(scope) -> list[str]``: one phrase per required feature the run lacks.
    """

    source: str
    description: str
    gaps: Callable

    def differences(self, scope: Scope) -> list[str]:
        if not isinstance(scope, Scope):
            raise TypeError(f"scope must be a Scope; got {type(scope).__name__}")
        return [str(g) for g in self.gaps(scope)]


def checked_scopes(scopes) -> dict:
    """``scopes`` (a mapping of sub-verdict tags to :class:`Scope`, or None) as a dict, or one
    TypeError naming the rule (``Evidence(scopes=…)``)."""
    out = dict(scopes or {})
    for tag, sc in out.items():
        if not isinstance(tag, str) or not isinstance(sc, Scope):
            raise TypeError(f"scopes must map sub-verdict tags (str) to Scope; got {tag!r}: "
                            f"{type(sc).__name__}")  # fmt: skip
    return out


def scope_line(scopes: dict) -> str:
    """Every sub-verdict's scope in one short line ("" for none)."""
    return " | ".join(f"{t}: {sc.line()}" for t, sc in scopes.items())


def scopes_from_json(d: dict) -> dict:
    """The scopes of a record's JSON (``Evidence.as_json()["scope"]``)."""
    out = {}
    for tag, v in d.items():
        v = dict(v)
        v["extra"] = tuple((k, x) for k, x in v.get("extra", {}).items())
        out[tag] = Scope(**v)
    return out
