"""ArviZ, imported on first use, and the one seam between ArviZ 0.23 and ArviZ 1.x.

``import arviz`` imports matplotlib (arviz 0.23 builds its plotting namespace at import), so a
module that only needs ``az.summary`` or ``az.from_numpyro`` would pull a plotting library into
every import of the package. Modules outside ``plotting/`` write ``from bayes_attn import _arviz as
az`` instead: ``az.summary`` then imports arviz at the first call, and ``import bayes_attn.analysis``
or ``bayes_attn.inference`` stays free of matplotlib (``tests/test_layers.py``).

The two stacks. ArviZ 0.23 returns ``arviz.InferenceData``; ArviZ 1.x (arviz-base, arviz-stats,
arviz-plots) returns ``xarray.DataTree`` with the same group, variable and dimension names. The
functions below are the only places that know which one is installed; every other module calls
them (or uses what both objects share: ``result.posterior[name]``, ``result[group].attrs``):

* :func:`from_numpyro`, :func:`from_dict`, :func:`dict_to_dataset`: build a result;
* :func:`groups`, :func:`dataset`, :func:`set_group`, :func:`drop_group`: read and edit groups;
* :func:`to_netcdf`, :func:`from_netcdf`: the NetCDF round trip (h5netcdf);
* :func:`summary`, :func:`ess`, :func:`rhat`, :func:`mcse`: the statistics the diagnostics use;
* :func:`plot_posterior`, :func:`plot_trace`: ``az.plot_posterior`` / ``az.plot_trace`` under 0.23,
  ``az.plot_dist`` / ``az.plot_trace_dist`` (matplotlib backend) under 1.x; both return the figure.

Anything else (``az.<name>``) is passed through to the installed ArviZ.
"""

from __future__ import annotations

import functools

import numpy as np


@functools.cache
def major() -> int:
    """The installed ArviZ's major version (0 or 1)."""
    from importlib.metadata import version

    return int(version("arviz").split(".")[0])


def _az():
    import arviz

    return arviz


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_az(), name)


# --------------------------------------------------------------------------------------------------
# Building results


def from_numpyro(mcmc, *, coords=None, dims=None, log_likelihood: bool = False):
    """The result of a NumPyro ``MCMC`` run (posterior, sample stats; the pointwise log-likelihood
    only when asked)."""
    return _az().from_numpyro(mcmc, coords=coords, dims=dims, log_likelihood=log_likelihood)


def from_dict(groups: dict, *, coords=None, dims=None):
    """A result from ``{group: {name: array (chain, draw, ...)}}``."""
    if major() >= 1:
        return _az().from_dict(groups, coords=coords, dims=dims)
    return _az().from_dict(**groups, coords=coords, dims=dims)


def dict_to_dataset(data: dict, *, library=None, dims=None):
    """An ``xarray.Dataset`` of draws ``{name: array (chain, draw, ...)}`` with ArviZ's attrs."""
    if major() >= 1:
        return _az().dict_to_dataset(data, inference_library=library, dims=dims)
    return _az().dict_to_dataset(data, library=library, dims=dims)


# --------------------------------------------------------------------------------------------------
# Groups


def groups(result) -> list[str]:
    """The names of the result's groups (``posterior``, ``sample_stats``, ...)."""
    if callable(getattr(result, "groups", None)):  # InferenceData
        return list(result.groups())
    return [str(k) for k in result.children]  # DataTree


def dataset(result, group: str = "posterior"):
    """The group as an ``xarray.Dataset`` (a view under 0.23, a copy under 1.x)."""
    node = result[group]
    return node.to_dataset() if hasattr(node, "to_dataset") else node


def set_group(result, group: str, ds) -> None:
    """Add (or replace) a group from an ``xarray.Dataset``, in place."""
    if group in groups(result):
        drop_group(result, group)
    if major() >= 1:
        import xarray as xr

        result[group] = xr.DataTree(ds)
    else:
        result.add_groups({group: ds})


def drop_group(result, group: str) -> None:
    """Remove a group, in place."""
    del result[group]


def set_variable(result, group: str, name: str, dims, values) -> None:
    """Add (or replace) one variable of a group, in place."""
    import xarray as xr

    result[group][name] = xr.Variable(tuple(dims), np.asarray(values))


# --------------------------------------------------------------------------------------------------
# NetCDF


def to_netcdf(result, path) -> None:
    """Write a result to NetCDF (h5netcdf, every group)."""
    result.to_netcdf(str(path), engine="h5netcdf")


def from_netcdf(path):
    """Read a result written by :func:`to_netcdf` (under either ArviZ) into memory."""
    if major() >= 1:
        import xarray as xr

        with xr.open_datatree(path, engine="h5netcdf") as tree:
            return tree.load()
    return _az().from_netcdf(str(path))


# --------------------------------------------------------------------------------------------------
# Statistics


def summary(result, *, var_names=None, kind: str = "all", round_to="none"):
    """ArviZ's summary table (default: every column, unrounded) as a ``pandas.DataFrame``; the
    columns used here (``mean``, ``sd``, ``ess_bulk``, ``ess_tail``, ``r_hat``, ``mcse_mean``,
    ``mcse_sd``) are named alike in both stacks."""
    return _az().summary(result, var_names=var_names, kind=kind, round_to=round_to)


