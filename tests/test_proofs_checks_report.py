"""The report renders evidence: measurement tables with each tolerance's kind and reason, tables,
figures drawn from their specs (PNG, inlined in the standalone HTML page), no Python reprs."""

import base64
import json
import re

import pytest

from posflow.proofs_checks.kit import _evidence as E
from posflow.proofs_checks.kit import _registry as registry
from posflow.proofs_checks.kit._report import measurement_rows, records, write_report

PNG = b"\x89PNG\r\n\x1a\n"


def _claim_with(ev):
    return registry.Claim("PB998", "[ours]", "a claim of the report test", (), lambda ctx: ev)


@pytest.fixture
def results(monkeypatch):
    fig = E.Figure(
        "curve",
        "a test figure",
        [E.Panel("left", "x", "y", [E.Series("s", [1, 2, 3], [1, 4, 9], color="residual")],
                 logy=True, hlines=[(2.0, "two")]),
         E.Panel("right", "x", "y", [E.Series("e", [1, 2], [0.5, 0.7], kind="errorbar",
                                              yerr=[0.1, 0.1])])],
    )  # fmt: skip
    ev = E.Evidence(
        [
            E.at_most("err", 3e-16, 0.0, E.fp_tol(1e-12, "T·n·ε = 7e-13"), label="max |x − y|"),
            E.at_least("gap", 0.01, 0.05, E.param_tol("dip_depth", 0.0, "relative dip"),
                       label="dip depth"),
            E.info("n", 256),
        ],
        figures=[fig],
        tables=[E.Table("sens", "sensitivity to dip_depth", ["dip_depth", "verdict"],
                        [[0.01, "HOLDS"], [0.05, "FAILS"]])],
        setup="two panels, 256 tokens",
    )  # fmt: skip
    claim = _claim_with(ev)
    monkeypatch.setitem(registry._REGISTRY, claim.id, claim)
    return [registry.run_claim(claim, registry.Context())]


def test_markdown_has_measurements_tolerances_tables_and_figures(results, tmp_path):
    index = write_report(results, tmp_path, size="quick")
    md = index.read_text()
    assert "| FAIL | dip depth | 0.01 | ≥ 0.05 | 0 | parameter dip_depth: relative dip |" in md
    assert "| pass | max \\|x − y\\| | 3e-16 | ≤ 0 + 1e-12 | 1e-12 | floating-point: T·n·ε" in md
    assert "**sensitivity to dip_depth**" in md and "| 0.05 | FAILS |" in md
    assert "*Verdict:* FAILS — 1 of 2 comparisons fail: dip depth = 0.01" in md
    png = tmp_path / "figures" / "PB998-curve.png"
    assert png.read_bytes()[:8] == PNG and "figures/PB998-curve.png" in md
    assert not re.search(r"np\.float|array\(|\{'|\[\d+ values\]", md)


def test_html_is_standalone_with_the_figures_inlined(results, tmp_path):
    write_report(results, tmp_path, size="quick")
    page = (tmp_path / "index.html").read_text()
    assert page.startswith("<!doctype html>") and "<img" in page and "src='figures" not in page
    b64 = re.search(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page).group(1)
    assert base64.b64decode(b64)[:8] == PNG
    assert "parameter dip_depth: relative dip" in page and 'class="FAILS"' in page


def test_html_has_contents_captions_time_and_figures_before_their_measurements(results,
                                                                               tmp_path):
    write_report(results, tmp_path, size="quick")
    page = (tmp_path / "index.html").read_text()
    nav = page[page.index("<nav>"):page.index("</nav>")]
    assert 'href="#verdicts"' in nav and 'href="#evidence-pb998"' in nav
    assert "<th>summary</th><th>time (s)</th></tr>" in page
    # seconds to read, with what they include in a word (the note below the table says more)
    (r,) = results
    when = "alone" if r.timing.startswith("alone") else "after " + r.timing.split()[1]
    assert re.search(r'<td class="num">\d+\.\d\d<span class="when" title="[^"]+">'
                     + when + "</span></td>", page)  # fmt: skip
    section = page[page.index('id="evidence-pb998"'):]
    assert section.index("<figure>") < section.index("<table")  # the figure beside its claim
    assert "Figure PB998.1: a test figure. Verdict of PB998: FAILS." in section
    # a figure 2 panels wide spans the page; the measurements follow it, not beside it
    assert 'class="beside"' not in section


def test_html_measurements_name_each_tolerance_reason_once(results, tmp_path):
    from posflow.proofs_checks.kit._report import _html_measurements

    rec = records(results)[0]
    rec["measurements"].append(dict(rec["measurements"][0], key="err2", label="again"))
    view = _html_measurements(rec)
    assert view["html_notes"] == ["floating-point: T·n·ε = 7e-13",
                                  "parameter dip_depth: relative dip"]  # fmt: skip
    assert [r[4] for r in view["html_rows"]] == ["floating-point [1]", "parameter [2]", "",
                                                 "floating-point [1]"]  # fmt: skip
    assert [r[3] for r in view["html_rows"]][:2] == ["≤ 0 + 1e-12", "≥ 0.05"]  # tolerance inside


def test_a_narrow_figure_sits_beside_its_measurements(results, tmp_path, monkeypatch):
    fig = E.Figure("one", "one panel", [E.Panel("p", "x", "y", [E.Series("s", [1, 2], [3, 4])])])
    ev = E.Evidence([E.at_most("err", 0.0, 0.0, E.fp_tol(1e-12, "ε"))], figures=[fig])
    claim = _claim_with(ev)
    monkeypatch.setitem(registry._REGISTRY, claim.id, claim)
    write_report([registry.run_claim(claim, registry.Context())], tmp_path, size="quick")
    page = (tmp_path / "index.html").read_text()
    beside = page[page.index('<div class="beside">'):]
    assert beside.index("<figure>") < beside.index('<table class="measurements">')


