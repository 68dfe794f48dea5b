"""The induction head's kernel-limit posterior beyond its MAP: NUTS draws, umbrella profiles, LLC.

Three sweep kinds on :func:`~bayes_attn.models.two_layer.two_layer_kernel_model` (issue 43, part 4),
each at one dataset per grid point, drawn as the ``induction`` kind draws it (the run key's dataset
key; the held-out set from the run key folded with 1), so that a point here sits beside the MAP
sweep's point of the same P and seed:

- ``induction_posterior`` (:func:`posterior_point`): NUTS from the MAP
  (:func:`map_problem`, the three starts of :func:`~bayes_attn.experiments.induction.induction_map`),
  in the Laplace metric at the MAP by default. It records the posterior mean and spread of both
  layers' order parameters on held-out sequences, their R-hat and bulk ESS (on the training set,
  every draw), and the held-out loss of the posterior-predictive mean beside the MAP's and the
  three references. NUTS explores the MAP's basin: it does not cross between the no-head and
  induction-head modes where a barrier separates them; the profiles below measure that barrier.
- ``induction_profile`` (:func:`profile_point`): the umbrella profile F(q) of the full posterior
  along layer 1's ``copy1`` and layer 2's ``induction2`` (deterministic sites of the model, which
  :func:`~bayes_attn.inference.umbrella.run_umbrella` biases through the flat potential's
  ``scalar_site``), the windows placed from the modes found from the MAP search's starts; its
  minima, barriers and F_strong - F_weak. :func:`equal_weight_P` reads the P where the two minima
  weigh the same off a sweep.
- ``induction_llc`` (:func:`llc_point`): the LLC at the MAP through the exact localized target of
  the two-layer network with orthonormal frozen embeddings of width ``d_model`` (Gram I, so that its
  posterior is the kernel limit's exactly), the readout integrated out in closed form
  (:func:`two_layer_llc_target`), as :func:`~bayes_attn.inference.llc_frozen.frozen_llc_target`
  does for one layer.

References
----------
docs/theory.md §13; docs/validation.md, "The induction head: posterior, profiles and LLC".
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bayes_attn import _arviz as az
from bayes_attn._validation import check_centres, check_int, check_output_folder, check_positive
from bayes_attn.analysis.free_energy import equal_weight_crossing
from bayes_attn.experiments.induction import (
    WEAK_BETA,
    check_induction,
    features,
    map_search,
    readout_mean,
)
from bayes_attn.induction import (
    SCORES,  # re-exported: the order parameters of both layers
    fold_linear_scores,
)
from bayes_attn.inference.llc_target import LLCTarget, default_nbeta
from bayes_attn.keys import run_key
from bayes_attn.models.two_layer import (
    BLOCK,
    design_products,
    forward,
    induction_scores,
    two_layer_kernel_model,
)
from bayes_attn.theory import induction_refs

__all__ = [
    "LLC_DEFAULTS",
    "POSTERIOR_DEFAULTS",
    "PROFILE_DEFAULTS",
    "SCORES",
    "check_llc",
    "check_posterior",
    "check_profile",
    "equal_weight_P",
    "llc_point",
    "map_problem",
    "posterior_point",
    "predictive",
    "profile_point",
    "two_layer_llc_target",
]

_MAP = {"num_test": 2000, "beta": 3.0, "maxiter": 300, "method": "l-bfgs", "weak_beta": WEAK_BETA}

#: the options of the ``induction_posterior`` kind: NUTS's chains, warm-up and draws, its metric,
#: and the draws (thinned evenly over all chains) whose held-out outputs make the predictive
POSTERIOR_DEFAULTS = {**_MAP, "num_chains": 2, "num_warmup": 100, "num_samples": 200,
                      "metric": "laplace", "num_predictive": 40}  # fmt: skip

#: the options of the ``induction_profile`` kind: the sites profiled (the file's ``cv`` dim) and
#: the umbrella's budget (the kernel level's settings, shrunk: docs/validation.md)
PROFILE_DEFAULTS = {**_MAP, "cvs": ["copy1", "induction2"], "num_warmup": 50, "num_samples": 100,
                    "num_chains": 1, "max_windows": 12, "refine": 0, "profiles": "",
                    "centres": {}}  # fmt: skip

#: the options of the ``induction_llc`` kind: the localized target's width, nβ (0: n / log n), γ,
#: the prior's inclusion, and the sampler ("sgld", "mala" or "nuts") with its budget and NUTS's
#: metric ("laplace": the dense inverse Hessian of the target at the MAP; "adapt": diagonal)
LLC_DEFAULTS = {**_MAP, "d_model": 10_000, "nbeta": 0.0, "gamma": 100.0, "include_prior": False,
                "sampler": "nuts", "metric": "laplace", "num_chains": 2, "num_draws": 200,
                "num_burnin": "auto", "step_size": "auto"}  # fmt: skip


# --------------------------------------------------------------------------------------------------
# The dataset and the MAP (as the ``induction`` kind finds it)


def map_problem(task, hyper, P: int, activation: str, *, seed: int = 0, num_test: int = 2000,
                beta: float = 3.0, maxiter: int = 300, method: str = "l-bfgs",
                weak_beta: float = WEAK_BETA) -> dict:  # fmt: skip
    """The dataset, the held-out set, the starts and the MAP of the ``induction`` kind's point.

    :func:`~bayes_attn.experiments.induction.map_search` with the ``induction`` kind's options
    (kernel limit, no Gram; L-BFGS from the three starts), so the MAP is that sweep's. Returns
    ``{"tokens", "test", "starts", "map", "U"}``: ``starts`` the constrained starts (near zero,
    the circuit, the weak circuit), ``map`` the kept mode's ``{"M1", "M2"}`` and ``U`` the
    potentials found from each start."""
    s = map_search(task, hyper, P, activation, seed=seed, num_test=num_test, beta=beta,
                   maxiter=maxiter, method=method, weak_beta=weak_beta)  # fmt: skip
    return {"tokens": s["tokens"], "test": s["test"], "starts": list(s["starts"].values()),
            "map": s["map"], "U": [float(m.U) for m in s["modes"].values()]}  # fmt: skip


def predictive(task, hyper, tokens, test, activation: str, M1s, M2s) -> dict:
    """The held-out reading of draws (M1s, M2s) (k, ...): each draw's scores (``{name: (k,)}``),
    its held-out loss (``loss_draws``, its posterior-mean readout on ``tokens``), and the held-out
    comparison of the posterior-predictive mean (the draws' outputs averaged) with the references
    (:func:`~bayes_attn.theory.induction_refs.compare_to_strategies`)."""

    def one(m):
        M1, M2 = m
        w = readout_mean(M1, M2, task, hyper, tokens, activation)
        Phi, A1, A2 = forward(M1, M2, jnp.asarray(features(task, test)), activation, True)
        return Phi @ w.T, induction_scores(A1, A2, test, task.V)

    f, scores = jax.lax.map(jax.jit(one), (jnp.asarray(M1s), jnp.asarray(M2s)))
    f = np.asarray(f)
    per_draw = [induction_refs.compare_to_strategies(task, test, fk)["loss"] for fk in f]
    out = {k: np.asarray(v) for k, v in scores.items()}
    out["loss_draws"] = np.asarray(per_draw)
    out["predictive"] = induction_refs.compare_to_strategies(task, test, f.mean(axis=0))
    return out


def _induction_task(task):
    from bayes_attn.induction import InductionTask

    return InductionTask(task.L, task.V, task.tokens)


def _map_options(o: dict) -> dict:
    return {k: o[k] for k in _MAP}


def _point_problem(cfg, pt, task, hyper):
    """``(task, options, activation, seed, map_problem)`` of a sweep point of these kinds."""
    task = _induction_task(task)
    o = dict(cfg.options)
    act, seed = pt["activation"], int(pt["seed"])
    return task, o, act, seed, map_problem(task, hyper, int(pt["P"]), act, seed=seed,
                                           **_map_options(o))  # fmt: skip


# --------------------------------------------------------------------------------------------------
# induction_posterior


def check_posterior(cfg, options: dict) -> dict:
    """:func:`~bayes_attn.experiments.induction.check_induction`, then NUTS's options: a
    ``ValueError`` naming the first bad one."""
    options = check_induction(cfg, options)
    for name, low in (("num_chains", 1), ("num_warmup", 0), ("num_samples", 4),
                      ("num_predictive", 1)):  # fmt: skip
        options[name] = check_int(name, options[name], low)
    if options["metric"] not in ("laplace", "adapt"):
        raise ValueError(f"metric must be 'laplace' or 'adapt', got {options['metric']!r}")
    return options


def posterior_point(cfg, pt, task, hyper) -> dict:
    """One ``induction_posterior`` point: NUTS from the MAP, read on held-out sequences.

    Writes, for each order parameter s of :data:`~bayes_attn.induction.SCORES`: ``{s}_map`` (the
    MAP's), ``{s}_mean`` and ``{s}_sd`` (over the predictive draws, held out), ``{s}_rhat`` and
    ``{s}_ess`` (the
    training-set site over every draw); ``loss_predictive`` (the posterior-predictive mean's
    held-out loss), ``loss_draws`` (the draws' mean held-out loss) and ``loss_map``, beside
    ``loss_bigram``, ``loss_unigram``, ``loss_uniform`` and the predictive's ``kl_*``; NUTS's
    ``divergences``, ``nuts_acceptance``, ``leapfrogs`` and the point's ``seconds``. With linear
    attention every draw's scores (and the MAP's) are first folded onto copy1 >= 0 and
    induction2 >= 0 (:func:`~bayes_attn.induction.fold_linear_scores`: the posterior is even in
    each layer's sign, and a chain that crosses between the images would read as unmixed). In a sweep
    an interrupted point's NUTS goes on from its checkpoint (``run_nuts(checkpoint=)``), and
    ``seconds`` then counts this process's part; with the sweep's progress, NUTS announces its
    cost and shows its bar."""
    from bayes_attn.experiments.sweep import point_folder, point_progress
    from bayes_attn.inference.nuts import run_nuts

    t0 = time.perf_counter()
    task, o, act, seed, prob = _point_problem(cfg, pt, task, hyper)
    folder = point_folder()  # in a sweep: NUTS keeps its state there, so a point resumes
    C = o["num_chains"]
    laplace = o["metric"] == "laplace"
    init = None if laplace else {k: jnp.broadcast_to(v, (C, *v.shape)) if C > 1 else v
                                 for k, v in prob["map"].items()}  # fmt: skip
    idata = run_nuts(two_layer_kernel_model, model_args=(task, hyper, prob["tokens"], act),
                     model_kwargs={"block": BLOCK}, num_chains=C, num_warmup=o["num_warmup"],
                     num_samples=o["num_samples"],
                     seed=seed, progress=point_progress(), metric=o["metric"], init_params=init,
                     start=prob["map"] if laplace else None,
                     checkpoint=None if folder is None else folder / "nuts.npz")  # fmt: skip
    post, stats = az.dataset(idata), az.dataset(idata, "sample_stats")
    flat = {k: post[k].values.reshape(-1, *post[k].shape[2:]) for k in ("M1", "M2")}
    pick = np.unique(np.linspace(0, flat["M1"].shape[0] - 1, o["num_predictive"]).round())
    pick = pick.astype(int)
    pred = predictive(task, hyper, prob["tokens"], prob["test"], act, flat["M1"][pick],
                      flat["M2"][pick])  # fmt: skip
    at_map = predictive(task, hyper, prob["tokens"], prob["test"], act,
                        prob["map"]["M1"][None], prob["map"]["M2"][None])  # fmt: skip
    sites = {s: post[s].values for s in SCORES}
    if act == "linear":  # each draw in the image copy1 >= 0, induction2 >= 0
        pred, at_map, sites = (d | fold_linear_scores({s: d[s] for s in SCORES})
                               for d in (pred, at_map, sites))  # fmt: skip
    out = {}
    for s in SCORES:
        out |= {f"{s}_map": at_map[s][0], f"{s}_mean": pred[s].mean(), f"{s}_sd": pred[s].std(),
                f"{s}_rhat": az.rhat(sites[s]), f"{s}_ess": az.ess(sites[s])}  # fmt: skip
    cmp = pred["predictive"]
    out |= {"loss_predictive": cmp["loss"], "loss_draws": pred["loss_draws"].mean(),
            "loss_map": at_map["loss_draws"][0],
            **{k: cmp[k] for k in cmp if k.startswith(("loss_", "kl_"))},
            "divergences": float(np.sum(stats["diverging"].values)),
            "nuts_acceptance": float(np.mean(stats["acceptance_rate"].values)),
            "leapfrogs": float(np.mean(stats["n_steps"].values)),
            "seconds": time.perf_counter() - t0}  # fmt: skip
    return {k: ((), np.float64(v)) for k, v in out.items()}


# --------------------------------------------------------------------------------------------------
# induction_profile


def check_profile(cfg, options: dict) -> dict:
    """:func:`~bayes_attn.experiments.induction.check_induction`, ``cvs`` among the scalar
    sites of :data:`~bayes_attn.induction.SCORES`, the umbrella's options
    (:func:`~bayes_attn.inference.umbrella.umbrella_settings` names the bad one) and that the
    folder ``profiles`` can be written, before any work."""
    from bayes_attn.inference.umbrella import umbrella_settings

    options = check_induction(cfg, options)
    cvs = [options["cvs"]] if isinstance(options["cvs"], str) else list(options["cvs"])
    bad = [c for c in cvs if c not in SCORES]
    if bad or not cvs:
        raise ValueError(f"cvs must be sites among {SCORES}, got {options['cvs']!r}")
    options["cvs"] = cvs
    umbrella_settings(**_umbrella_options(options))
    check_output_folder("profiles", options["profiles"])
    centres = options["centres"]
    if not isinstance(centres, dict) or set(centres) - set(SCORES):  # a site not profiled: unused
        raise ValueError(
            f"centres must map sites among {SCORES} to window centres, got {centres!r}"
        )
    for cv, c in centres.items():
        check_centres(f"centres: {cv}'s", c)
    return options


def _umbrella_options(o: dict) -> dict:
    return {k: o[k] for k in ("num_warmup", "num_samples", "num_chains", "max_windows", "refine")}


def profile_point(cfg, pt, task, hyper) -> dict:
    """One ``induction_profile`` point: for each site of ``cvs`` (the ``cv`` dim), the umbrella
    profile of the kernel-limit posterior (windows from the modes of the MAP search's starts, or
    at the option ``centres``' values for that site, the kernel level's settings with the
    options' budget), read by
    :func:`~bayes_attn.analysis.free_energy.landscape_report`: ``delta_F`` (F_strong - F_weak)
    and its ``delta_F_se``, ``q_divide``, ``q_weak`` and ``q_strong`` (the outer minima),
    ``n_profile_minima``, ``barrier_weak``, ``barrier_strong``, ``min_overlap``, ``max_r_hat``,
    ``windows`` and the point's ``seconds``. In a sweep each site's finished windows are kept in
    the point's folder (:func:`~bayes_attn.experiments.sweep.point_folder`), so an interrupted
    point resumes; with the option ``profiles`` (a folder) each site's whole umbrella run is also
    written there, ``kernel_P{P}_{cv}_d{seed}.nc``, for the figures, and a site whose run is
    already there (the same arguments: ``run_umbrella``'s ``finished``) is read back, not run
    again, so a committed profile survives the loss of the point's folder."""
    from bayes_attn.analysis.free_energy import landscape_report
    from bayes_attn.experiments.landscape import write_landscape
    from bayes_attn.experiments.sweep import point_folder, point_progress
    from bayes_attn.inference.umbrella import UmbrellaSettings, run_umbrella

    t0 = time.perf_counter()
    task, o, act, seed, prob = _point_problem(cfg, pt, task, hyper)
    folder = point_folder()
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for cv in o["cvs"]:
        out = (
            Path(o["profiles"]) / f"kernel_P{pt['P']:g}_{cv}_d{seed}.nc" if o["profiles"] else None
        )
        idata = run_umbrella(two_layer_kernel_model, cv, seed=seed, starts=prob["starts"],
                             model_args=(task, hyper, prob["tokens"], act),
                             model_kwargs={"block": BLOCK},
                             settings=UmbrellaSettings.for_level("kernel"),
                             checkpoint=None if folder is None else folder / f"windows_{cv}.nc",
                             finished=out, centres=o["centres"].get(cv),
                             progress=point_progress(), **_umbrella_options(o))  # fmt: skip
        if out is not None:
            write_landscape(idata, out)
        prof = landscape_report(idata)
        q = prof.q_minimum.values
        rows.append({"delta_F": float(prof.delta_F), "delta_F_se": float(prof.delta_F_se),
                     "q_divide": float(prof.divide), "q_weak": q[0] if q.size else math.nan,
                     "q_strong": q[-1] if q.size > 1 else math.nan, "n_profile_minima": q.size,
                     "barrier_weak": float(prof.barrier_below),
                     "barrier_strong": float(prof.barrier_above),
                     "min_overlap": float(prof.min_overlap_next),
                     "max_r_hat": float(np.nanmax(prof.r_hat.values)),
                     "windows": prof.r_hat.size})  # fmt: skip
    out = {k: (("cv",), np.array([r[k] for r in rows], float)) for k in rows[0]}
    out["seconds"] = ((), np.float64(time.perf_counter() - t0))
    return out


def equal_weight_P(ds, cv: str = "copy1", **sel) -> float:
    """The P where ``delta_F`` (F_strong - F_weak) of ``cv`` crosses zero in a profile sweep
    ``ds`` (:func:`~bayes_attn.experiments.sweep.load_sweep`), linear in log P between the two
    grid points that bracket the first sign change (``sel`` picks the other dims, e.g.
    ``activation="softmax", seed=0``, leaving P); NaN where it does not change sign. The sites'
    order is the file's ``cvs`` attr."""
    cvs = [c.strip() for c in str(ds.attrs.get("cvs", "")).split(",") if c.strip()]
    if cv not in cvs:
        raise ValueError(f"cv must be one of the sweep's profiled sites {cvs}, got {cv!r}")
    da = ds["delta_F"].sel(**sel)
    if "cv" in da.dims:
        da = da.isel(cv=cvs.index(cv))
    return equal_weight_crossing(da["P"], da)


# --------------------------------------------------------------------------------------------------
# induction_llc


def two_layer_llc_target(task, hyper, tokens, activation: str, M_star: dict, w_star, *,
                         d_model: int, nbeta: float | None = None, gamma: float = 100.0,
                         include_prior: bool = False) -> LLCTarget:  # fmt: skip
    """The LLC's localized tempered target of the two-layer network with orthonormal frozen
    embeddings of width ``d_model`` (Gram I: its posterior is the kernel limit's exactly), over
    x = (M1, M2) flattened, the readout w (4n x V, ``w_star`` its value at w*) integrated out.

    As :func:`~bayes_attn.inference.llc_frozen.frozen_llc_target` for one layer (docs/theory.md,
    "The local learning coefficient at any width"): with the design Phi of
    :func:`~bayes_attn.models.two_layer.forward` on the positions with a target, G = Phi^T Phi,
    B = Phi^T y, a = n beta chi / (n sigma^2), Lambda = a G + c_w I and b = a B + (gamma / d) w*,

        log p(x) = -c_M/2 |x - m|^2 + 1/2 sum_v b_v^T Lambda^-1 b_v - (V/2) log det Lambda,

    c_M = gamma, c_w = gamma / d, m = x* (with the prior: c_M += chi / g_W, c_w += chi / g_O,
    m = gamma x* / c_M). ``loss`` is E[L_n | x], L_n per sequence; n = P."""
    d = check_int("d_model", d_model, 4 * task.n_features)
    tokens = jnp.asarray(tokens)
    P, V, n_f = int(tokens.shape[0]), task.V, task.n_features
    nbeta = default_nbeta(P) if not nbeta else check_positive("nbeta", nbeta)
    gamma = float(gamma)
    psi = jnp.asarray(features(task, tokens))
    y, rows = task.targets(tokens), np.asarray(task.target_mask)
    yy = jnp.sum(y[:, rows] ** 2)
    a = nbeta / P * hyper.chi / hyper.sigma2
    c_m = gamma + (hyper.chi / hyper.g_w if include_prior else 0.0)
    c_w = gamma / d + (hyper.chi / hyper.g_o if include_prior else 0.0)
    if c_m <= 0 or c_w <= 0:
        raise ValueError("gamma: 0 leaves the target improper unless include_prior=True")
    x_star = jnp.concatenate([jnp.ravel(M_star["M1"]), jnp.ravel(M_star["M2"])])
    w_st = jnp.asarray(w_star).T  # (4n, V)
    m_mean = gamma * x_star / c_m
    fit = hyper.chi / (2 * hyper.sigma2)
    const = (task.L - 1) * V / 2 * math.log(2 * math.pi * hyper.sigma2 / hyper.chi)
    k = n_f * n_f

    def mats(x):
        return x[:k].reshape(n_f, n_f), x[k:].reshape(2 * n_f, 2 * n_f)

    def design(x):  # (Phi^T Phi, Phi^T y) over blocks of sequences, the kernel model's own
        return design_products(*mats(x), psi, y, activation, True, rows=rows, block=BLOCK)

    def solve(x):
        G, B = design(x)
        chol = jax.scipy.linalg.cho_factor(a * G + c_w * jnp.eye(G.shape[0]), lower=True)
        b = a * B + gamma / d * w_st
        return G, B, chol, b, jax.scipy.linalg.cho_solve(chol, b)

    def log_density(x):
        _, _, chol, b, mu = solve(x)
        logdet = 2 * jnp.sum(jnp.log(jnp.diagonal(chol[0])))
        return -0.5 * c_m * jnp.sum((x - m_mean) ** 2) + 0.5 * jnp.sum(b * mu) - V / 2 * logdet

    def loss(x):
        G, B, chol, _, mu = solve(x)
        resid = yy - 2 * jnp.sum(B * mu) + jnp.sum(mu * (G @ mu))
        return fit * (resid + V * jnp.trace(jax.scipy.linalg.cho_solve(chol, G))) / P + const

    def sq_distance(x):
        _, _, chol, _, mu = solve(x)
        tr_inv = jnp.trace(jax.scipy.linalg.cho_solve(chol, jnp.eye(mu.shape[0])))
        return jnp.sum((x - x_star) ** 2) + (jnp.sum((mu - w_st) ** 2) + V * tr_inv) / d

    def order(x):
        _, A1, A2 = forward(*mats(x), psi, activation, True, ("h0",))
        s = induction_scores(A1, A2, tokens, V)
        return {"copy1": s["copy1"], "induction2": s["induction2"]}

    def loss_at(x, w):
        G, B = design(x)
        return fit * (yy - 2 * jnp.sum(B * w) + jnp.sum(w * (G @ w))) / P + const

    init_loss, (g_m, g_w) = jax.jit(jax.value_and_grad(loss_at, argnums=(0, 1)))(x_star, w_st)
    grad_norm = math.sqrt(float(jnp.sum(g_m**2)) + d * float(jnp.sum(g_w**2)))
    return LLCTarget(loss, lambda x, key: loss(x), log_density, lambda x, key: log_density(x),
                     x_star, P, float(nbeta), gamma, bool(include_prior), False, float(init_loss),
                     grad_norm, None, sq_distance, order)  # fmt: skip


def check_llc(cfg, options: dict) -> dict:
    """:func:`~bayes_attn.experiments.induction.check_induction`, then the LLC's options
    (:meth:`~bayes_attn.inference.llc_settings.LLCSettings.checked` checks the sampler's fields,
    ``gamma`` included, and names the bad one)."""
    from bayes_attn.inference.llc_settings import LLCSettings

    options = check_induction(cfg, options)
    if options["sampler"] not in ("sgld", "mala", "nuts"):
        raise ValueError(f"sampler must be 'sgld', 'mala' or 'nuts', got {options['sampler']!r}")
    options["d_model"] = check_int("d_model", options["d_model"], 1)
    if options["nbeta"] and not options["nbeta"] > 0:
        raise ValueError(f"nbeta must be > 0 (0: n / log n), got {options['nbeta']!r}")
    LLCSettings(sampler=options["sampler"], num_chains=options["num_chains"],
                num_draws=options["num_draws"], num_burnin=options["num_burnin"],
                step_size=options["step_size"], gamma=options["gamma"],
                metric=options["metric"]).checked()  # fmt: skip
    return options


def llc_point(cfg, pt, task, hyper) -> dict:
    """One ``induction_llc`` point: the LLC at the MAP (the readout at its posterior mean) on
    :func:`two_layer_llc_target`, by the sampler of the options (``nuts``: NUTS in the metric
    ``metric``, by default the dense Laplace one at the MAP with the step alone adapted over
    :data:`~bayes_attn.inference.llc_nuts.LAPLACE_WARMUP` steps; ``mala``: the exact full-batch
    Metropolis-adjusted Langevin, which barely moves on this stiff target: docs/validation.md,
    "The induction head: posterior, profiles and LLC"). Writes ``llc_mean``,
    ``llc_std`` (the chains' spread), ``llc_mcse``, ``llc_ess``, ``llc_rhat``, ``acceptance``,
    ``init_loss``, ``grad_norm``, ``nbeta``, ``llc_step`` (the Langevin step; NaN for NUTS),
    ``divergences`` (NUTS's; NaN for Langevin), ``copy1_map``, ``induction2_map`` (held out)
    and the point's ``seconds``. In a sweep an interrupted point's chains go on from their
    checkpoint in the point's folder (the LLC loops'
    :class:`~bayes_attn.inference.llc_checkpoint.Keeper`), and with the sweep's progress a bar
    counts its steps."""
    from bayes_attn.experiments.sweep import point_folder, point_progress
    from bayes_attn.inference import llc_checkpoint as ckpt
    from bayes_attn.inference.llc_langevin import run_langevin
    from bayes_attn.inference.llc_nuts import LAPLACE_WARMUP, run_nuts_chains
    from bayes_attn.inference.llc_settings import LLCSettings
    from bayes_attn.inference.llc_target import llc_schedule
    from bayes_attn.progress import bar

    t0 = time.perf_counter()
    task, o, act, seed, prob = _point_problem(cfg, pt, task, hyper)
    M = prob["map"]
    w = readout_mean(M["M1"], M["M2"], task, hyper, prob["tokens"], act)
    target = two_layer_llc_target(task, hyper, prob["tokens"], act, M, w, d_model=o["d_model"],
                                  nbeta=o["nbeta"], gamma=o["gamma"],
                                  include_prior=o["include_prior"])  # fmt: skip
    sampler, C = o["sampler"], o["num_chains"]
    eps, burnin = llc_schedule(target, sampler, o["step_size"], o["num_burnin"])
    laplace = sampler == "nuts" and o["metric"] == "laplace"
    burnin = LAPLACE_WARMUP if laplace and o["num_burnin"] == "auto" else burnin  # the step alone
    k_init, k_run = jax.random.split(jax.random.fold_in(run_key(None, seed), 4))
    noise = 1e-3 if sampler == "nuts" else math.sqrt(2 * eps)
    x0 = target.x_star + noise * jax.random.normal(k_init, (C, target.x_star.size))
    folder = point_folder()  # in a sweep: the chains' state kept there, so a point resumes
    keeper = ckpt.Keeper(None if folder is None else folder / f"llc_{sampler}.npz",
                         (sampler, target, x0, k_run, burnin, o["num_draws"], eps, o["metric"]))  # fmt: skip
    with bar(burnin + o["num_draws"], f"induction llc {sampler}", point_progress()) as b:
        if sampler == "nuts":
            loss, _, stats, _ = run_nuts_chains(target, x0, k_run, burnin, o["num_draws"], 1, b,
                                                keeper, metric=o["metric"])  # fmt: skip
            acc, div = stats["acceptance"], float(np.sum(stats["diverging"]))
        else:
            div = math.nan
            loss, _, acc = run_langevin(target, sampler, x0, jax.random.split(k_run, C), eps,
                                        LLCSettings.rmsprop, burnin, o["num_draws"], 1, b,
                                        keeper)  # fmt: skip
    keeper.done()
    llc = target.nbeta * (np.asarray(loss) - target.init_loss)  # (chains, draws)
    at_map = predictive(task, hyper, prob["tokens"], prob["test"], act, M["M1"][None],
                        M["M2"][None])  # fmt: skip
    out = {"llc_mean": llc.mean(), "llc_std": llc.mean(axis=1).std(), "llc_mcse": az.mcse(llc),
           "llc_ess": az.ess(llc), "llc_rhat": az.rhat(llc) if C > 1 else math.nan,
           "acceptance": np.mean(acc), "init_loss": target.init_loss,
           "grad_norm": target.grad_norm, "nbeta": target.nbeta,
           "llc_step": math.nan if sampler == "nuts" else eps, "divergences": div,
           "copy1_map": at_map["copy1"][0], "induction2_map": at_map["induction2"][0],
           "seconds": time.perf_counter() - t0}  # fmt: skip
    return {k: ((), np.float64(v)) for k, v in out.items()}
