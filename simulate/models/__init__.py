"""Causal language models, measured and trained (torch; claims PB15, PB16).

* :mod:`~posflow.simulate.models.measure` — forward hooks recording λ_t (also with the MLP
  update counted), dataset-mean attention and raw q·k, content (b, c), per-layer windows and
  gradient influence of posflow's LM and of Hugging Face causal LMs: every family whose
  attention goes through transformers' attention interface (a recording attention function,
  :mod:`~posflow.simulate.models._interface`; where each family adds its sub-layers to the
  residual: :mod:`~posflow.simulate.models._layouts`) and GPT-2, BLOOM, Falcon and MPT by hand
  adapters; ``_adapters.check_architecture(config)`` refuses anything else before weights load;
* :mod:`~posflow.simulate.models.predict` — rollout predictions (a) attention-only, (b)
  residual-aware, (c) with content, and their normalised W1 / Spearman against the measured
  influence;
* :mod:`~posflow.simulate.models.profiles` — the one profiles pipeline (PB15, ``posflow measure``,
  the stored study): profile names, labels and colours, (a)–(e) and the nulls, W1 / Spearman with
  intervals; :mod:`~posflow.simulate.models.profiles_bootstrap` — its per-sequence bootstrap;
* :mod:`~posflow.simulate.models.lm` — a small decoder-only LM with pluggable position schemes
  (``PositionScheme``, ``register_scheme`` from :mod:`~posflow.simulate.models._scheme`; NoPE,
  RoPE, ALiBi);
* :mod:`~posflow.simulate.models.train` — training on an offline byte corpus, checkpoints, the
  per-user model cache;
* :mod:`~posflow.simulate.models.corpus` — the corpus (the Python standard library by default;
  no torch);
* :mod:`~posflow.simulate.models.schemes`, :mod:`~posflow.simulate.models.extrapolate_seeds`,
  :mod:`~posflow.simulate.models.extrapolate` — accumulated-rotation, learned-angle and PaTH
  schemes, multi-seed train-short/test-long runs and their query-chunked evaluation (AT20);
  :mod:`~posflow.simulate.models.seed_store` reads their saved results and their statistics
  without torch;
* :mod:`~posflow.simulate.models.synthetic`, :mod:`~posflow.simulate.models.synthetic_train` —
  train-short/test-long synthetic tasks (flip-flop language modelling, associative recall) with
  exact error metrics, and their resumable multi-seed store (AT20, issue 25);
* :mod:`~posflow.simulate.models.bands` — constructed kernels banded to each layer's sliding
  window (uniform, [A]'s content kernels);
* :mod:`~posflow.simulate.models.scheme_identities` — the schemes' hooks against dense route
  products (AT18).

Sub-modules are imported on first use, so ``posflow.simulate.models.corpus`` works without torch.
"""

import importlib

__all__ = [
    "bands",
    "corpus",
    "extrapolate",
    "lm",
    "measure",
    "predict",
    "profiles",
    "profiles_bootstrap",
    "scheme_identities",
    "schemes",
    "synthetic",
    "synthetic_train",
    "train",
]


def __getattr__(name):
    if name in __all__:
        return importlib.import_module(f"posflow.simulate.models.{name}")
    raise AttributeError(f"module 'posflow.simulate.models' has no attribute {name!r}")
