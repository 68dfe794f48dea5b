"""The evidence of one basin of a multimodal posterior: its mode, Laplace mass and SMC mass.

At a first-order transition the posterior has one basin per phase, separated by a barrier that
grows with chi. The free-energy difference between the phases is the log ratio of the basin masses,
``Delta F = log Z_weak - log Z_strong``. :func:`run_smc` from the prior finds both basins only when
the reference spreads particles over both (the 1-D and 2-D reduced models); from the Normal prior of
the kernel-limit model no particle ever lands in the strong-copy basin (its copy logit is ~20 prior
standard deviations out). :func:`basin_evidence` therefore measures each basin on its own:

1. **Mode.** Minimise NumPyro's potential ``U(u)`` (minus the log joint in unconstrained space,
   Jacobians included) from a start inside the basin, by the NumPyro bridge's trust-region Newton
   descent (:func:`bayes_attn.inference.potential.find_mode`, float64).
2. **Laplace.** ``H = hess U`` at the mode ``u*`` (dense, by Hessian-vector products,
   :func:`bayes_attn.inference.potential.hessian`);
   ``log Z_laplace = -U(u*) + (k/2) log 2 pi - (1/2) log det H``.
3. **SMC from the Laplace Gaussian.** Whiten, ``u = u* + C z`` with ``C C^T = Sigma``, and run the
   adaptive tempered SMC of :func:`run_smc` on the model

   ``z ~ N(0, I_k)``, ``factor(-U(u* + C z) + |z|^2 / 2)`` (and ``-inf`` outside the basin),

   whose tempering path runs from the Gaussian N(u*, Sigma) (lambda = 0) to the posterior
   restricted to the basin (lambda = 1), and whose evidence is the basin's mass divided by
   ``(2 pi)^(k/2) |det C|``; so ``log Z_smc = log Z_wrapper + (k/2) log 2 pi + log |det C|``.
   The basin is one side of a phase boundary in a scalar site (``var``, ``boundary``, ``side``),
   as in the exact Level-2 basin masses, which split at the density minimum between the modes.
   ``Sigma`` is the Laplace covariance ``H^-1``, narrowed along ``var`` (a rank-one update) to a
   standard deviation of a quarter of the mode's distance to the boundary: near a spinodal the
   basin is shallow along the order parameter and the plain Laplace Gaussian reaches over the
   boundary (measured at Level 1: every particle of an unrestricted run from the strong mode
   ended in the weak phase). When the reference is exact the increments are all 1 and SMC needs
   a single step; the number of tempering steps measures how far the basin is from Gaussian.

Independent replicates (``replicates``: the ``num_runs`` of one :func:`run_smc` call, vectorised)
give the Monte Carlo spread of log Z_smc; they are combined as :func:`run_smc` combines its runs
(:func:`bayes_attn.inference.smc_evidence.log_evidence`: the log of the mean Z, and the standard
error from the replicates' spread). The phase variable of step 3 is the bridge's
:meth:`~bayes_attn.inference.potential.Potential.scalar_site`. With ``checkpoint=`` the SMC run
writes its state after every tempering step and resumes from it when rerun with the same arguments
(the mode and the Hessian are recomputed: they are deterministic).

References
----------
Del Moral, Doucet & Jasra (2006); Neal (2001), annealed importance sampling; for Laplace-referenced
per-mode evidence, e.g. Lee, Doucet et al. (2016) on mode-restricted SMC. docs/validation.md,
"Free energy of the phases beyond Level 2".
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from bayes_attn._deprecation import renamed
from bayes_attn._validation import check_int
from bayes_attn.inference import potential, smc_evidence
from bayes_attn.inference._call import model_call
from bayes_attn.inference.smc import run_smc
from bayes_attn.keys import resolve_key

__all__ = ["BasinEvidence", "NoBasin", "basin_evidence", "find_mode"]


class NoBasin(ValueError):
    """The descent from the start ended on the other side of the boundary: no basin there.

    ``value`` is the phase variable at the mode that was reached.
    """

    def __init__(self, message: str, value: float):
        super().__init__(message)
        self.value = value


@dataclasses.dataclass(frozen=True)
class BasinEvidence:
    """The result of :func:`basin_evidence` for one basin.

    Attributes
    ----------
    mode : dict
        Constrained values of every site (latent and deterministic) at the mode.
    potential : float
        ``U`` at the mode (minus the log joint in unconstrained space).
    log_Z_laplace : float
    log_Z_smc : numpy.ndarray
        One estimate per replicate.
    log_Z_smc_mean, log_Z_smc_se : float
        ``log`` of the mean of ``Z`` over replicates (the unbiased combination) and the standard
        error of ``log Z`` from the replicates' spread (nan for one replicate).
    num_tempering_steps : numpy.ndarray
        Per replicate; 1 would mean the Laplace Gaussian is exact.
    distance : float
        How far the mode lies from the boundary in the phase variable (nan without one).
    dim : int
        Unconstrained dimension k.
    converged : bool
        Whether the descent to the mode met its gradient tolerance.
    """

    mode: dict
    potential: float
    log_Z_laplace: float
    log_Z_smc: np.ndarray
    log_Z_smc_mean: float
    log_Z_smc_se: float
    num_tempering_steps: np.ndarray
    distance: float
    dim: int
    converged: bool


def find_mode(
    model, *model_args, start: dict, radius: float = 0.1, maxiter: int = 2000, **model_kwargs
):
    """Deprecated: :func:`bayes_attn.inference.potential.find_mode`, which returns a ``Mode``.

    Returns the old tuple ``(u_flat, U_value, unravel, U, converged)``.
    """
    warnings.warn(
        "bayes_attn.inference.basins.find_mode is deprecated: use "
        "bayes_attn.inference.potential.find_mode(model, start=..., model_args=..., "
        "model_kwargs=...), which returns a Mode",
        DeprecationWarning,
        stacklevel=2,
    )
    m = potential.find_mode(
        model, start=start, model_args=model_args, model_kwargs=model_kwargs, radius=radius,
        maxiter=maxiter,
    )  # fmt: skip
    return m.x, m.U, m.potential.unravel, m.potential.U, m.converged


def _whitened_model(U, phase_var, u_star, C, boundary, side):
    """z ~ N(0, I); factor = log joint at u* + C z, plus |z|^2 / 2, and -inf outside the basin."""
    sign = 1.0 if side == "above" else -1.0

    def model():
        z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand((u_star.shape[0],)).to_event(1))
        u = u_star + C @ z
        log_w = -U(u) + 0.5 * jnp.sum(z**2)
        if phase_var is not None:
            inside = sign * (phase_var(u) - boundary) > 0
            log_w = jnp.where(inside, log_w, -jnp.inf)
        numpyro.factor("basin", log_w)

    return model


def _reference(H, grad_var, distance):
    """Laplace covariance H^-1, narrowed along the phase variable to sd = distance / 4.

    Near a spinodal the basin is shallow along the order parameter and the Laplace Gaussian
    reaches over the boundary; a rank-one update shrinks only that direction, so nearly every
    reference draw starts inside the basin and the rest of the Gaussian is kept.
    """
    Sigma = np.linalg.inv(H)
    Sigma = 0.5 * (Sigma + Sigma.T)
    if grad_var is None:
        return Sigma
    v = Sigma @ grad_var
    var = float(grad_var @ v)
    target = (distance / 4.0) ** 2
    if var > target:
        Sigma = Sigma - (1.0 - target / var) * np.outer(v, v) / var
    return Sigma


class _Side(NamedTuple):
    """The basin's side of the phase boundary at the mode (all None / nan without a boundary)."""

    phase_var: Callable | None  # q(x): the phase variable at flat unconstrained x
    grad: np.ndarray | None  # its gradient at the mode
    distance: float  # how far the mode lies from the boundary, on the basin's side (> 0)


