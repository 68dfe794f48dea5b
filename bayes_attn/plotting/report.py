"""The plots ``bayes-attn diagnose`` draws for a result file read by
:func:`bayes_attn.analysis.report.read_report`."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from bayes_attn import _arviz as az
from bayes_attn.plotting import plots


def _save(fig, path: Path, dpi: int) -> Path:
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def plot_report(report, folder, stem: str, dpi: int = 90) -> list[Path]:
    """Draw ``report`` into ``folder`` (created): a posterior's trace and marginals
    (``STEM_trace.png``, ``STEM_posterior.png``), a sweep's curves (``STEM_curves.png``, once a
    point is done), an Adam ensemble's losses (``STEM_loss.png``), a landscape's F(q) (``STEM_profile.png``). Returns the files written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if report.kind == "posterior":
        trace = _save(plots.trace(report.data, report.names), folder / f"{stem}_trace.png", dpi)
        axes = az.plot_posterior(report.data, var_names=report.names)
        fig = axes.ravel()[0].figure
        fig.suptitle(plots.run_title(report.data.posterior.attrs))
        fig.tight_layout()
        post = _save(fig, folder / f"{stem}_posterior.png", dpi)
        plt.close("all")
        return [trace, post]
    if report.kind == "llc":
        trace = _save(plots.trace(report.data, report.names), folder / f"{stem}_trace.png", dpi)
        plt.close("all")
        return [trace]
    if report.kind == "landscape":
        fig = plots.landscape_profile(report.data)
        return [_save(fig, folder / f"{stem}_profile.png", dpi)]
    if report.kind == "sweep":
        if not report.data["done"].any():
            return []
        return [_save(plots.sweep_curves(report.data), folder / f"{stem}_curves.png", dpi)]
    return [_save(plots.adam_loss(report.data), folder / f"{stem}_loss.png", dpi)]
