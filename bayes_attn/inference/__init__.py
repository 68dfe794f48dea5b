"""Samplers over the package's NumPyro models, returning ArviZ InferenceData."""

from bayes_attn.distributed import initialize_distributed, process_share
from bayes_attn.inference.adam import (
    AdamKeys,
    adam_keys,
    early_stopping,
    merge_ensembles,
    train_adam,
)
from bayes_attn.inference.basins import basin_evidence
from bayes_attn.inference.convert import from_draws, from_mcmc
from bayes_attn.inference.llc import exact_frozen_llc, frozen_llc_target, llc_target, run_llc
from bayes_attn.inference.memory import estimate_bytes, members_per_group, memory_limit
from bayes_attn.inference.nuts import run_nuts
from bayes_attn.inference.potential import find_mode, flat_potential, split_log_density
from bayes_attn.inference.record import RunRecord
from bayes_attn.inference.sgld import SGLD, polynomial_decay, run_sgld
from bayes_attn.inference.sharding import member_mesh, sharded_map
from bayes_attn.inference.smc import run_smc
from bayes_attn.inference.umbrella import merge_umbrella, run_umbrella
from bayes_attn.io import merge_netcdf
from bayes_attn.keys import resolve_key

__all__ = [
    "AdamKeys",
    "SGLD",
    "adam_keys",
    "RunRecord",
    "basin_evidence",
    "early_stopping",
    "exact_frozen_llc",
    "frozen_llc_target",
    "llc_target",
    "run_llc",
    "merge_ensembles",
    "estimate_bytes",
    "find_mode",
    "flat_potential",
    "from_draws",
    "from_mcmc",
    "initialize_distributed",
    "member_mesh",
    "members_per_group",
    "memory_limit",
    "merge_netcdf",
    "polynomial_decay",
    "process_share",
    "resolve_key",
    "run_nuts",
    "run_sgld",
    "run_smc",
    "merge_umbrella",
    "run_umbrella",
    "sharded_map",
    "split_log_density",
    "train_adam",
]
