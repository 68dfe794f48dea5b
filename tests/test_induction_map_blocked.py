"""The induction MAP search's blocked potential (issue 43, part 5): the model's potential to
rounding, and the same modes as the search on the model's own potential."""

import json

import jax
import numpy as np
import pytest

from bayes_attn.experiments.induction import (
    START_SCALE,
    blocked_data,
    blocked_value_and_grad,
    circuit,
    frozen_gram,
    map_search,
)
from bayes_attn.induction import InductionTask
from bayes_attn.inference.potential import find_modes, flat_potential
from bayes_attn.models.two_layer import two_layer_kernel_model
from bayes_attn.task import Hyper
from bayes_attn.tokens import InContextMarkov

TASK = InductionTask(5, 2, InContextMarkov(1.0, start="uniform"))
HYPER = Hyper(chi=5.0, g_w=1.0, g_o=2.0, sigma2=3.0)
SCALES = (HYPER.chi, HYPER.g_w, HYPER.g_o, HYPER.sigma2)


@pytest.mark.parametrize(("activation", "frozen"), [("softmax", False), ("linear", True)])
def test_blocked_potential_is_the_models(activation, frozen):
    """Value and gradient equal the NumPyro model's potential to 1e-12 relative, with the last
    block padded (P = 23 in blocks of 5) and with whitened features (frozen embeddings)."""
    tokens = TASK.sample(jax.random.key(1), 23)
    gram = frozen_gram(jax.random.key(2), TASK, 16) if frozen else None
    pot = flat_potential(two_layer_kernel_model, (TASK, HYPER, tokens, activation, gram))
    x = pot.ravel(circuit(TASK, 1.0)) + 0.3 * jax.random.normal(jax.random.key(3), (pot.dim,))
    v0, g0 = jax.value_and_grad(pot.U)(x)
    data = blocked_data(TASK, tokens, gram, block=5)
    assert data["psi"].shape[:2] == (5, 5)
    v, g = blocked_value_and_grad(x, data, SCALES, activation=activation)
    assert abs(float(v - v0)) <= 1e-12 * abs(float(v0))
    np.testing.assert_allclose(g, g0, rtol=0, atol=1e-12 * float(np.max(np.abs(g0))))


def test_map_search_finds_the_modes_of_the_models_potential():
    """``map_search`` (blocked potential) against ``find_modes`` on the model's potential from
    the same starts: both converge, potentials within 1e-10 relative and positions within 1e-6
    (the optimiser's gradient tolerance is 1e-7); the kept start is the lower. A given
    ``value_and_grad`` with exact products is refused, naming ``hvp``."""
    s = map_search(TASK, HYPER, 30, "softmax", seed=2, num_test=50, maxiter=80)
    args = (TASK, HYPER, s["tokens"], "softmax", None)
    old = find_modes(two_layer_kernel_model, starts=list(s["starts"].values()), model_args=args,
                     maxiter=80, hvp="difference")  # fmt: skip
    for m, o in zip(s["modes"].values(), old, strict=True):
        assert m.converged and o.converged
        assert abs(m.U - o.U) <= 1e-10 * abs(o.U)
        np.testing.assert_allclose(m.x, o.x, atol=1e-6)
    assert s["modes"][s["won"]].U == min(m.U for m in s["modes"].values())
    n = TASK.n_features
    start = {"M1": START_SCALE * np.ones((n, n)), "M2": np.zeros((2 * n, 2 * n))}
    with pytest.raises(ValueError, match="hvp"):
        find_modes(two_layer_kernel_model, starts=[start], model_args=args,
                   value_and_grad=lambda x: (0.0, x))  # fmt: skip


