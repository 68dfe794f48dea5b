"""Statistics of trained ensembles: the final state of each member, global against local minima,
and the unfiltered and filtered ensemble summaries (of :func:`bayes_attn.inference.train_adam`
results)."""

from __future__ import annotations

import logging

import numpy as np
import xarray as xr

from bayes_attn import algebra
from bayes_attn._validation import check_positive

__all__ = [
    "above_theory_warning",
    "classify_minima",
    "ensemble_summary",
    "final_state",
    "largest_rise",
]

log = logging.getLogger("bayes_attn")


def final_state(ds: xr.Dataset) -> dict[str, np.ndarray]:
    """The final observables of each member of a :func:`train_adam` ensemble.

    Returns ``q1``, ``qG`` (c1, cG folded onto the branch c1 + cG >= 0 of
    :func:`~bayes_attn.algebra.fold_sign` for linear attention; a1, aG for softmax), ``A_bar``
    (member, L, L; folded alike), ``train_loss``, ``test_loss``, ``token_residual`` and ``steps``
    (where early stopping stopped, else the last step).
    """
    final = ds.isel(step=-1)
    A_bar = np.asarray(final.A_bar)
    if ds.attrs["activation"] == "linear":
        c1, cG = np.asarray(final.c1), np.asarray(final.cG)
        A_bar = np.asarray(algebra.fold_attention(A_bar, c1, cG))
        q1, qG = (np.asarray(q) for q in algebra.fold_sign(c1, cG))
    else:
        q1, qG = np.asarray(final.a1), np.asarray(final.aG)
    stopped = np.asarray(ds.stopped_at)
    return dict(
        q1=q1,
        qG=qG,
        A_bar=A_bar,
        train_loss=np.asarray(final.train_loss),
        test_loss=np.asarray(final.test_loss),
        token_residual=np.asarray(final.token_residual),
        steps=np.where(stopped >= 0, stopped, int(ds.step[-1])),
    )


def classify_minima(
    ds: xr.Dataset, theory_loss: float | None = None, rtol: float = 0.05
) -> xr.Dataset:
    """Mark each member as at the global minimum or at a local one, by its final train loss only.

    A member is ``global_min`` when its final loss is within ``rtol`` (relative) of the lowest
    final loss in the ensemble. The theory's loss per token, if given, is a population value that
    a finite training set scatters around, so it does not move the reference: members more than
    ``rtol`` above it are marked ``above_theory`` instead (all of them, when the whole ensemble sits
    in a local minimum or has not converged). Returns ``ds`` with ``global_min``, ``reference_loss``,
    ``loss_rtol`` and, with a theory loss, ``above_theory`` and ``theory_loss`` added. When every
    member is above the theory, :func:`ensemble_summary` warns (:func:`above_theory_warning`).
    """
    check_positive("rtol", rtol)
    final = ds["train_loss"].isel(step=-1)
    ref = float(final.min())
    out = ds.copy()
    out["global_min"] = final <= ref * (1.0 + rtol)
    out["reference_loss"] = ref
    out["loss_rtol"] = float(rtol)
    if theory_loss is not None:
        out["theory_loss"] = float(theory_loss)
        out["above_theory"] = final > float(theory_loss) * (1.0 + rtol)
    return out


def above_theory_warning(ds: xr.Dataset) -> str | None:
    """Words for an ensemble whose every member ends above the theory's loss by more than the
    filter's margin (``above_theory`` of :func:`classify_minima` true for all), else None.

    The filter compares members with the ensemble's own lowest loss, so an ensemble that sits
    as a whole in a local minimum, or has not converged, passes it; only the theory's loss (the
    Level-2 global saddle, a population value) tells. At a finite width, or a P where the train
    loss scatters widely around it, a gap can also be real; the message gives the numbers.
    """
    if "above_theory" not in ds or "theory_loss" not in ds:
        return None
    above = np.asarray(ds["above_theory"])
    if above.size == 0 or not above.all():
        return None
    final = np.asarray(ds["train_loss"].isel(step=-1))
    theory = float(ds["theory_loss"])
    rtol = float(ds["loss_rtol"]) if "loss_rtol" in ds else 0.05
    width = f" of width {ds.attrs['d_model']}" if "d_model" in ds.attrs else ""
    return (
        f"all {above.size} members{width} end above the theory's loss: train loss "
        f"{final.min():.4g} to {final.max():.4g} per token against {theory:.4g} at the Level-2 "
        f"global saddle, more than the filter's {100 * rtol:g}% margin. The ensemble sits in a "
        "local minimum, has not converged, or is far from the theory at this width; the loss "
        "filter, which compares members with each other, cannot see it (try more steps, a "
        "learning-rate warm-up or other seeds)"
    )


def ensemble_summary(ds: xr.Dataset) -> xr.Dataset:
    """Mean and standard deviation over members of the final observables, unfiltered and filtered
    (members at the global minimum, :func:`classify_minima`). Dims (selection,).

    When every member ends above the theory's loss by more than the filter's margin
    (:func:`above_theory_warning`; needs ``classify_minima(ds, theory_loss=...)``), the summary
    says so: the words are logged as a warning (logger ``"bayes_attn"``, stderr) and kept in
    ``attrs["warning"]``."""
    if "global_min" not in ds:
        ds = classify_minima(ds)
    final = ds.drop_vars(["A_bar"], errors="ignore").isel(step=-1)
    names = [
        v
        for v in final.data_vars
        if final[v].dims == ("member",) and v not in ("stopped_at", "global_min")
    ]
    keep = final["global_min"].values
    out = {}
    for v in names:
        vals = final[v].values
        for _sel, mask in (("unfiltered", np.ones_like(keep)), ("filtered", keep)):
            out.setdefault(f"{v}_mean", []).append(float(np.mean(vals[mask])))
            out.setdefault(f"{v}_sd", []).append(float(np.std(vals[mask])))
    data = {k: (("selection",), np.asarray(v)) for k, v in out.items()}
    data["n_members"] = (("selection",), np.asarray([keep.size, int(keep.sum())]))
    if "theory_loss" in ds:
        data["theory_loss"] = (("selection",), np.full(2, float(ds["theory_loss"])))
    attrs = dict(ds.attrs)
    attrs.pop("warning", None)
    warning = above_theory_warning(ds)
    if warning is not None:
        log.warning("%s", warning)
        attrs["warning"] = warning
    return xr.Dataset(data, coords={"selection": ["unfiltered", "filtered"]}, attrs=attrs)


def largest_rise(values) -> int:
    """The index k of the grid interval [k, k + 1] over which ``values`` (an ensemble mean along
    a P grid, say aG) rises most; intervals with a NaN end are skipped.

    Raises ValueError naming ``values`` when no interval has two finite ends."""
    rise = np.diff(np.asarray(values, dtype=float))
    if not np.isfinite(rise).any():
        raise ValueError("largest_rise: values has no two neighbouring finite entries")
    return int(np.nanargmax(rise))