def _check_basin(replicates, var, boundary, side) -> int:
    replicates = check_int("replicates", replicates, 1)
    if side not in (None, "above", "below"):
        raise ValueError(f"side must be 'above' or 'below', got {side!r}")
    if (var is None) != (boundary is None) or (boundary is not None and side is None):
        raise ValueError("var, boundary and side must be given together")
    return replicates


def _laplace(mode: potential.Mode) -> tuple[np.ndarray, float]:
    """``(H, log Z_laplace)``: the potential's Hessian at the mode and the Laplace mass."""
    H = potential.hessian(mode.potential.U, mode.x)
    evals = np.linalg.eigvalsh(H)
    if evals[0] <= 0:
        raise ValueError(
            f"start: the Hessian at the mode is not positive definite (smallest eigenvalue "
            f"{evals[0]:.3g}); the basin is not a proper mode"
        )
    k = mode.x.size
    return H, -mode.U + 0.5 * k * math.log(2 * math.pi) - 0.5 * float(np.sum(np.log(evals)))


def _side(mode: potential.Mode, var, boundary, side) -> _Side:
    """The phase variable ``var`` at the mode, checked to be on ``side`` of ``boundary``."""
    if var is None:
        return _Side(None, None, math.nan)
    phase_var = mode.potential.scalar_site(var)
    x = jnp.asarray(mode.x)
    value = float(phase_var(x))
    distance = (value - boundary) * (1.0 if side == "above" else -1.0)
    if distance <= 0:
        raise NoBasin(
            f"start: its mode has {var} = {value:.4g}, on the wrong side of the boundary "
            f"{boundary:.4g} (the basin there does not exist)",
            value,
        )
    return _Side(phase_var, np.asarray(jax.grad(phase_var)(x), dtype=np.float64), distance)


