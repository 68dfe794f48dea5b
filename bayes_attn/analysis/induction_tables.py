"""The text tables of the induction-head studies in docs/validation.md, from their result files
as ``docs/scripts/induction_figure.py``, ``docs/scripts/induction_training.py`` and
``docs/scripts/induction_tables.py`` read them: the seed means across P (:func:`study_table`),
Adam's plateau per P and token source (:func:`plateau_table`), the LLC along training
(:func:`training_llc_table`), the extended families against the MAP (:func:`closure_table`),
the symmetry test (:func:`symmetry_table`), and the posterior, SGLD and LLC along P
(:func:`beyond_map_table`), and the umbrella profiles along P (:func:`profile_table`). Only reads what it is given (points not yet done are
left out)."""

from __future__ import annotations

import numpy as np

__all__ = [
    "ACTIVATIONS",
    "SAME_MODE",
    "SOURCES",
    "beyond_map_table",
    "closure_table",
    "done_points",
    "fold_linear",
    "llc_snapshots",
    "network_llc",
    "plateau_table",
    "profile_table",
    "study_table",
    "symmetry_table",
    "training_llc_table",
]

ACTIVATIONS = ("softmax", "linear")
#: the training study's token sources, by its ``doubly_stochastic`` value: (label, colour)
SOURCES = {0: ("i.i.d. Dirichlet rows", "C0"), 1: ("doubly stochastic", "C3")}
#: runs closer than this (relative distance of the forms) are one mode (:func:`symmetry_table`)
SAME_MODE = 1e-5


def done_points(ds, act):
    """The study ``ds`` at activation ``act``, NaN where a point is not yet done."""
    one = ds.sel(activation=act)
    return one.where(one.done)


def fold_linear(ds):
    """``ds`` with the linear points' scores folded onto ``copy1 >= 0`` and ``induction2 >= 0``.

    With linear attention and the readout integrated out, the posterior is even in each layer's
    sign (:func:`~bayes_attn.induction.fold_linear_scores`, which folds draws): M1 -> -M1 flips
    (uniform1, copy1) and M2 -> -M2 flips (induction2, uniform2), so a MAP, or a chain, lands on
    either sign (datasets at one P do). Per point, every layer-1 variable (``copy1*``,
    ``uniform1*``; not their spread, R-hat and ESS: ``_sd``, ``_rhat``, ``_ess``) is multiplied
    by the sign of the point's copy1 at its MAP (``copy1_map``, in the posterior's summaries),
    else of ``copy1`` (the MAP's in a study file; the draws' mean in SGLD's, whose Adam start may
    sit at copy1 = 0 with either sign), +1 where that is 0, as the one-layer linear cG is folded;
    the layer-2 variables (``induction2*``, ``uniform2*``) likewise by the sign of
    ``induction2_map``, else ``induction2``, with ``induction2_excess* = induction2* - share``
    becoming ``s induction2* - share``. A maps file's attention patterns (``A1_*``, ``A2_*``)
    are folded with their layer's scores. Softmax points are unchanged.
    """
    if "activation" not in ds.dims or "linear" not in ds.activation.values:
        return ds
    unsigned = ("_sd", "_rhat", "_ess")
    out = ds
    for score, layer in (
        ("copy1", ("copy1", "uniform1", "A1_")),  # A1_*: a maps file's patterns
        ("induction2", ("induction2", "uniform2", "A2_")),
    ):
        ref = ds.get(f"{score}_map", ds.get(score))
        if ref is None:
            continue
        sign = np.sign(ref).where(ref != 0, 1.0).where(ds.activation == "linear", 1.0)
        new = {}
        for k in ds.data_vars:
            if not k.startswith(layer) or k.endswith(unsigned):
                continue
            twin = k.replace("induction2_excess", "induction2")  # excess = induction2 - share
            if twin == k:
                new[k] = ds[k] * sign
            elif twin in ds:  # s induction2 - share
                new[k] = ds[k] + (sign - 1) * ds[twin]
        out = out.assign(new)
    return out


