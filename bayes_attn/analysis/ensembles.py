"""Statistics of trained ensembles: the final state of each member, global against local minima,
and the unfiltered and filtered ensemble summaries (of :func:`bayes_attn.inference.train_adam`
results)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from bayes_attn import algebra
from bayes_attn._validation import check_positive

__all__ = ["classify_minima", "ensemble_summary", "final_state"]


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
    in a local minimum or has not converged). Returns ``ds`` with ``global_min``, ``reference_loss``
    and, with a theory loss, ``above_theory`` and ``theory_loss`` added.
    """
    check_positive("rtol", rtol)
    final = ds["train_loss"].isel(step=-1)
    ref = float(final.min())
    out = ds.copy()
    out["global_min"] = final <= ref * (1.0 + rtol)
    out["reference_loss"] = ref
    if theory_loss is not None:
        out["theory_loss"] = float(theory_loss)
        out["above_theory"] = final > float(theory_loss) * (1.0 + rtol)
    return out


def ensemble_summary(ds: xr.Dataset) -> xr.Dataset:
    """Mean and standard deviation over members of the final observables, unfiltered and filtered
    (members at the global minimum, :func:`classify_minima`). Dims (selection,)."""
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
    return xr.Dataset(data, coords={"selection": ["unfiltered", "filtered"]}, attrs=ds.attrs)