def _smc_mass(mode: potential.Mode, H, basin: _Side, boundary, side, **smc) -> tuple:
    """``(log Z_smc per replicate, tempering steps per replicate)``: :func:`run_smc` on the
    whitened, restricted model (module docstring, step 3); ``smc``: its options."""
    Sigma = _reference(H, basin.grad, basin.distance)
    C = np.linalg.cholesky(Sigma)
    log_det_C = float(np.sum(np.log(np.diag(C))))
    x = jnp.asarray(mode.x)
    wrapped = _whitened_model(mode.potential.U, basin.phase_var, x, jnp.asarray(C), boundary, side)
    a = run_smc(wrapped, model_args=(), **smc).posterior.attrs
    offset = 0.5 * mode.x.size * math.log(2 * math.pi) + log_det_C
    log_Z = np.atleast_1d(np.asarray(a["log_evidence_runs"], dtype=np.float64)) + offset
    return log_Z, np.atleast_1d(np.asarray(a["num_tempering_steps"]))


def basin_evidence(
    model,
    *args,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    start: dict,
    num_particles: int = 256,
    num_mcmc_steps: int | None = None,
    replicates: int = 2,
    max_mcmc_steps: int | None = None,
    mixing_target: float | None = None,
    seed: int | None = None,
    key=None,
    var: str | None = None,
    boundary: float | None = None,
    side: str | None = None,
    batch_size: int = 0,
    progress: bool = False,
    checkpoint=None,
    progress_bar: bool | None = None,
    **kwargs,
) -> BasinEvidence:
    """Mode, Laplace mass and SMC mass of the basin of ``model``'s posterior that contains ``start``.

    Parameters
    ----------
    model : callable
        A NumPyro model with a finite density (``kernel_limit_model``, ``order_param_model``,
        ``network_model``).
    model_args, model_kwargs : tuple, dict
        The model's arguments, apart from this function's options. The old form,
        ``basin_evidence(model, *model_args, start=..., **model_kwargs)``, still works for one
        release and warns (``DeprecationWarning``).
    start : dict
        Constrained values of every latent site, inside the basin.
    num_particles : int
        Particles per SMC run (HMC moves above 10 dimensions, RWM below).
    num_mcmc_steps, max_mcmc_steps, mixing_target : optional
        The adaptive moves of :func:`run_smc` (its defaults where None): at least
        ``num_mcmc_steps`` and at most ``max_mcmc_steps`` moves per tempering step, until the
        particles' correlation with their start falls below ``mixing_target``.
    replicates : int
        Independent SMC runs (``num_runs`` of one :func:`run_smc` call).
    seed, key : int or jax PRNG key
        Either (seed 0 when neither is given), as for :func:`run_smc`.
    var, boundary, side : optional
        A scalar site (latent or deterministic), the value that separates the phases, and the side
        of the basin ("above" or "below"). With them the basin *is* that side: the SMC target is
        zero beyond the boundary (as the exact basin masses of
        :func:`bayes_attn.theory.modes` split at the density minimum), and the reference is
        narrowed along ``var`` so that it starts inside. Without them the basin is wherever the
        particles go from the Laplace Gaussian, which is only safe far from a spinodal.
    batch_size : int
        SMC particles per ``lax.map`` batch (0: one vmap); not the model's minibatch.
    progress : bool
        :func:`run_smc`'s progress: its cost, a bar over lambda, the rejuvenation
        (``progress_bar``, its old name, is deprecated).
    checkpoint : str or path, optional
        :func:`run_smc`'s checkpoint file: the SMC run writes its state there after every
        tempering step and resumes from it when rerun with the same arguments (the mode and the
        Hessian are recomputed, deterministically); removed when the run completes.

    Returns
    -------
    BasinEvidence
    """
    progress = renamed("progress_bar", progress_bar, "progress", progress)
    model_args, model_kwargs = model_call("basin_evidence", args, kwargs, model_args, model_kwargs)
    rng, _, _ = resolve_key(key, seed)
    replicates = _check_basin(replicates, var, boundary, side)
    mode = potential.find_mode(model, start=start, model_args=model_args, model_kwargs=model_kwargs)
    H, log_Z_laplace = _laplace(mode)
    basin = _side(mode, var, boundary, side)
    moves = {
        name: v
        for name, v in (
            ("num_mcmc_steps", num_mcmc_steps),
            ("max_mcmc_steps", max_mcmc_steps),
            ("mixing_target", mixing_target),
        )
        if v is not None
    }
    log_Z, steps = _smc_mass(
        mode, H, basin, boundary, side, num_particles=num_particles, num_runs=replicates,
        key=rng, batch_size=batch_size, progress=progress, checkpoint=checkpoint, **moves,
    )  # fmt: skip
    mean, se = smc_evidence.log_evidence(log_Z)
    return BasinEvidence(
        mode=mode.sites(),
        potential=mode.U,
        log_Z_laplace=float(log_Z_laplace),
        log_Z_smc=log_Z,
        log_Z_smc_mean=mean,
        log_Z_smc_se=se,
        num_tempering_steps=steps,
        distance=float(basin.distance),
        dim=int(mode.x.size),
        converged=mode.converged,
    )
