"""Does the reduction to order parameters close the two-layer kernel limit? The sweep kind
``induction_closure`` (bayes_attn/configs/induction_closure.toml).

At a grid point (activation, L, V, P, seed) :func:`closure_point` minimises the kernel limit's
exact potential (log-determinant included) over each family of the option ``families``
(:data:`FAMILIES`, the extended family of
:func:`~bayes_attn.theory.induction_action.induction_family`) on the study's own dataset (at
``P = N`` the family's action is the exact potential, up to one constant), and, with ``sym``, over
every token-symmetric form (:func:`~bayes_attn.experiments.induction_symmetry.symmetric_minimum`,
from the symmetrised MAP): the floor of any reduction to token-symmetric order parameters. Each
is reported beside the study's MAP potential
(:func:`~bayes_attn.experiments.induction_symmetry.study_map`: the ``maps`` file, else
recomputed).

References
----------
docs/theory.md §13, "The extended family: built, and checked against the MAP"; docs/validation.md,
"The induction head: the extended family".
"""

from __future__ import annotations

import time

import jax.numpy as jnp
import numpy as np

from bayes_attn._validation import check_bool, check_int
from bayes_attn.experiments.induction_symmetry import (
    check_study_map,
    off_symmetric,
    study_map,
    symmetric_minimum,
)

__all__ = [
    "CLOSURE_DEFAULTS",
    "FAMILIES",
    "check_closure",
    "closure_point",
    "dataset_reference",
    "embed",
]

#: the families of the check, by name: their components
#: (:data:`~bayes_attn.theory.induction_action.LAYER1_COMPONENTS`, ``LAYER2_COMPONENTS``), nested
FAMILIES = {
    "2": ("copy", "induction"),
    "line": ("copy_line", "match1", "induction"),
    "line+pos2": ("copy_line", "match1", "induction", "pos2"),
    "pos": ("pos1", "match1", "induction", "match2", "pos2"),
}


def dataset_reference(task, hyper, tokens):
    """The reference batch of :func:`~bayes_attn.theory.induction_action.induction_reference`
    made of the dataset ``tokens`` itself (so that at ``P = N`` the family's data term is the
    exact one)."""
    from bayes_attn import algebra
    from bayes_attn.theory import induction_action as ia

    y = task.targets(tokens)[:, np.asarray(task.target_mask)]
    ref = ia.induction_reference(task, hyper, num=1)
    return ref._replace(psi=algebra.features(tokens, task.V), y=y, tokens=tokens)


def embed(fam, M1, M2) -> np.ndarray:
    """The family's point whose forms are nearest (least squares) to (M1, M2)."""
    k1, k2 = fam.B1.shape[0], fam.B2.shape[0]
    B = np.block([[np.asarray(fam.B1).reshape(k1, -1), np.zeros((k1, np.size(M2)))],
                  [np.zeros((k2, np.size(M1))), np.asarray(fam.B2).reshape(k2, -1)]])  # fmt: skip
    target = np.concatenate([np.ravel(M1), np.ravel(M2)])
    return np.linalg.lstsq(B.T, target, rcond=None)[0]


#: the options of the ``induction_closure`` kind: the ``families`` (keys of :data:`FAMILIES`, in
#: order: each starts also from the previous one's optimum), ``sym`` (the token-symmetric floor,
#: ``sym_maxiter`` L-BFGS steps), ``maps`` the study's store_maps file (empty: recompute the MAP
#: by map_search, ``map_maxiter`` steps)
CLOSURE_DEFAULTS = {
    "families": ["2", "line", "line+pos2", "pos"],
    "sym": True,
    "sym_maxiter": 3000,
    "maps": "",
    "map_maxiter": 300,
}