def _array_stat(name: str, draws, method: str) -> float:
    """ArviZ's ``name`` ("ess", "rhat" or "mcse") of an array (chain, draw), or (draw,) for one chain."""
    draws = np.atleast_2d(np.asarray(draws, dtype=float))
    if major() >= 1:
        from arviz_stats.base import array_stats

        stat = getattr(array_stats, name)
        # the array interface wants the tail's quantiles; ArviZ 0.23's default is (0.05, 0.95)
        extra = {"prob": (0.05, 0.95)} if (name, method) == ("ess", "tail") else {}
        return float(stat(draws, method=method, chain_axis=0, draw_axis=1, **extra))
    return float(getattr(_az(), name)(draws, method=method))


def ess(draws, method: str = "bulk") -> float:
    """Effective sample size of an array (chain, draw), or (draw,) for one chain."""
    return _array_stat("ess", draws, method)


def mcse(draws, method: str = "mean") -> float:
    """Monte Carlo standard error of an array (chain, draw), or (draw,) for one chain."""
    return _array_stat("mcse", draws, method)


def rhat(draws, method: str = "rank") -> float:
    """R-hat of an array (chain, draw) (rank-normalised split R-hat by default)."""
    return _array_stat("rhat", draws, method)


# --------------------------------------------------------------------------------------------------
# Plots


def _figure_of(pc):
    """The matplotlib figure of an arviz-plots PlotCollection."""
    fig = pc.viz["figure"]
    return fig.item() if hasattr(fig, "item") else fig


def _dist_on(ax, x, *, hdi_prob, ref_val, round_to):
    """A plot_posterior-like panel on given axes (ArviZ 1.x draws into its own figure): density,
    the HDI as a bar, the mean, the reference value."""
    from arviz_stats.base import array_stats
    from scipy.stats import gaussian_kde

    x = np.asarray(x, dtype=float).ravel()
    lo, hi = (float(v) for v in np.asarray(array_stats.hdi(x, prob=hdi_prob)).ravel()[:2])
    if np.ptp(x) > 0:
        grid = np.linspace(x.min(), x.max(), 256)
        ax.plot(grid, gaussian_kde(x)(grid), color="C0")
    ax.plot([lo, hi], [0, 0], color="k", lw=3)
    ax.set_yticks([])
    ax.text(0.5, 0.85, f"mean={x.mean():.{round_to}g}", transform=ax.transAxes, ha="center",
            fontsize=8)  # fmt: skip
    ax.text(0.5, 0.05, f"{hdi_prob:.0%} HDI [{lo:.{round_to}g}, {hi:.{round_to}g}]",
            transform=ax.transAxes, ha="center", fontsize=7)  # fmt: skip
    if ref_val is not None:
        ax.axvline(ref_val, color="C1", ls="--", lw=1)
    return ax


def plot_posterior(
    result, *, var_names=None, ax=None, ref_val=None, hdi_prob=0.94, round_to=3, **kw
):
    """Marginal posteriors: ``az.plot_posterior`` (0.23) or ``az.plot_dist`` with ``ci_prob``
    (1.x). Returns the axes (an array). With ``ax`` (one variable) the panel is drawn on it: under
    1.x by :func:`_dist_on`, since ``plot_dist`` draws into a figure of its own."""
    if major() < 1:
        return np.atleast_1d(_az().plot_posterior(result, var_names=var_names, ax=ax,
                                                  ref_val=ref_val, hdi_prob=hdi_prob,
                                                  round_to=round_to, **kw))  # fmt: skip
    if ax is not None:
        (name,) = var_names
        return np.atleast_1d(_dist_on(ax, result["posterior"][name].values, hdi_prob=hdi_prob,
                                      ref_val=ref_val, round_to=round_to))  # fmt: skip
    pc = _az().plot_dist(result, var_names=var_names, ci_prob=hdi_prob, backend="matplotlib")
    fig = _figure_of(pc)
    return np.asarray(fig.axes, dtype=object)


def plot_trace(result, *, var_names=None, figsize=None):
    """Traces and marginals per variable: ``az.plot_trace`` (0.23) or ``az.plot_trace_dist`` (1.x).
    Returns ``(figure, axes)``, the axes (n, 2): each variable's density, then its trace."""
    if major() < 1:
        axes = _az().plot_trace(result, var_names=var_names, figsize=figsize,
                                backend_kwargs={"layout": "constrained"}, compact=True)  # fmt: skip
        axes = np.atleast_2d(axes)
        return axes[0, 0].figure, axes
    pc = _az().plot_trace_dist(result, var_names=var_names, compact=True, backend="matplotlib")
    fig = _figure_of(pc)
    if figsize is not None:
        fig.set_size_inches(*figsize)
    plot = pc.viz["plot"]
    names = var_names or list(plot.data_vars)
    axes = np.array([[plot[v].sel(column=c).item() for c in ("dist", "trace")] for v in names])
    return fig, axes