def test_lbfgs_search_finds_the_trust_regions_modes():
    """``map_search(method="l-bfgs")`` (the ``induction`` sweep's search, stopped at the gradient
    of ``LBFGS_XTOL``, short of the float64 floor) against the trust-region search from the same
    starts: potentials within 1e-9 relative and positions within 1e-6 from each start, the same
    kept forms; an unknown ``method`` and a bad ``xtol`` are refused, naming them."""
    tk = map_search(TASK, HYPER, 30, "softmax", seed=2, num_test=50, maxiter=80)
    lb = map_search(TASK, HYPER, 30, "softmax", seed=2, num_test=50, maxiter=80, method="l-bfgs")
    for start in ("zero", "circuit"):
        a, b = lb["modes"][start], tk["modes"][start]
        assert a.converged
        assert abs(a.U - b.U) <= 1e-9 * abs(b.U)
        np.testing.assert_allclose(a.x, b.x, atol=1e-6)
    # both starts end in one mode here, so which is kept is decided by rounding: compare the kept
    np.testing.assert_allclose(lb["map"]["M2"], tk["map"]["M2"], atol=1e-6)
    with pytest.raises(ValueError, match="method"):
        map_search(TASK, HYPER, 30, "softmax", method="bfgs")
    with pytest.raises(ValueError, match="xtol"):
        map_search(TASK, HYPER, 30, "softmax", method="l-bfgs", xtol=-1.0)
    with pytest.raises(ValueError, match="weak_beta"):
        map_search(TASK, HYPER, 30, "softmax", weak_beta=-1.0)


def test_induction_kinds_name_their_search():
    """The kinds' search is the option ``method`` (``induction``: L-BFGS; ``induction_frozen``:
    the trust region), checked by name; a file's config written before the option existed reads
    back with the default, as the same sweep (so it resumes)."""
    from bayes_attn.experiments.kinds import kind_defaults
    from bayes_attn.experiments.sweep import SweepConfig

    assert kind_defaults("induction")["method"] == "l-bfgs"
    assert kind_defaults("induction_frozen")["method"] == "trust-krylov"
    table = {"kind": "induction", "P": [20], "L": [5], "V": [2], "activation": ["softmax"],
             "seed": [0], "tokens": "icl-markov:alpha=1,start=uniform",
             "options": {"num_test": 50, "maxiter": 40}}  # fmt: skip
    cfg = SweepConfig.from_dict(table)
    assert cfg.options["method"] == "l-bfgs"
    old = json.loads(cfg.to_json())
    del old["options"]["method"]  # as a file written before the option holds it
    assert SweepConfig.from_json(json.dumps(old)).same_grid(cfg)
    with pytest.raises(ValueError, match="method"):
        SweepConfig.from_dict({**table, "options": {"method": "bfgs"}})
    for bad in (-1.0, "strong", float("nan")):  # the third start's strength, named
        with pytest.raises(ValueError, match="weak_beta"):
            SweepConfig.from_dict({**table, "options": {"weak_beta": bad}})


@pytest.mark.parametrize(
    ("activation", "frozen", "readout"),
    [("softmax", False, ("h0", "h1", "h2")), ("linear", True, ("h1", "h2"))],
)
def test_the_models_blocked_design_is_its_whole_design(activation, frozen, readout):
    """``two_layer_kernel_model(block=b)``, what the posterior, profile and LLC kinds sample,
    against ``block=None``: value and gradient of the potential within 1e-12 relative (P = 23 in
    blocks of 5, the last padded), with and without the features' own stream in the readout; its
    deterministic sites are the same numbers."""
    tokens = TASK.sample(jax.random.key(4), 23)
    gram = frozen_gram(jax.random.key(2), TASK, 16) if frozen else None
    args = (TASK, HYPER, tokens, activation, gram)
    whole = flat_potential(two_layer_kernel_model, args, {"readout": readout})
    blocked = flat_potential(two_layer_kernel_model, args, {"readout": readout, "block": 5})
    x = whole.ravel(circuit(TASK, 1.0)) + 0.3 * jax.random.normal(jax.random.key(3), (whole.dim,))
    v0, g0 = jax.value_and_grad(whole.U)(x)
    v, g = jax.value_and_grad(blocked.U)(x)
    assert abs(float(v - v0)) <= 1e-12 * abs(float(v0))
    np.testing.assert_allclose(g, g0, rtol=0, atol=1e-12 * float(np.max(np.abs(g0))))
    a, b = whole.sites(x), blocked.sites(x)
    for name in ("copy1", "induction2", "induction2_excess"):
        np.testing.assert_array_equal(a[name], b[name])