@pytest.mark.parametrize(("text", "plain"), [
    ("Dichotomy: $\\lambda_t = 0.5/(t+1)^\\beta$, n = 64", "Dichotomy: λ_t = 0.5/(t+1)^β, n = 64"),
    ("$-\\log \\sum_{j \\geq 1} P[n-1, j]$", "−log Σ_{j ≥ 1} P[n−1, j]"),
    ("its limit $\\mu_\\infty$ = 3.38", "its limit μ_∞ = 3.38"),
    ("$\\mathrm{line}\\ k$ and $\\frac{a}{b}$", "line k and a/b"),
    ("costs 5 $ only", "costs 5 $ only"),
])  # fmt: skip
def test_tex_in_figure_titles_is_read_as_unicode(text, plain):
    from posflow.proofs_checks.kit._report import _tex

    assert _tex(text) == plain


def test_caption_has_one_full_stop_and_no_tex(tmp_path, monkeypatch):
    fig = E.Figure("d", "Dichotomy: $\\lambda_t$", [E.Panel("p", "x", "y",
                   [E.Series("s", [1, 2], [3, 4])])], caption="Curves flatten.")  # fmt: skip
    ev = E.Evidence([E.at_most("err", 0.0, 0.0, E.fp_tol(1e-12, "ε"))], figures=[fig])
    claim = _claim_with(ev)
    monkeypatch.setitem(registry._REGISTRY, claim.id, claim)
    write_report([registry.run_claim(claim, registry.Context())], tmp_path, size="quick")
    page = (tmp_path / "index.html").read_text()
    assert "Dichotomy: λ<sub>t</sub> — Curves flatten. Verdict of PB998: HOLDS." in page
    assert "$" not in page[page.index("<figcaption>"):page.index("</figcaption>")]


@pytest.mark.parametrize(("seconds", "text"), [(0.4444, "0.44"), (4.335, "4.33"), (12.34, "12.3"),
                                               (123.4, "123")])  # fmt: skip
def test_seconds_are_written_to_read(seconds, text):
    from posflow.proofs_checks.kit._report import _seconds

    assert _seconds(seconds) == text


def test_timing_in_a_word_and_the_date_in_utc():
    from posflow.proofs_checks.kit._registry import timing_label
    from posflow.proofs_checks.kit._report import _timing_short, _when

    assert [_timing_short(timing_label(k)) for k in (0, 1, 3)] == ["alone", "after 1", "after 3"]
    assert _timing_short("alone (own process)") == "alone"
    assert _when("2026-12-02T18:05:47+00:00") == "2026-12-02 18:05 UTC"
    assert _when("2026-12-02T20:05:47+02:00") == "2026-12-02 18:05 UTC"
    assert _when("not a date") == "not a date"


@pytest.mark.parametrize(("text", "html"), [
    ("λ_t", "λ<sub>t</sub>"), ("e^{2λ}", "e<sup>2λ</sup>"), ("Σ_{j≥1}", "Σ<sub>j≥1</sub>"),
    ("near_far_mass", "near_far_mass"), ("x_1 < y", "x<sub>1</sub> &lt; y"),
    ("a_<b>", "a_&lt;b&gt;"), ("Σ_j A_ij (i−j)", "Σ<sub>j</sub> A<sub>ij</sub> (i−j)"),
    ("e_(n−1)R_99⋯R_0", "e<sub>(n−1)</sub>R<sub>99</sub>⋯R<sub>0</sub>"),
    ("μ_∞(m,c)", "μ<sub>∞</sub>(m,c)"), ("R_0R_1 ≠ R_1R_0", "R<sub>0</sub>R<sub>1</sub> ≠ "
                                          "R<sub>1</sub>R<sub>0</sub>"),
    ("(t+1)^0.8: x", "(t+1)<sup>0.8</sup>: x"), ("U_MIN_DEPTH·(n−1)", "U_MIN_DEPTH·(n−1)"),
    ("log_min_diag, n_trials", "log_min_diag, n_trials"), ("x_1. y", "x<sub>1</sub>. y"),
    ("$\\lambda_t$", "λ<sub>t</sub>"),
])  # fmt: skip
def test_statement_mathematics_becomes_sub_and_superscripts(text, html):
    from posflow.proofs_checks.kit._report import _math

    assert str(_math(text)) == html


def test_markdown_puts_each_figure_in_its_claims_evidence_and_links_ids(results, tmp_path):
    md = write_report(results, tmp_path, size="quick").read_text()
    evidence = md[md.index("### PB998 — FAILS"):]
    assert "![PB998: a test figure](figures/PB998-curve.png)" in evidence
    assert "| [PB998](#evidence-pb998) ([catalog](CLAIMS.md#pb998)) | FAILS |" in md


def test_results_json_is_plain_and_names_the_figure_files(results, tmp_path):
    write_report(results, tmp_path, size="quick")
    (rec,) = json.loads((tmp_path / "results.json").read_text())
    assert rec["status"] == "FAILS" and rec["measured"]["err"] == 3e-16
    assert rec["figure_paths"] == ["figures/PB998-curve.png"]
    assert rec["figures"] == [{"name": "curve", "title": "a test figure", "caption": ""}]
    rows = measurement_rows(records(results)[0])
    assert [r[0] for r in rows] == ["pass", "FAIL", "info"]
