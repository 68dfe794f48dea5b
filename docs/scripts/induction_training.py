"""Numbers and figure for docs/validation.md "The induction head: networks and training": Adam
training curves of the two-layer induction network at fixed P, i.i.d. Dirichlet rows against
doubly-stochastic chains, and the plateau length in steps (mean and spread over the seeds). From the
file of ``bayes_attn/configs/induction_training.toml``:

    bayes-attn sweep --config bayes_attn/configs/induction_training.toml \
        --out out/induction_training.nc
    python docs/scripts/induction_training.py out/induction_training.nc

Prints the plateau table and writes docs/figures/induction/training.png (``--fig``). Only reads
the file.
"""

from _study import arguments, open_study, save

from bayes_attn.analysis.induction_tables import plateau_table
from bayes_attn.plotting.plots import induction_training


def main():
    ap = arguments(__doc__)
    ap.add_argument("path")
    ap.add_argument("--fig", default="docs/figures/induction/training.png")
    args = ap.parse_args()
    ds = open_study(args.path, keep=("seed",)).squeeze("activation")
    print(plateau_table(ds))
    save(induction_training(ds), args.fig, dpi=100)


if __name__ == "__main__":
    main()