def _at(ds, act, P, name):
    """The point (activation ``act``, P) of the squeezed sweep ``ds`` where it is done and
    ``name`` is finite there, else None."""
    if ds is None or act not in ds.activation.values or P not in ds.P.values:
        return None
    one = done_points(ds, act).sel(P=P)
    return one if np.isfinite(float(one[name])) else None


def _posterior_cells(p) -> str:
    if p is None:
        return " " * 92
    f = {k: float(p[k]) for k in p.data_vars}
    return (f"{f['copy1_map']:6.3f} {f['copy1_mean']:6.3f} ± {f['copy1_sd']:5.3f} "
            f"{f['copy1_rhat']:5.3f} {f['copy1_ess']:4.0f}  {f['induction2_excess_map']:+7.4f} "
            f"{f['induction2_excess_mean']:+7.4f} ± {f['induction2_excess_sd']:6.4f}  "
            f"{f['loss_predictive']:.4f} {f['loss_map']:.4f} {f['loss_bigram']:.4f}")  # fmt: skip


def beyond_map_table(posterior=None, sgld=None, llc=None, llc_net=None) -> str:
    """At each activation and P that any file has: the kernel limit's posterior (``copy1`` and
    ``induction2_excess``: MAP, mean ± sd on held-out sequences; copy1's R-hat and bulk ESS; the
    predictive held-out loss beside the MAP's and the Bayes bigram's), SGLD on the network
    (copy1's mean ± sd on the training set, the larger R-hat of the two scores, U's R-hat) and
    the LLC at the MAP (λ̂ ± MCSE, R-hat) and on the network at Adam's weights (``llc_net``,
    :func:`network_llc`). Each file is a sweep squeezed to the dims (activation, P), or None."""
    files = [f for f in (posterior, sgld, llc, llc_net) if f is not None]
    lines = ["posterior: copy1 MAP, mean ± sd, R-hat, ESS; excess MAP, mean ± sd; loss "
             "predictive, MAP, bigram | SGLD: copy1 mean ± sd, R-hat max, U R-hat | LLC ± MCSE, "
             "R-hat | network LLC ± MCSE, R-hat"]  # fmt: skip
    for act in ACTIVATIONS:
        Ps = sorted({int(P) for f in files if act in f.activation.values for P in f.P.values})
        for P in Ps:
            p, g = _at(posterior, act, P, "copy1_mean"), _at(sgld, act, P, "copy1")
            lams = [_at(f, act, P, "llc_mean") for f in (llc, llc_net)]
            if p is None and g is None and lams == [None, None]:
                continue
            cells = [f"{act:<7} {P:<5} {_posterior_cells(p)}"]
            if g is not None:
                worst = max(float(g[f"{s}_rhat"]) for s in ("copy1", "induction2_excess"))
                cells.append(f"{float(g.copy1):6.3f} ± {float(g.copy1_sd):5.3f} {worst:5.3f} "
                             f"{float(g.U_rhat):5.3f}")  # fmt: skip
            for f, lam in zip((llc, llc_net), lams, strict=True):
                if f is not None:
                    cells.append(" " * 22 if lam is None else
                                 f"{float(lam.llc_mean):7.2f} ± {float(lam.llc_mcse):5.2f} "
                                 f"{float(lam.llc_rhat):5.3f}")  # fmt: skip
            lines.append(" | ".join(cells).rstrip(" |"))
    return "\n".join(lines)


def profile_table(panels) -> str:
    """Each site's umbrella profiles along P (``panels`` ``{cv: {P: landscape report}}``, as
    :func:`~bayes_attn.experiments.results.profile_reports` reads them, with their divides):
    the windows, the minima of F, Delta F = F_strong - F_weak across the report's divide with its
    MBAR s.e., the barrier above each outer minimum (nan with one), the smallest neighbour overlap and the largest
    window R-hat; under each site, the P where Delta F changes sign
    (:func:`~bayes_attn.analysis.free_energy.equal_weight_crossing`)."""
    from bayes_attn.analysis.free_energy import equal_weight_crossing

    lines = []
    for cv, reps in panels.items():
        lines.append(f"{cv}: P, windows, minima of F, Delta F across the divide (s.e.), barrier "
                     "above the weak and strong minima, smallest overlap, largest window R-hat")  # fmt: skip
        Ps = sorted(reps)
        for P in Ps:
            r = reps[P]
            q = ", ".join(f"{v:.3f}" for v in np.atleast_1d(r.q_minimum.values))
            lines.append(f"  {P:<6} {r.sizes['window']:3d}  [{q}]  divide {float(r.divide):.3f}: "
                         f"{float(r.delta_F):+8.2f} ({float(r.delta_F_se):.2f})  "
                         f"{float(r.barrier_below):6.2f} {float(r.barrier_above):6.2f}  "
                         f"{float(r.min_overlap_next):.3f}  "
                         f"{float(np.nanmax(r.r_hat.values)):.3f}")  # fmt: skip
        cross = equal_weight_crossing(Ps, [float(reps[P].delta_F) for P in Ps])
        lines.append(f"  equal weights across the divide at P = {cross:.0f}" if np.isfinite(cross)
                     else "  Delta F does not change sign across these P")  # fmt: skip
    return "\n".join(lines)


