"""The renderer of figure specs: every panel drawn, legends inside or shared without covering
a curve, any format matplotlib writes, ax= and a returned Figure as in pandas/seaborn, and named
x ticks (validated, drawn as the only ticks, slanted when crowded, kept through JSON)."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posflow.proofs_checks.kit import _evidence as E
from posflow.proofs_checks.kit import _figures as F

PNG = b"\x89PNG\r\n\x1a\n"


def _panel(title, labels, legend="inside"):
    series = [E.Series(lab, [0, 1, 2], [0.1 * (i + 1)] * 3) for i, lab in enumerate(labels)]
    return E.Panel(title, "j", "p(j)", series, legend=legend)


@pytest.fixture
def captured(monkeypatch):
    figs = []

    def keep(fig, path):
        figs.append(fig)
        return path

    monkeypatch.setattr(F, "save", keep)
    return figs


def _legend_labels(legend):
    return [t.get_text() for t in legend.get_texts()] if legend is not None else None


def test_a_shared_legend_is_drawn_once_in_the_spare_slot(captured):
    labels = ["measured", "a", "b", "geometric"]
    shared = [_panel(f"n = {n}", labels, "shared") for n in (8, 16, 32)]
    fig = E.Figure("f", "t", [*shared, _panel("sinks", ["attn"])])
    F.render(fig, "unused.png")
    (mpl,) = captured
    axes = mpl.axes
    assert len(axes) == 6  # 2 rows of 3; slots 5 and 6 spare
    assert [_legend_labels(ax.get_legend()) for ax in axes[:3]] == [None, None, None]
    assert _legend_labels(axes[3].get_legend()) == ["attn"]  # an inside legend stays inside
    assert _legend_labels(axes[4].get_legend()) == labels and not axes[4].axison
    assert not axes[5].get_visible()
    assert not mpl.legends


def test_a_shared_legend_goes_below_a_full_grid(captured):
    labels = ["measured", "a"]
    fig = E.Figure("f", "t", [_panel(t, labels, "shared") for t in "xyz"])
    F.render(fig, "unused.png")
    (mpl,) = captured
    assert [ax.get_legend() for ax in mpl.axes] == [None, None, None]
    assert [_legend_labels(lg) for lg in mpl.legends] == [labels]


def test_inside_legends_are_the_default_and_any_matplotlib_format_is_written(tmp_path):
    fig = E.Figure("f", "t", [_panel("x", ["a", "b"])])
    path = F.render(fig, tmp_path / "f.png")
    assert path.read_bytes()[:8] == PNG
    assert F.render(fig, tmp_path / "f.pdf").read_bytes()[:5] == b"%PDF-"
    assert b"<svg" in F.render(fig, tmp_path / "f.svg").read_bytes()[:400]
    assert {".png", ".pdf", ".svg"} <= set(F.figure_suffixes())
    with pytest.raises(ValueError, match=r"path must end in a figure format .*\.pdf"):
        F.render(fig, tmp_path / "f.docx")
    from matplotlib.figure import Figure

    assert isinstance(F.render(fig), Figure)  # no path: the figure itself


def test_profile_helpers_draw_into_a_given_axes_and_leave_the_backend_alone(tmp_path):
    import sys

    from matplotlib.figure import Figure

    backend = sys.modules["matplotlib"].get_backend()
    fig = Figure()
    left, right = fig.subplots(1, 2)
    assert F.plot_profiles({"measured": [0.5, 0.2, 0.3], "residual": [0.4, 0.3, 0.3]}, "t",
                           ax=left) is left  # fmt: skip
    assert F.plot_profile([0.5, 0.2, 0.3], "t", ax=right) is right
    assert [len(ax.lines) for ax in (left, right)] == [2, 2]  # the profile and its argmin
    assert right.lines[1].get_xdata()[0] == 1  # argmin j = 1
    ax = F.plot_profile([0.5, 0.2, 0.3], "t")
    assert isinstance(ax.figure, Figure) and ax.figure is not fig
    assert F.plot_profile([0.5, 0.2, 0.3], "t", tmp_path / "p.pdf").read_bytes()[:5] == b"%PDF-"
    assert sys.modules["matplotlib"].get_backend() == backend
    with pytest.raises(TypeError, match="ax must be a matplotlib Axes"):
        F.plot_profile([0.5, 0.2, 0.3], "t", ax="left")


def test_a_bad_legend_mode_is_rejected():
    with pytest.raises(ValueError, match="legend must be 'inside' or 'shared'"):
        E.Panel("x", legend="outside")


def _named(ticks, **kw):
    series = [E.Series("", [p], [0.1 * i], "errorbar", yerr=[[0.01], [0.02]])
              for i, (p, _) in enumerate(ticks)]  # fmt: skip
    return E.Panel("W1 differences", "rival", "W1 difference", series, xticks=ticks, **kw)


def test_named_xticks_are_the_axes_only_ticks_and_keep_their_labels(captured):
    ticks = [(0, "(a)"), (1, "geometric"), (2, "linear"), (3, "uniform"), (4, "shuffled")]
    log = [(1, "one"), (10, "ten"), (100, "hundred")]
    F.render(E.Figure("f", "t", [_named(ticks), _named(log, logx=True)]), "unused.png")
    (mpl,) = captured
    lin, logax = mpl.axes
    assert list(lin.get_xticks()) == [0, 1, 2, 3, 4]
    assert [t.get_text() for t in lin.get_xticklabels()] == [lab for _, lab in ticks]
    assert {t.get_rotation() for t in lin.get_xticklabels()} == {0.0}  # five short names fit
    assert not F._crowded(lin)
    assert logax.get_xscale() == "log" and list(logax.get_xticks()) == [1, 10, 100]
    assert [t.get_text() for t in logax.get_xticklabels()] == ["one", "ten", "hundred"]
    assert list(logax.get_xticks(minor=True)) == []  # no unnamed minor ticks on the log axis
    assert lin.get_xlabel() == "rival"


def test_crowded_tick_labels_are_slanted_so_they_do_not_overlap(captured):
    ticks = [(i, f"a long predictor name {i}") for i in range(8)]
    F.render(E.Figure("f", "t", [_named(ticks)]), "unused.png")
    (mpl,) = captured
    (ax,) = mpl.axes
    labels = ax.get_xticklabels()
    assert [t.get_text() for t in labels] == [lab for _, lab in ticks]
    assert {(t.get_rotation(), t.get_horizontalalignment()) for t in labels} == {(30.0, "right")}
    # labels slanted by 30° and anchored at their ticks lie on parallel lines spaced
    # (tick spacing)·sin 30° apart: that is more than one line of text, so none collide
    spacing = ax.transData.transform((1, 0))[0] - ax.transData.transform((0, 0))[0]
    line = labels[0].get_fontsize() * mpl.dpi / 72
    assert spacing * 0.5 > line


def test_xticks_survive_the_json_round_trip_and_old_specs_have_none():
    fig = E.Figure("f", "t", [_named([(0, "(a)"), (1.5, "geometric")]), _panel("x", ["a"])])
    d = json.loads(json.dumps(fig.as_json(), allow_nan=False))
    assert d["panels"][0]["xticks"] == [[0.0, "(a)"], [1.5, "geometric"]]
    back = E.Figure.from_json(d)
    assert back.panels[0].xticks == [(0.0, "(a)"), (1.5, "geometric")]
    assert back == fig and back.panels[1].xticks is None
    del d["panels"][0]["xticks"]  # a spec written before panels had xticks
    assert E.Figure.from_json(d).panels[0].xticks is None


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(-1e6, 1e6, allow_nan=False), st.text(max_size=12)),
                max_size=8, unique_by=lambda t: t[0]))  # fmt: skip
def test_any_finite_distinct_named_positions_round_trip(ticks):
    fig = E.Figure("f", "t", [E.Panel("p", xticks=ticks)])
    back = E.Figure.from_json(json.loads(json.dumps(fig.as_json(), allow_nan=False)))
    assert back.panels[0].xticks == [(float(p), lab) for p, lab in ticks]


@pytest.mark.parametrize(
    "bad",
    ["(a) geometric", 3, [(0, "a", "b")], [0, 1], [("0", "a")], [(True, "a")],
     [(float("nan"), "a")], [(float("inf"), "a")], [(0, 1)], [(0, "a"), (0.0, "b")]],
)  # fmt: skip
def test_bad_xticks_are_rejected_naming_xticks(bad):
    with pytest.raises(ValueError, match="xticks"):
        E.Panel("x", xticks=bad)
