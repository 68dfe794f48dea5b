"""Numbers and the figure of docs/validation.md "Structured tokens: where P* moves", from the files
of the ``tokens`` sweeps (bayes_attn.experiments.tokens_study; it only reads them): P* per source
(``measure = "pstar"``: ``tokens_zipf.toml``, ``tokens_markov.toml``, and the same with
``--option gram_width=10000``) and the Level-1 MAP's linear crossover (``"crossover"``,
``tokens_crossover.toml``) tabulated beside Level 2 and drawn in
``docs/figures/tokens/pstar_tokens.png``; the in-weights competitor per P (``"competitor"``,
``tokens_competitor.toml``) tabulated (bayes_attn.analysis.tokens_tables).

    bayes-attn sweep --config bayes_attn/configs/tokens_zipf.toml --out docs/figures/tokens/tokens_zipf.nc
    bayes-attn sweep --config bayes_attn/configs/tokens_markov.toml --out docs/figures/tokens/tokens_markov.nc
    bayes-attn sweep --config bayes_attn/configs/tokens_competitor.toml --out docs/figures/tokens/tokens_competitor.nc
    python docs/scripts/tokens_study.py docs/figures/tokens/tokens_*.nc --level2 [--figure=PATH]

``--level2`` adds Level 2 where it holds (bayes_attn.experiments.tokens_results.level2_pstar: both
transitions and the linear crossover of the i.i.d. sources, the linear point of the chains; a few
minutes), ``--level2-chains`` the chains' softmax point and linear crossover too (minutes per chain).
"""

import sys
from pathlib import Path

import xarray as xr
from _study import preset, pyplot, save

from bayes_attn.analysis.tokens_tables import competitor_table, pstar_table
from bayes_attn.experiments.tokens_results import (
    level2_files,
    level2_uniform,
    merge_tokens,
    read_tokens,
)
from bayes_attn.plotting.plots import tokens_pstar

FIGURE = Path(__file__).parents[1] / "figures" / "tokens" / "pstar_tokens.png"

if __name__ == "__main__":
    pstar, other, out, flags = [], [], FIGURE, set()
    for arg in sys.argv[1:]:
        if arg.startswith("--figure="):  # elsewhere than docs/figures/tokens (the tests)
            out = Path(arg.split("=", 1)[1])
        elif arg in ("--level2", "--level2-chains"):  # compute Level 2 where it holds (minutes)
            flags.add(arg)
        else:
            ds = read_tokens(arg)
            if ds.attrs["measure"] == "competitor":
                other.append(ds)
            elif "pstar" in ds:
                pstar.append(ds)
            else:  # a sweep still running, none of its points done yet
                print(f"{arg}: no finished point yet, left out", file=sys.stderr)
    pstar = merge_tokens(pstar)  # a study split over files (per alpha, per dataset) as one
    if pstar:
        l2s = level2_files(pstar, "--level2-chains" in flags) if flags else {}
        ref = level2_uniform(pstar[0])
        print(pstar_table(pstar, ref, l2s))
        pyplot()
        save(tokens_pstar(pstar, ref, *preset(pstar[0]), l2s), out, dpi=130)
    for ds in other:
        print(competitor_table(ds))
    if not pstar and not other:
        print(xr.Dataset())
