"""Figure configs shrunk to seconds, for tests: every builder of bayes_attn/configs/figures.py, tiny settings."""

from bayes_attn.experiments.sweep import SweepConfig

PROTOCOL = SweepConfig(
    kind="protocol",
    P=(20, 100),
    options=dict(
        members=2,
        num_test=10,
        d_model=8,
        max_steps=50,
        chunk=50,
        sgld_warmup=5,
        sgld_samples=5,
        level1=False,
    ),
)
GRID = dict(P=(1.0, 2e4, 12), L=(25,), V=(5,))


def fig1(quick=False):
    return dict(
        figure="attention_and_loss", sweeps={"protocol": PROTOCOL}, theory=GRID, show_P=(20, 100)
    )


def fig3(quick=False):
    return dict(
        figure="transition", activation="linear", sweeps={"protocol": PROTOCOL}, theory=GRID
    )


def fig4(quick=False):
    return dict(
        figure="transition", activation="softmax", sweeps={"protocol": PROTOCOL}, theory=GRID
    )


def posterior(quick=False):
    return dict(
        figure="posterior",
        at={"linear": (("second_order", 2.0),), "softmax": (("first_order", 1.0),)},
        nuts=dict(num_chains=2, num_warmup=50, num_samples=50),
        smc=dict(num_particles=200),
    )


def phase_weights(quick=False):
    return dict(figure="phase_weights", span=0.01, num=9)


FIGURES = {
    "fig1": fig1,
    "fig3": fig3,
    "fig4": fig4,
    "posterior": posterior,
    "phase_weights": phase_weights,
}
