"""Which architectures posflow measures, decided from a config alone (no torch, no weights).

:func:`check_architecture` is what :func:`posflow.simulate.models.hub.load_pretrained`,
``posflow models install`` and :func:`~posflow.simulate.models._adapters.adapter_for` ask before
anything is loaded or converted: the ``model_type`` of a transformers config, of a parsed
``config.json`` or of a GGUF header must be one posflow has an adapter for.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from posflow.simulate.models._layouts import LAYOUTS

__all__ = ["HAND", "SUPPORTED", "check_architecture"]

HAND = ("gpt2", "bloom", "falcon", "mpt")  # hand adapters (attention computed inline)
SUPPORTED = ("posflow", *HAND, *LAYOUTS)  # LAYOUTS: through transformers' attention interface


def _refuse(kind, what: str = ""):
    raise ValueError(
        f"unsupported architecture {kind!r}{what}; supported: posflow LM and Hugging Face "
        + ", ".join(SUPPORTED[1:])
    )


def check_architecture(config) -> None:
    """Refuse a model that posflow cannot measure, from its config alone.

    Parameters
    ----------
    config : transformers config, posflow ``LMConfig``, or mapping (a parsed config.json)
        Its ``model_type`` must be one of :data:`SUPPORTED`; GPT-2 without cross-attention.

    Raises one ValueError naming the model_type and the supported list, before any weight is
    loaded (nothing is imported but the config's own fields).
    """
    lm = sys.modules.get("posflow.simulate.models.lm")  # an LMConfig exists only once it loaded
    if lm is not None and isinstance(config, lm.LMConfig):
        return
    get = config.get if isinstance(config, Mapping) else lambda k, d=None: getattr(config, k, d)
    kind = get("model_type")
    if kind not in SUPPORTED or kind == "posflow":
        _refuse(kind)
    if kind == "gpt2" and get("add_cross_attention", False):
        raise ValueError("unsupported architecture: gpt2 with cross-attention")