def study_table(ds) -> str:
    """Seed means (and the seeds done) of the scores and losses at each activation and P."""
    cols = ("copy1", "induction2", "induction2_excess", "loss", "loss_bigram", "loss_unigram")
    lines = ["activation P      seeds " + " ".join(f"{c:>17}" for c in cols)]
    for act in ACTIVATIONS:
        one = done_points(ds, act)
        for P in ds.P.values:
            pt = one.sel(P=P)
            k = int(np.isfinite(pt.loss.values).sum())
            if k:
                vals = " ".join(f"{float(pt[c].mean()):17.4f}" for c in cols)
                lines.append(f"{act:<10} {int(P):<6} {k:>5} {vals}")
    return "\n".join(lines)


def plateau_table(ds) -> str:
    """Entry, jump and plateau steps per P and source: mean, sd and the seeds that jumped."""
    lines = [
        "P      source                entry (mean±sd)   jump (mean±sd)    plateau (mean±sd)   jumped"
    ]
    for P in ds.P.values:
        for k in ds.doubly_stochastic.values:
            one = ds.sel(P=P, doubly_stochastic=k).where(ds.done.sel(P=P), drop=True)
            cells = []
            for name in ("entry_step", "jump_step", "plateau_steps"):
                v = one[name].values
                v = v[np.isfinite(v)]
                sd = v.std(ddof=1) if v.size > 1 else np.nan
                cells.append(f"{v.mean():7.0f} ± {sd:5.0f}  " if v.size else "      -          ")
            jumped = int(np.isfinite(one.jump_step.values).sum())
            lines.append(f"{int(P):<6} {SOURCES[int(k)][0]:<21} {' '.join(cells)}  "
                         f"{jumped}/{one.sizes.get('seed', 1)}")  # fmt: skip
    return "\n".join(lines)


def llc_snapshots(ds):
    """The training curves of the first P, seed and source of ``ds`` (an ``induction_training``
    file with ``llc_every``), and the mask of the records that have an LLC."""
    one = ds.isel({d: 0 for d in ("P", "seed", "doubly_stochastic") if d in ds.dims})
    return one, np.isfinite(one.llc.values)


def network_llc(ds):
    """The LLC at the last record of each point of an ``induction_training`` file whose last
    record has a snapshot (configs/induction_llc_network.toml: SGLD on the network at Adam's
    weights), the first seed and source: over (activation, P), ``llc_mean``, ``llc_mcse``,
    ``llc_rhat`` (named as the ``induction_llc`` kind names them, so that both read alike),
    ``llc_grad_norm``, ``train_step``, ``test_loss``, ``copy1``, ``induction2_excess`` and
    ``done``."""
    one = ds.isel({d: 0 for d in ("L", "V", "seed", "doubly_stochastic") if d in ds.dims})
    last = one.isel(chunk=-1)
    names = {"llc": "llc_mean", "llc_mcse": "llc_mcse", "llc_rhat": "llc_rhat",
             "llc_grad_norm": "llc_grad_norm", "train_step": "train_step",
             "test_loss": "test_loss", "copy1": "copy1",
             "induction2_excess": "induction2_excess"}  # fmt: skip
    out = last[list(names)].rename({k: v for k, v in names.items() if k != v})
    return out.assign(done=one.done).drop_vars("chunk", errors="ignore")


