"""Measured rollout configurations of five ALiBi LLMs and their predicted influence profiles.

The data are the released rollout configs of "A Structural Theory of Position Bias in
Transformers" (github.com/ml-uhh/position-bias, commit a514e09, MIT licence; the notice ships as
``simulate/data/NOTICE-ml-uhh-position-bias.txt``), re-encoded losslessly as one gzip-compressed
JSON file. Models: falcon-rw-7b, mpt-7b, mpt-30b, bloom-7b1, bloom (176B); n = 256.

Settings (as released): ``no_content`` (fineweb-edu λ, no content), ``mean_content`` (one scalar
content; the release applies it to head 0 only), ``all_content`` (per-layer, per-head content c
and background b, dataset-specific λ). Datasets: fineweb-edu, dclm, wikipedia. Claim PB14.
"""

from __future__ import annotations

import functools
import gzip
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import yaml

from posflow.simulate.kernels import alibi_kernel, alibi_kernels
from posflow.simulate.rollout import influence

__all__ = [
    "DATASETS",
    "SETTINGS",
    "VARIANTS",
    "MeasuredConfig",
    "config",
    "configs",
    "models",
    "pack_configs",
    "profile",
    "read_rollout_yaml",
]

DATA_FILE = "measured_configs.json.gz"
MODELS = ("falcon-rw-7b", "mpt-7b", "mpt-30b", "bloom-7b1", "bloom")
SETTINGS = ("no_content", "mean_content", "all_content")
DATASETS = ("fineweb-edu", "dclm", "wikipedia")
VARIANTS = ("attention_only", "residual", "residual_content")


@dataclass(frozen=True)
class MeasuredConfig:
    """One released rollout configuration.

    Attributes
    ----------
    model, setting, dataset : str
    n : int
        Sequence length (256).
    slopes : ndarray, shape (H,)
        ALiBi slopes ``2^{-8(h+1)/H}`` as released.
    lambdas : ndarray, shape (L,)
        The λ schedule (measured, or constant 1.0 for the ``-noresidual`` attention-only files).
    content : ndarray, shape (L, H) or (1, 1)
        Diagonal content offsets c (raw q·k, no 1/√d_head).
    base : ndarray, same shape as ``content``
        Background b (has no effect on the kernel: softmax is shift invariant).
    source : str
        The file this came from, relative to ``config/rollout/alibi``.
    """

    model: str
    setting: str
    dataset: str
    n: int
    slopes: np.ndarray
    lambdas: np.ndarray
    content: np.ndarray
    base: np.ndarray
    source: str

    @property
    def num_layers(self) -> int:
        return int(self.lambdas.size)

    @property
    def num_heads(self) -> int:
        return int(self.slopes.size)

    def kernels(self, with_content: bool = True):
        """Per-layer ALiBi(+content) kernels, a list of L kernels (one shared when no content).

        The L content kernels are built in one pass by
        :func:`posflow.simulate.kernels.alibi_kernels` (slope-only tables shared).
        """
        if not with_content or (self.content.shape == (1, 1) and self.content[0, 0] == 0.0):
            k = alibi_kernel(self.n, self.slopes)
            return [k] * self.num_layers
        if self.content.shape != (self.num_layers, self.num_heads):
            raise ValueError(
                f"content of {self.source} has shape {self.content.shape}; per-layer, per-head "
                "content (setting all_content) is needed for a content rollout"
            )
        return alibi_kernels(self.n, self.slopes, self.content)


# ------------------------------------------------------------------------------------------
# Reading the released YAML (with its tab quirk) and packing it


def read_rollout_yaml(path) -> dict:
    """Read one released rollout YAML file.

    Thirteen released files contain a tab inside a flow sequence, which strict YAML parsers
    reject; tabs are whitespace there, so they are replaced by spaces before parsing.
    """
    text = Path(path).read_text(encoding="utf-8").replace("\t", " ")
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or "attention_config" not in data:
        raise ValueError(f"path {path} is not a rollout config (no attention_config)")
    return data


def _entry(data: dict, rel: str) -> dict:
    parts = rel.removesuffix(".yaml").split("/")
    setting, model = parts[0], parts[-1]
    dataset = parts[1] if len(parts) == 3 else "fineweb-edu"
    att, cc, ls = data["attention_config"], data["content_config"], data["lambda_schedule_config"]
    if ls["schedule_type"] == "custom":
        lambdas = [float(x) for x in ls["lambdas_custom"]]
    elif ls["schedule_type"] == "constant":
        lambdas = [float(ls["lambda_const"])] * int(data["num_layers"])
    else:  # pragma: no cover - not in the release
        raise ValueError(f"{rel}: unsupported schedule_type {ls['schedule_type']!r}")
    if att.get("head_weights") is not None or float(att.get("softmax_temperature", 1.0)) != 1.0:
        raise ValueError(f"{rel}: head weights / temperature other than the defaults")
    return {
        "model": model,
        "setting": setting,
        "dataset": dataset,
        "n": int(data["sequence_length"]),
        "slopes": [float(x) for x in att["alibi_slopes"][0]],
        "lambdas": lambdas,
        "content": [[float(x) for x in row] for row in cc["diagonal_scores"]],
        "base": [[float(x) for x in row] for row in cc["base_scores"]],
        "source": rel,
    }


