"""Numbers and figure for docs/validation.md "The induction head: networks and training": Adam
training curves of the two-layer induction network at fixed P, i.i.d. Dirichlet rows against
doubly-stochastic chains, and the plateau length in steps (mean and spread over the seeds). From the
file of ``bayes_attn/configs/induction_training.toml``:

    bayes-attn sweep --config bayes_attn/configs/induction_training.toml \
        --out out/induction_training.nc
    python docs/scripts/induction_training.py out/induction_training.nc

Prints the plateau table and writes docs/figures/induction/training.png (``--fig``). A file with
the LLC along training (``llc_every``: ``bayes_attn/configs/induction_training_llc.toml``) also
gets the table of λ̂(t) ± MCSE at every snapshot, and its figure is λ̂(t) beside the held-out loss
and both layers' scores (``--fig docs/figures/induction/training_llc.png``). Only reads the file.
"""

import numpy as np
from _study import arguments, open_study, save, setting

from bayes_attn.analysis.induction_tables import plateau_table, training_llc_table
from bayes_attn.plotting.plots import induction_training, induction_training_llc


def source_flags(ds):
    """``ds`` with its doubly_stochastic axis labelled 0/1 by the flags: a sweep writes the flags
    (True/False) as its coordinate; files before 2026-12-07 hold the index into the option's
    list there, labelled by the option's flags."""
    flags = ds.doubly_stochastic.values
    if flags.dtype != bool:
        flags = setting(ds, "doubly_stochastic", list(flags))
    return ds.assign_coords(doubly_stochastic=np.asarray(flags, dtype=int))


if __name__ == "__main__":
    ap = arguments(__doc__)
    ap.add_argument("path")
    ap.add_argument("--fig", default="docs/figures/induction/training.png")
    args = ap.parse_args()
    ds = source_flags(open_study(args.path, keep=("seed",)).squeeze("activation"))
    print(plateau_table(ds))
    if "llc" in ds:
        print(training_llc_table(ds))
    save((induction_training_llc if "llc" in ds else induction_training)(ds), args.fig, dpi=100)
