#!/usr/bin/env python3
"""The fp32 GEMM providers side by side: `bioinfer bench matmul --provider onednn` and
`--provider own` (the panel-packed own GEMM) at the shapes the models run, alternating the two
for --rounds rounds and keeping each one's best, with the register peak of the same run.

    python3 bench/gemm_providers.py [--threads 2] [--rounds 3] [--out bench/results/gemm_providers_cpu.json]

Shapes (M x K x N): ESMFold2's trunk at 64 residues (4096 pairs: the triangle projections and
gates, the transition's gate/up and down) and ESM-2 650M / ESM C 600M at 8x256 tokens (the FFN
and attention projections). The tuned table picks between the two per weight shape; this shows
why it picks what it does on the machine at hand.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lm_bench import machine_info, write_json  # noqa: E402

SHAPES = [  # (label, M, K, N)
    ("esmfold2 trimul a|b and gates, 64 res", 4096, 256, 1024),
    ("esmfold2 trimul out / gate, 64 res", 4096, 256, 256),
    ("esmfold2 transition gate|up, 64 res", 4096, 256, 2048),
    ("esmfold2 transition down, 64 res", 4096, 1024, 256),
    ("esm2 650M FFN up, 8x256", 2048, 1280, 5120),
    ("esm2 650M FFN down, 8x256", 2048, 5120, 1280),
    ("esmc 600M gate|up, 8x256", 2048, 1152, 6144),
    ("esmc 600M qkv, 8x256", 2048, 1152, 3456),
]


def bench(binary, args):
    out = subprocess.run([binary, "bench"] + args, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bioinfer"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "gemm_providers_cpu.json"))
    args = ap.parse_args()
    peak = bench(args.bin, ["peak", "--threads", str(args.threads), "--no-gemm"])
    fp32_peak = peak["best_register_peak"]["fp32"]["value"]
    rows = []
    for label, m, k, n in SHAPES:
        best = {}
        for _ in range(args.rounds):
            for provider in ("onednn", "own"):
                r = bench(args.bin, ["matmul", "--m", str(m), "--k", str(k), "--n", str(n),
                                     "--threads", str(args.threads), "--provider", provider])
                best[provider] = max(best.get(provider, 0.0), r["gflops"])
        row = {"shape": label, "m": m, "k": k, "n": n,
               "gflops": best, "own_over_onednn": best["own"] / best["onednn"],
               "fraction_of_register_peak": {p: g / fp32_peak for p, g in best.items()}}
        rows.append(row)
        print(f"{label:40s} {m}x{k}x{n}: oneDNN {best['onednn']:.0f}, own {best['own']:.0f} GFLOP/s "
              f"({row['own_over_onednn']:.2f}x)", flush=True)
    write_json(args.out, {
        "bench": "gemm_providers",
        "command": "bench/gemm_providers.py " + " ".join(sys.argv[1:]),
        "machine": machine_info(args.threads),
        "bioinfer_machine": peak["machine"],
        "fp32_register_peak_gflops": fp32_peak,
        "method": f"best of {args.rounds} alternating rounds of `bioinfer bench matmul` per provider",
        "rows": rows,
    })
    print("wrote", args.out)


if __name__ == "__main__":
    main()