def training_llc_table(ds) -> str:
    """λ̂ ± MCSE, R-hat, |∇L_n(w(t))|, the held-out loss and both layers' scores per snapshot
    (:func:`llc_snapshots`), then the held-out reference losses and the jump step."""
    one, has = llc_snapshots(ds)
    lines = ["step   test_loss  copy1  induction2_excess  llc ± mcse          rhat   |grad L_n|"]
    for i in np.flatnonzero(has):
        lines.append(
            f"{one.train_step.values[i]:5.0f}  {one.test_loss.values[i]:.4f}     "
            f"{one.copy1.values[i]:5.2f}  {one.induction2_excess.values[i]:17.3f}  "
            f"{one.llc.values[i]:8.2f} ± {one.llc_mcse.values[i]:6.2f}  "
            f"{one.llc_rhat.values[i]:5.2f}  {one.llc_grad_norm.values[i]:8.3f}"
        )
    refs = ", ".join(f"{k} {float(one[k]):.4f}" for k in ("loss_bigram", "loss_unigram"))
    return "\n".join([*lines, f"held-out references: {refs}; jump_step {float(one.jump_step)}"])


def _labels(ds, dim, option):
    """The names along ``dim`` of a sweep file: its coordinate, which the caller sets from the
    sweep's option (``ds.assign_coords({dim: options(ds)[option]})``)."""
    if dim not in ds.coords:
        raise ValueError(f"ds: the {dim!r} axis needs its names as a coordinate (the sweep's "
                         f"option {option!r}: bayes_attn.experiments.results.options)")  # fmt: skip
    return [str(v) for v in ds[dim].values]


def _points(ds):
    """The finished grid points of ``ds``: ``(activation, P, seed, Dataset at the point)``."""
    for act in ds.activation.values:
        for P in ds.P.values:
            for seed in ds.seed.values:
                one = ds.sel(activation=act, P=P, seed=seed).isel(L=0, V=0)
                if bool(one.done):
                    yield str(act), int(P), int(seed), one


def closure_table(*datasets) -> str:
    """The table "Against the MAP" of each ``induction_closure`` sweep file (as
    :func:`bayes_attn.experiments.sweep.load_sweep` reads it, its ``family`` axis named by the
    option ``families``): U - U_MAP (nats) of each family and of the token-symmetric floor, then
    the same against the floor, and each point's U_MAP, scores and timings."""
    return "\n".join(line for ds in datasets for line in _closure_lines(ds))


def _closure_lines(ds):
    fams = _labels(ds, "family", "families")
    rows = list(_points(ds))
    yield "| activation | P | seed | " + " | ".join(f"`{f}`" for f in fams) + " | `sym` (floor) |"
    yield "|---" * (4 + len(fams)) + "|"
    for act, P, seed, one in rows:
        gaps = one.U_family.values - float(one.U_map)
        floor = float(one.U_sym) - float(one.U_map)
        cells = [f"{g:.2f}" for g in gaps] + ["—" if np.isnan(floor) else f"{floor:.2f}"]
        yield f"| {act} | {P} | {seed} | " + " | ".join(cells) + " |"
    yield "\nagainst the floor (U_family - U_sym):"
    for act, P, seed, one in rows:
        rel = one.U_family.values - float(one.U_sym)
        yield f"  {act} {P} {seed}: " + ", ".join(
            f"{f} {r:.2f}" for f, r in zip(fams, rel, strict=True)
        )
    yield "\neach point:"
    for act, P, seed, one in rows:
        src = "maps file" if float(one.map_from_file) else "recomputed"
        yield (f"  {act} {P} {seed}: U_MAP {float(one.U_map):.3f} ({src}); off-symmetric M1 "
               f"{float(one.off_symmetric1):.3f} M2 {float(one.off_symmetric2):.3f}; symmetrised "
               f"MAP {float(one.U_sym_start):.3f}, sym minimum {float(one.U_sym):.3f} "
               f"(|grad| {float(one.sym_grad_norm):.1e}, {float(one.sym_steps):.0f} steps)")  # fmt: skip
        for k, f in enumerate(fams):
            yield (f"    {f:10s} {int(one.family_size[k]):4d} coordinates: U {float(one.U_family[k]):.3f}"
                   f"  copy1 {float(one.copy1_family[k]):.3f}  excess "
                   f"{float(one.excess_family[k]):.4f}  ({float(one.family_seconds[k]):.0f} s, "
                   f"{int(one.family_starts[k])} starts)")  # fmt: skip


