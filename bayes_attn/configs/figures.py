"""The paper's figures, one config function per figure (the big_vision / FermiNet pattern).

Each function takes ``quick`` and returns a plain dict:

- ``figure``: which figure it is: :mod:`bayes_attn.experiments.figures` computes its data and
  :mod:`bayes_attn.plotting.figures` draws it;
- ``sweeps``: name -> :class:`~bayes_attn.experiments.sweep.SweepConfig`, run resumably into
  ``<out>/<name>.nc``; figures that name the same sweep share it (their configs must agree);
- the theory grids and sampler settings the figure needs.

The protocol sweep of every figure comes from ``ProtocolConfig.paper()`` or, with ``quick``, from
``ProtocolConfig.quick()``, the one quick preset.

Reproduce everything (about 15 min on the 2-core CPU at Table 1, docs/figures/paper)::

    bayes-attn figures --out figures/

A quick look in a few minutes (what ``make demo`` runs)::

    mkdir -p out && bayes-attn figures --out out/figures --quick
"""

from bayes_attn.experiments.protocol import ProtocolConfig
from bayes_attn.experiments.sweep import protocol_sweep


def protocol(quick: bool = False):
    """The paper protocol (Table 1, our learning rates: ``ProtocolConfig.paper()``): Adam
    ensembles of width 256, then SGLD from Adam, both activations, against the Level-2 saddle and
    the Level-1 MAP on the first member's dataset.

    ``quick``: the quick preset, ``ProtocolConfig.quick()`` (four P values, three members of
    width 32, short SGLD).
    """
    return protocol_sweep(ProtocolConfig.quick() if quick else ProtocolConfig.paper())


def _theory_grid(quick: bool) -> dict:
    if quick:
        return dict(P=(1.0, 5e3, 60), L=tuple(range(4, 41, 4)), V=tuple(range(2, 11)))
    return dict(P=(1.0, 5e3, 240), L=tuple(range(3, 41)), V=tuple(range(2, 13)))


def _transition(activation: str, quick: bool) -> dict:
    """The transition figure of one activation (Figs. 3 and 4): the protocol sweep, the theory grid."""
    return dict(
        figure="transition",
        activation=activation,
        sweeps={"protocol": protocol(quick)},
        theory=_theory_grid(quick),
    )


def fig1(quick: bool = False) -> dict:
    """Fig. 1: attention patterns at P = 20, 100, 300, 800 for both activations (the trained
    networks above the theory), and the loss per token against P with the trained ensembles.

    Reproduce: ``bayes-attn figures --only fig1 [--quick]``
    """
    return dict(
        figure="attention_and_loss",
        sweeps={"protocol": protocol(quick)},
        theory=_theory_grid(quick),
        show_P=ProtocolConfig.quick().Ps,  # the quick grid is the four P values shown
    )


def fig3(quick: bool = False) -> dict:
    """Fig. 3 (linear attention): c1 and cG against P (Adam circles, SGLD diamonds, theory
    dashed), and the loss per token over (P, L) at V = 5 and over (P, V) at L = 25 with the
    second-order boundary and the crossover.

    Reproduce: ``bayes-attn figures --only fig3 [--quick]``
    """
    return _transition("linear", quick)


def fig4(quick: bool = False) -> dict:
    """Fig. 4 (softmax attention): aG against P, and the loss per token over (P, L) and (P, V)
    with the first-order boundary and the spinodals.

    Reproduce: ``bayes-attn figures --only fig4 [--quick]``
    """
    return _transition("softmax", quick)


def posterior(quick: bool = False) -> dict:
    """Beyond the paper: the posterior of the copy order parameter across each transition, on the
    reduced model. Linear: NUTS below P*, above it and at the crossover. Softmax: tempered SMC just
    below, at and just above the first-order P*, where both phases carry weight.

    Reproduce: ``bayes-attn figures --only posterior [--quick]``
    """
    return dict(
        figure="posterior",
        at={
            "linear": (("second_order", 0.5), ("second_order", 2.0), ("crossover", 1.0)),
            "softmax": (("first_order", 0.9967), ("first_order", 1.0), ("first_order", 1.0033)),
        },
        nuts=dict(
            num_chains=4, num_warmup=300 if quick else 1000, num_samples=300 if quick else 2000
        ),
        smc=dict(num_particles=250 if quick else 1000),  # per run; run_smc pools its 4 runs
    )


def phase_weights(quick: bool = False) -> dict:
    """Beyond the paper: the weight of the strong-copy softmax phase against P at the physical chi
    (exact quadrature and Laplace), with the equal-weight and equal-action P* marked.

    Reproduce: ``bayes-attn figures --only phase_weights [--quick]``
    """
    return dict(figure="phase_weights", span=0.02, num=61 if quick else 241)


FIGURES = {
    "fig1": fig1,
    "fig3": fig3,
    "fig4": fig4,
    "posterior": posterior,
    "phase_weights": phase_weights,
}