def pack_configs(src_root, dest) -> int:
    """Re-encode the released ``config/rollout/alibi`` tree as one gzip JSON file.

    Parameters
    ----------
    src_root : path
        The ``config/rollout/alibi`` folder of the release.
    dest : path
        Output file (``simulate/data/measured_configs.json.gz`` in the package).

    Returns
    -------
    int
        The number of configurations packed.
    """
    src = Path(src_root)
    files = sorted(src.rglob("*.yaml"))
    if not files:
        raise ValueError(f"src_root {src} holds no .yaml files")
    entries = [_entry(read_rollout_yaml(f), f.relative_to(src).as_posix()) for f in files]
    payload = json.dumps({"format": 1, "configs": entries}, separators=(",", ":"))
    with gzip.GzipFile(dest, "wb", mtime=0) as fh:
        fh.write(payload.encode("utf-8"))
    return len(entries)


@functools.cache
def _table() -> dict[tuple[str, str, str], MeasuredConfig]:
    blob = resources.files("posflow.simulate").joinpath("data", DATA_FILE).read_bytes()
    out = {}
    for e in json.loads(gzip.decompress(blob))["configs"]:
        cfg = MeasuredConfig(
            model=e["model"],
            setting=e["setting"],
            dataset=e["dataset"],
            n=e["n"],
            slopes=np.array(e["slopes"]),
            lambdas=np.array(e["lambdas"]),
            content=np.array(e["content"]),
            base=np.array(e["base"]),
            source=e["source"],
        )
        for a in (cfg.slopes, cfg.lambdas, cfg.content, cfg.base):
            a.setflags(write=False)
        out[(cfg.model, cfg.setting, cfg.dataset)] = cfg
    return out


# ------------------------------------------------------------------------------------------
# Public look-ups


def models() -> tuple[str, ...]:
    """The five measured models: falcon-rw-7b, mpt-7b, mpt-30b, bloom-7b1, bloom."""
    return MODELS


def configs() -> list[tuple[str, str, str]]:
    """Every stored (model, setting, dataset) key, including the ``-noresidual`` files."""
    return sorted(_table())


def _check_choice(value, name: str, choices) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string; got {type(value).__name__}")
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of {', '.join(choices)}")
    return value


def config(model: str, setting: str = "no_content", dataset: str = "fineweb-edu"):
    """The released configuration of ``model`` for a setting and dataset (claim PB14).

    Parameters
    ----------
    model : str
        One of :func:`models`, or a stored ``<model>-noresidual`` attention-only file.
    setting : {"no_content", "mean_content", "all_content"}
    dataset : {"fineweb-edu", "dclm", "wikipedia"}
        ``no_content`` and ``mean_content`` exist for fineweb-edu only.

    Returns
    -------
    MeasuredConfig
    """
    stored = sorted({k[0] for k in _table()})
    _check_choice(model, "model", stored)
    _check_choice(setting, "setting", SETTINGS)
    _check_choice(dataset, "dataset", DATASETS)
    key = (model, setting, dataset)
    if key not in _table():
        have = sorted(d for (m, s, d) in _table() if m == model and s == setting)
        raise ValueError(
            f"dataset {dataset!r} is not released for model {model!r} in setting {setting!r}; "
            f"available: {', '.join(have) or 'none'}"
        )
    return _table()[key]


def profile(model: str, variant: str, dataset: str = "fineweb-edu") -> np.ndarray:
    """Predicted n = 256 influence profile of a real model, [A]'s variants (a), (b), (c).

    * ``attention_only`` — λ ≡ 1 over the model's L layers, ALiBi kernels, no content (a);
    * ``residual`` — the measured fineweb-edu λ_t, no content (b; [A] uses the fineweb-edu λ
      for every dataset);
    * ``residual_content`` — the dataset's λ_t and per-layer, per-head content c (c).

    .. math:: p = e_{n-1}^\\top R_{L-1}\\cdots R_0,\\quad R_t = (1-\\lambda_t)I + \\lambda_t A_t

    Parameters
    ----------
    model : str
        One of :func:`models`.
    variant : {"attention_only", "residual", "residual_content"}
    dataset : {"fineweb-edu", "dclm", "wikipedia"}

    Returns
    -------
    ndarray, shape (256,)
        A probability vector over token positions (claim PB14).
    """
    _check_choice(model, "model", MODELS)
    _check_choice(variant, "variant", VARIANTS)
    _check_choice(dataset, "dataset", DATASETS)
    if variant == "residual_content":
        cfg = config(model, "all_content", dataset)
        return influence(cfg.kernels(with_content=True), cfg.lambdas)
    cfg = config(model, "no_content", "fineweb-edu")
    lam = np.ones(cfg.num_layers) if variant == "attention_only" else cfg.lambdas
    return influence(alibi_kernel(cfg.n, cfg.slopes), lam)
