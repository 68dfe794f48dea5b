"""What the command line reports, as data and text: the theory's saddles and boundaries
(``bayes-attn theory``), and what a result file holds (``bayes-attn diagnose``: a posterior, a sweep,
an Adam ensemble or an umbrella-sampling landscape, and its table). The plots of a file are
:func:`bayes_attn.plotting.report.plot_report`'s.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import xarray as xr

from bayes_attn import _arviz as az
from bayes_attn.analysis.diagnostics import diagnose, fold_posterior
from bayes_attn.analysis.ensembles import ensemble_summary
from bayes_attn.inference.record import header
from bayes_attn.models.levels import BOUNDARY_ACTIVATION, ORDER_PARAMETERS, order_parameters

KINDS = ("posterior", "sweep", "adam", "llc", "landscape")


# --------------------------------------------------------------------------------------------------
# The theory at a preset


def theory_report(task, hyper, Ps, activations) -> dict:
    """The preset, the phase boundaries of ``activations`` and, at every P, the global saddle
    (its order parameters, loss and action) with its metastable minima: a JSON-ready dict.

    ``ValueError`` before any work for a P the theory cannot answer
    (:func:`bayes_attn.theory.saddles.check_P_in_range`)."""
    from bayes_attn import theory
    from bayes_attn.theory.saddles import check_P_in_range

    for P in Ps:
        check_P_in_range(task, hyper, P)
    only = activations[0] if len(set(activations)) == 1 else None  # the others' are not reported
    b = theory.phase_boundaries(task, hyper, only)
    report = {
        "preset": {"L": task.L, "V": task.V, **hyper.as_dict()},
        "boundaries": {
            k: v
            for k, v in b.as_dict().items()
            if not isinstance(v, dict) and BOUNDARY_ACTIVATION.get(k, activations[0]) in activations
        },
        "saddles": [],
    }
    for act in activations:
        for P in Ps:
            found = theory.saddles(task, hyper, P, act)
            entry = {"activation": act, "P": P, **found[0].order_parameters()}
            entry.update(loss=found[0].loss, action=found[0].action)
            entry["metastable"] = [m.order_parameters() for m in found[1:]]
            report["saddles"].append(entry)
    return report


_BOUNDARY_ROWS = (  # (field, index into a pair or None, words)
    ("second_order", None, "second-order P* (numeric)"),
    ("second_order_closed_form", None, "second-order P* (closed form)"),
    ("crossover", None, "crossover (max d cG / d log P)"),
    ("first_order", None, "first-order P* (equal action)"),
    ("spinodals", 0, "lower spinodal"),
    ("spinodals", 1, "upper spinodal"),
)


def theory_text(report: dict) -> str:
    """:func:`theory_report` as tables: the boundaries, then the saddles of each activation."""
    p = report["preset"]
    lines = [
        f"preset: L={p['L']}, V={p['V']}, chi={p['chi']:g}, g_W={p['g_w']:g}, "
        f"g_O={p['g_o']:g}, sigma^2={p['sigma2']:g}\n",
        "phase boundaries (training sequences P)",
    ]
    b = report["boundaries"]
    for name, i, words in _BOUNDARY_ROWS:
        if name in b:
            value = b[name] if i is None else b[name][i]
            lines.append(f"  {BOUNDARY_ACTIVATION[name] + ', ' + words:42s} {value:10.3f}")
    for act in dict.fromkeys(e["activation"] for e in report["saddles"]):
        q = order_parameters(act)
        lines.append(f"\n{act} attention: global saddle (metastable minima in brackets)")
        lines.append(f"  {'P':>8} {q[0]:>8} {q[1]:>8} {'loss':>8}")
        for e in (e for e in report["saddles"] if e["activation"] == act):
            extra = "".join(
                f" [{q[0]}={m[q[0]]:.3f}, {q[1]}={m[q[1]]:.3f}]" for m in e["metastable"]
            )
            lines.append(f"  {e['P']:8.6g} {e[q[0]]:8.4f} {e[q[1]]:8.4f} {e['loss']:8.4f}{extra}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# A result file


class UnknownVariables(ValueError):
    """Variables asked for that the posterior does not hold; ``valid`` lists those it does."""

    def __init__(self, unknown, valid, path):
        self.unknown, self.valid = list(unknown), list(valid)
        super().__init__(
            f"no variable {', '.join(map(repr, self.unknown))} in {path}; "
            f"valid: {', '.join(map(str, self.valid))}"
        )


@dataclasses.dataclass
class FileReport:
    """A result file read for a report: its ``kind`` (one of ``KINDS``), the ``text`` to print,
    the ``data`` to plot (the InferenceData as shown, folded with ``fold``, or the Dataset) and,
    for a posterior, the variables shown."""

    kind: str
    text: str
    data: object
    names: list[str] | None = None
    trusted: bool | None = None  # a landscape's verdict (analysis.free_energy.profile_verdict)


def read_report(path, var_names=(), fold: bool = False) -> FileReport:
    """Read a NetCDF result and describe it: a posterior gets :func:`diagnose` (of ``var_names``,
    default the order parameters it holds; ``fold``: Z2-folded), a sweep its provenance, its
    progress and the table of its finished points, an Adam ensemble its provenance and
    :func:`ensemble_summary`. ``ValueError`` for a file that is none of these (or unreadable),
    :class:`UnknownVariables` for a variable the posterior does not hold."""
    path = Path(path)
    try:
        idata = az.from_netcdf(path)
    except Exception as err:  # h5py raises OSError, xarray ValueError, ...
        raise ValueError(f"cannot read {path}: {err}") from err
    if "posterior" in az.groups(idata) and idata.posterior.attrs.get("sampler") == "llc":
        return _llc_report(idata)
    if "posterior" in az.groups(idata):
        if az.dataset(idata, "posterior").attrs.get("sampler") == "umbrella":
            from bayes_attn.analysis.free_energy import (
                landscape_report,
                landscape_text,
                profile_verdict,
            )

            prof = landscape_report(idata)
            text = f"{header(prof.attrs)}\n{landscape_text(prof)}"
            return FileReport("landscape", text, prof, trusted=profile_verdict(prof).trusted)
        return _posterior_report(idata, path, list(var_names), fold)
    with xr.open_dataset(path, engine="h5netcdf") as f:
        ds = f.load()
    if "done" in ds:
        return _sweep_report(ds)
    if ds.attrs.get("trainer") == "adam":
        text = f"{header(ds.attrs)}\n{ensemble_summary(ds).to_dataframe().T.to_string()}"
        return FileReport("adam", text, ds)
    raise ValueError(f"{path} is not a posterior, an Adam ensemble or a sweep file")


def _posterior_report(idata, path, var_names, fold) -> FileReport:
    valid = list(idata.posterior.data_vars)
    unknown = [v for v in var_names if v.removeprefix("~") not in valid]
    if unknown:
        raise UnknownVariables(unknown, valid, path)
    names = var_names or [q for q in ORDER_PARAMETERS if q in idata.posterior] or None
    d = diagnose(idata, var_names=names, fold=fold)
    shown = fold_posterior(idata) if fold else idata
    return FileReport("posterior", str(d), shown, names or list(d.table.index))


def _llc_report(idata) -> FileReport:
    """An LLC run: its provenance, the estimate (MCSE, ESS, R-hat, acceptance) and the verdict
    one run gives on itself (:func:`bayes_attn.analysis.llc.llc_verdict`, which ``bayes-attn
    llc`` prints too); a run whose draws are not finite gets only the line that says it
    diverged."""
    from bayes_attn.analysis.llc import llc_estimate, llc_verdict

    a = idata.posterior.attrs
    verdict = llc_verdict(idata)
    lines = [header(a)]
    if not np.all(np.isfinite(np.asarray(idata.posterior["loss"], dtype=float))):
        lines.append(f"{a.get('llc_sampler', '?')}: {verdict}")
    else:
        lines += [f"{a.get('llc_sampler', '?')}: {llc_estimate(idata).summary()}", str(verdict)]
    text = "\n".join(line for line in lines if line)
    return FileReport("llc", text, idata, ["llc", "distance"], trusted=verdict.trusted)


def _sweep_report(ds: xr.Dataset) -> FileReport:
    ds["done"] = ds["done"].astype(bool)
    lines = [
        header(ds.attrs),
        f"{ds.attrs.get('kind', '?')} sweep: {int(ds['done'].sum())} of {ds['done'].size} points done",
    ]
    scalars = [
        v for v in ds.data_vars if v != "done" and ds[v].ndim <= 6 and "query" not in ds[v].dims
    ]
    table = ds[scalars].where(ds["done"])
    if "member" in table.dims:
        table = table.mean("member")
    frame = table.to_dataframe().dropna(how="all")
    lines.append(frame.to_string(float_format=lambda x: f"{x:.4g}"))
    return FileReport("sweep", "\n".join(lines), ds)