def check_closure(cfg, options: dict) -> dict:
    """``families`` distinct keys of :data:`FAMILIES`, ``sym`` a boolean, integers
    ``sym_maxiter``, ``map_maxiter`` >= 1, ``maps`` a path or empty: a ``ValueError`` naming the
    first that is not."""
    from bayes_attn.experiments.induction import check_induction

    check_induction(cfg, {})
    fams = options.get("families", CLOSURE_DEFAULTS["families"])
    if isinstance(fams, str):
        fams = [f for f in fams.split(",") if f]
    bad = [f for f in fams if f not in FAMILIES]
    if not fams or bad or len(set(fams)) != len(fams):
        raise ValueError(f"families must list distinct names of {tuple(FAMILIES)}, got {fams!r}")
    options["families"] = list(fams)
    check_bool("sym", options.get("sym", True))
    if "sym_maxiter" in options:
        options["sym_maxiter"] = check_int("sym_maxiter", options["sym_maxiter"], 1)
    return check_study_map(options)


def closure_point(cfg, pt, task, hyper) -> dict:
    """One grid point of an ``induction_closure`` sweep: the exact potential minimised over each
    family (L-BFGS, gradient tolerance 1e-8, up to 2000 steps, from zero, the previous family's
    optimum and the MAP's least-squares projection; the lowest kept), its scores on the training
    set, and the token-symmetric floor, beside the study's MAP potential."""
    from bayes_attn.experiments.induction import blocked_data, blocked_potential, blocked_scales
    from bayes_attn.induction import InductionTask
    from bayes_attn.keys import dataset_key, run_key
    from bayes_attn.theory import induction_action as ia

    o = {**CLOSURE_DEFAULTS, **cfg.options}
    task = InductionTask(task.L, task.V, task.tokens)
    act, P, seed = pt["activation"], int(pt["P"]), int(pt["seed"])
    tokens = task.sample(dataset_key(run_key(None, seed)), P)
    ref = dataset_reference(task, hyper, tokens)
    data = blocked_data(task, tokens)
    scales = blocked_scales(hyper)
    study = study_map(task, hyper, act, P, seed, o["maps"], o["map_maxiter"])
    forms = (study["M1"], study["M2"])
    cols = {k: [] for k in ("U_family", "family_size", "family_starts", "copy1_family",
                            "excess_family", "family_seconds")}  # fmt: skip
    prev = None
    for name in o["families"]:
        t0 = time.perf_counter()
        fam = ia.induction_family(FAMILIES[name], task.L, task.V, act)
        starts = [np.zeros(fam.size)] + [embed(fam, *f) for f in (prev, forms) if f is not None]
        runs = [ia.family_minimum(fam, float(P), ref, x0, chi=hyper.chi) for x0 in starts]
        x, _ = min(runs, key=lambda r: r[1])
        M1, M2 = ia.family_forms(jnp.asarray(x), fam)
        prev = (np.asarray(M1), np.asarray(M2))
        sc = ia.family_scores(x, fam, ref)
        U = blocked_potential(jnp.concatenate([M1.ravel(), M2.ravel()]), data, scales, act)
        for k, v in zip(cols, (float(U), fam.size, len(starts), sc["copy1"],
                               sc["induction2_excess"], time.perf_counter() - t0), strict=True):  # fmt: skip
            cols[k].append(v)
    out = {k: (("family",), np.asarray(v, dtype=float)) for k, v in cols.items()}
    sym = {"U_start": np.nan, "U": np.nan, "grad_norm": np.nan, "steps": np.nan}
    if o["sym"]:
        sym = symmetric_minimum(task, hyper, tokens, act, forms, o["sym_maxiter"])
    off = off_symmetric(*forms, task.V)
    scalars = {"U_map": study["U"], "map_from_file": float(study["from_file"]),
               "U_sym_start": sym["U_start"], "U_sym": sym["U"],
               "sym_grad_norm": sym["grad_norm"], "sym_steps": sym["steps"],
               "off_symmetric1": off[0], "off_symmetric2": off[1]}  # fmt: skip
    out.update({k: ((), np.asarray(float(v))) for k, v in scalars.items()})
    return out
