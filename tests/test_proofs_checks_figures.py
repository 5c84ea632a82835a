"""The renderer of figure specs: every panel drawn, legends inside or shared without covering
a curve, any format matplotlib writes, ax= and a returned Figure as in pandas/seaborn."""

import pytest

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
