"""Benchmark: the paper's whole protocol (both activations, 14 values of P, 10 members, Adam then
SGLD, plus the Level-2 saddle and the Level-1 MAP) at one width, with the time per stage.

The issue's budget: at most 30 minutes at d_model = 256 on the 2-core CPU. The paper needed about
100 H100-hours at d_model = 10,000 (for the GPU run see ``benchmarks/gpu_protocol.py``).

Run: ``.venv/bin/python benchmarks/bench_protocol.py [--d 256] [--out out/protocol_d256.nc]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from bayes_attn.experiments.protocol import ProtocolConfig, run_protocol


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, help="d_model (default: the config's, 256 for the paper)")
    parser.add_argument("--config", help="a TOML file with a [protocol] table")
    parser.add_argument("--quick", action="store_true", help="the quick variant")
    parser.add_argument("--no-level1", action="store_true", help="skip the Level-1 MAP")
    parser.add_argument("--out", help="write the results to this NetCDF file")
    args = parser.parse_args(argv)
    if args.config:
        cfg = ProtocolConfig.from_toml(args.config)
    else:
        cfg = ProtocolConfig.quick() if args.quick else ProtocolConfig.paper()
    cfg = dataclasses.replace(
        cfg, d_model=args.d or cfg.d_model, level1=cfg.level1 and not args.no_level1
    )
    t0 = time.perf_counter()
    ds, seconds = run_protocol(cfg)
    total = time.perf_counter() - t0
    print(
        f"protocol d_model={cfg.d_model}: {len(cfg.activations)} activations x {len(cfg.Ps)} P x "
        f"{cfg.members} members, Adam <= {cfg.adam.max_steps} steps, SGLD "
        f"{cfg.sgld_warmup}+{cfg.sgld_samples * cfg.sgld_thinning} steps"
    )
    for stage, s in seconds.items():
        print(f"  {stage:7s} {s:8.1f} s")
    print(f"  total   {total:8.1f} s ({total / 60:.1f} min)")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        ds.to_netcdf(args.out, engine="h5netcdf")
        print(f"  wrote {args.out}")
    return ds, seconds


if __name__ == "__main__":
    main()
