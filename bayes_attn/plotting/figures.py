"""Draw the paper's figures: the data of each (:mod:`bayes_attn.experiments.figures`, which runs
the sweeps, the theory grids and the samplers the figure configs ask for) handed to its drawing
function in :mod:`bayes_attn.plotting.plots`.

``bayes-attn figures`` is the command-line face of :func:`make_figures`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import matplotlib.pyplot as plt

from bayes_attn._deprecation import moved
from bayes_attn.experiments.figures import FigureContext, figure_data
from bayes_attn.plotting import plots

log = logging.getLogger(__name__)

__getattr__ = moved(
    __name__,
    {
        "find_config_file": "bayes_attn.experiments.figures",
        "load_configs": "bayes_attn.experiments.figures",
        "preset": "bayes_attn.experiments.figures",
    },
)


def _posterior_title(boundary: str, factor: float, P: float) -> str:
    where = plots.BOUNDARY_WORDS.get(boundary, boundary).split(" (")[0]
    at = where if factor == 1 else f"{factor:g} × the {where}"
    return f"P = {P:.1f} ({at})"


def _posteriors(panels):
    labelled = {
        act: [dict(p, label=_posterior_title(p["boundary"], p["factor"], p["P"])) for p in rows]
        for act, rows in panels.items()
    }
    return plots.posteriors_across(labelled)


#: figure -> its drawing, from the data of :func:`bayes_attn.experiments.figures.figure_data`
DRAW = {
    "attention_and_loss": lambda d: plots.attention_and_loss(
        d["proto"], d["attn"], d["curves"], d["show_P"]
    ),
    "transition": lambda d: plots.order_parameter_transition(
        d["proto"],
        d["curve"],
        d["over_L"],
        d["over_V"],
        d["activation"],
        d["boundaries"],
        networks=d["networks"],
        critical_end=d.get("critical_end"),
    ),  # fmt: skip
    "posterior": lambda d: _posteriors(d["panels"]),
    "phase_weights": lambda d: plots.phase_weight_curve(d["w"], d["crossing"], d["boundaries"]),
}


def make_figures(
    configs: dict, out, *, quick: bool = False, only=None, progress: bool = True, dpi: int = 100
) -> dict[str, Path]:
    """Build the figures of ``configs`` (name -> config function) into the folder ``out``.

    Sweeps are resumable: rerunning after an interruption continues where it stopped. Returns
    name -> PNG path.
    """
    names = list(configs) if not only else list(only)
    unknown = [n for n in names if n not in configs]
    if unknown:
        raise ValueError(f"unknown figures {unknown}; known: {sorted(configs)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ctx = FigureContext(out, progress)
    written = {}
    for name in names:
        spec = configs[name](quick=quick)
        log.info("figure %s", name)
        fig = DRAW[spec["figure"]](figure_data(name, spec, ctx))
        path = out / f"{name}.png"
        fig.savefig(path, dpi=dpi)
        plt.close(fig)
        written[name] = path
    return written