def _modes(one, idx):
    """The runs ``idx`` grouped into modes (as-is distance < SAME_MODE) and the number of
    relabelling classes among them."""
    groups = []
    for i in idx:
        for g in groups:
            if one.distance.values[i, g[0]] < SAME_MODE:
                g.append(i)
                break
        else:
            groups.append([i])
    classes = []
    for g in groups:
        if not any(one.distance_relabelled.values[g[0], c[0]] < SAME_MODE for c in classes):
            classes.append(g)
    return groups, len(classes)


def symmetry_table(*datasets) -> str:
    """The table of "Is the symmetry breaking spontaneous?" over the ``induction_symmetry`` sweep
    files ``datasets`` (as :func:`bayes_attn.experiments.sweep.load_sweep` reads them, each
    ``run`` axis named by the option ``runs``, ``DATA:START``): each run's U, off-symmetric
    shares, gradient and nearest run; then the modes found on each dataset (:data:`SAME_MODE`)
    and the Hessian's lowest eigenvalues."""
    rows = ["| data | P | P′ | seed | start | U | off-sym. M₁ / M₂ | |grad| | nearest |",
            "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    notes = []
    for ds in datasets:
        runs = _labels(ds, "run", "runs")
        for _act, P, seed, one in _points(ds):
            rows += [_symmetry_row(one, runs, i, P, seed) for i in range(len(runs))]
            notes += _symmetry_notes(one, runs, P, seed)
    return "\n".join(rows) + "\n\n" + "\n".join(notes)


def _symmetry_row(one, runs, i, P, seed):
    data, start = runs[i].split(":")
    d = one.distance.values[i]
    dr = one.distance_relabelled.values[i]
    near = "—"
    if np.isfinite(d).any():
        j = int(np.nanargmin(dr))
        near = f"{runs[j].split(':')[1]}: {d[j]:.1e} as is, {dr[j]:.1e} relabelled"
    if np.isfinite(float(one.distance_map[i])):
        near += f"; study MAP {float(one.distance_map[i]):.1e}"
    return (f"| {data} | {P} | {int(one.P_data[i])} | {seed} | {start} | "
            f"{float(one.U[i]):.4f} | {float(one.off_symmetric1[i]):.3g} / "
            f"{float(one.off_symmetric2[i]):.3g} | {float(one.grad_norm[i]):.1e} | {near} |")  # fmt: skip


def _symmetry_notes(one, runs, P, seed):
    notes = []
    for data in ("real", "sym"):
        idx = [i for i, r in enumerate(runs) if r.startswith(data + ":") and
               not r.endswith(":floor")]  # fmt: skip
        if not idx:
            continue
        groups, classes = _modes(one, idx)
        U = [float(one.U[g[0]]) for g in groups]
        line = (f"{data} P = {P} seed {seed}: {len(groups)} mode(s) from {len(idx)} "
                f"starts, {classes} up to relabelling, lowest U {min(U):.4f}")  # fmt: skip
        if f"{data}:floor" in runs:
            k = runs.index(f"{data}:floor")
            line += f"; the symmetric floor {float(one.U[k]) - min(U):.2f} nats above"
        if data == "real":
            line += f"; the study's U {float(one.U_map):.4f}"
        line += f"; max |U(pM) - U(M)| {np.nanmax(one.perm_dU.values[idx]):.1e}"
        notes.append(line)
    if "hessian_low" in one:
        lam = ", ".join(f"{v:.3f}" for v in one.hessian_low.values)
        notes.append(f"P = {P} seed {seed}: Hessian at sym:floor on the asymmetric forms "
                     f"({int(one.asymmetric_dim)} dims): lowest {lam}; largest "
                     f"{float(one.hessian_high):.1f} ({float(one.hessian_seconds):.0f} s)")  # fmt: skip
    return notes
