#!/usr/bin/env python3
"""The GEMM providers side by side at the shapes the models run, alternating them for --rounds
rounds and keeping each one's best, with the register peak of the same run.

    python3 bench/gemm_providers.py [--threads 2] [--rounds 3] [--precision fp32|bf16|int8]
                                    [--out bench/results/gemm_providers_cpu.json]

fp32: `bioinfer bench matmul --provider onednn` and `--provider own` (the panel-packed own GEMM).
bf16 and int8 (CPUs with AMX): the own AMX GEMM and oneDNN's (BIOINFER_GEMM_AMX=0), both with
their whole linear (bf16: x rounded, fp32 out; int8: x quantized, the rescale), and for bf16
torch's `linear` in bf16 (its oneDNN) when torch imports, the LM shapes only.

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


LM_SHAPES = [s for s in SHAPES if not s[0].startswith("esmfold2")] + [
    ("esm2 650M FFN up, fold rows", 256, 1280, 5120),
    ("esmc 600M down, 8x256", 2048, 3072, 1152),
]


def bench(binary, args, env=None):
    out = subprocess.run([binary, "bench"] + args, check=True, capture_output=True, text=True,
                         env=env)
    return json.loads(out.stdout)


def torch_gflops(threads, m, k, n, precision):
    try:
        from lm_bench import torch_matmul
        return torch_matmul(threads, m, k, n, precision)["gflops"]
    except ImportError:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "int8"])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bioinfer"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "gemm_providers_cpu.json"))
    args = ap.parse_args()
    peak = bench(args.bin, ["peak", "--threads", str(args.threads), "--no-gemm"])
    dtype_peak = peak["best_register_peak"][args.precision]
    peak_value = dtype_peak["value"]
    fp32 = args.precision == "fp32"
    # provider -> (extra bench arguments, environment)
    providers = {"onednn": (["--provider", "onednn"], None), "own": (["--provider", "own"], None)}
    if not fp32:
        providers = {"onednn": ([], dict(os.environ, BIOINFER_GEMM_AMX="0")), "own": ([], None)}
    rows = []
    for label, m, k, n in SHAPES if fp32 else LM_SHAPES:
        best = {}
        for _ in range(args.rounds):
            for provider, (extra, env) in providers.items():
                r = bench(args.bin, ["matmul", "--m", str(m), "--k", str(k), "--n", str(n),
                                     "--threads", str(args.threads), "--precision", args.precision]
                          + extra, env)
                best[provider] = max(best.get(provider, 0.0), r["gflops"])
            if args.precision == "bf16":
                t = torch_gflops(args.threads, m, k, n, "bf16")
                if t:
                    best["torch"] = max(best.get("torch", 0.0), t)
        row = {"shape": label, "m": m, "k": k, "n": n,
               "gflops": best, "own_over_onednn": best["own"] / best["onednn"],
               "fraction_of_register_peak": {p: g / peak_value for p, g in best.items()}}
        rows.append(row)
        print(f"{label:40s} {m}x{k}x{n}: " + ", ".join(f"{p} {g:.0f}" for p, g in best.items())
              + f" G(FL)OP/s (own/oneDNN {row['own_over_onednn']:.2f}x, own at "
              f"{row['fraction_of_register_peak']['own']:.0%} of the {dtype_peak['kernel']} peak)",
              flush=True)
    write_json(args.out, {
        "bench": "gemm_providers",
        "command": "bench/gemm_providers.py " + " ".join(sys.argv[1:]),
        "machine": machine_info(args.threads),
        "bioinfer_machine": peak["machine"],
        "precision": args.precision,
        "register_peak": dtype_peak,
        "method": f"best of {args.rounds} alternating rounds of `bioinfer bench matmul` per provider"
                  + ("" if fp32 else "; own: the own AMX GEMM, onednn: BIOINFER_GEMM_AMX=0"),
        "rows": rows,
    })
    print("wrote", args.out)


if __name__ == "__main__":
    main()
