#!/usr/bin/env python3
"""The largest language models on one machine: ESM-2 15B in int8 and ESM C 6B with its weights
kept in bf16, embedded by bioinfer with random weights at the released shapes, with peak memory.

    .venv-reference/bin/python bench/lm_large_bench.py [--models esm2_15B:int8,esmc_6B:bf16]
        [--threads 2] [--workdir DIR] [--out bench/results/lm_large_cpu.json]

Each checkpoint is written once to --workdir in transformers' layout with every weight in bf16
(as the released 15B and 6B checkpoints are stored), tensor by tensor, so it never exists whole
in memory (about 30 GB for 15B, 12 GB for 6B). bioinfer then runs `bench embed` on two random
sequences of 128 residues (a warm-up pass, one timed pass) at the given precision: int8
quantizes each weight at load from its bf16 storage; bf16 keeps the bf16 weights as they are
(on CPUs without a bf16 GEMM they are widened block by block inside the fp32 GEMM). The whole
process runs under /usr/bin/time for its wall time and peak RSS. There is no reference side:
transformers' fp32 copy of either model does not fit a 24 GiB machine.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from esmfold2_bench import write_safetensors  # noqa: E402
from lm_bench import hf_model, machine_info, write_esm2_vocab, write_json  # noqa: E402

MODELS = {  # arch, layers, hidden, heads, intermediate
    "esm2_15B": ("esm2", 48, 5120, 40, 20480),
    "esmc_6B": ("esmc", 80, 2560, 40, 6912),
}


def make_checkpoint(name, out, seed=0):
    """Random bf16 weights (normal, std 0.02; norms at 1 and 0) in transformers' layout."""
    import torch
    if os.path.exists(os.path.join(out, "model.safetensors")):
        return
    os.makedirs(out, exist_ok=True)
    cls, cfg = hf_model(*MODELS[name])
    with torch.device("meta"):
        meta = cls(cfg)
    norms = {f"{mn}.{pn}" for mn, m in meta.named_modules()
             if isinstance(m, torch.nn.LayerNorm) or "Norm" in type(m).__name__
             for pn, _ in m.named_parameters(recurse=False)}
    g = torch.Generator().manual_seed(seed)

    def maker(n, shape):
        def make():
            if n in norms:
                return torch.ones(shape) if n.endswith("weight") else torch.zeros(shape)
            if len(shape) == 1:
                return torch.zeros(shape)
            return 0.02 * torch.randn(shape, generator=g)
        return make

    entries = [(n, torch.bfloat16, tuple(t.shape), maker(n, tuple(t.shape)))
               for n, t in meta.state_dict().items() if not n.endswith("inv_freq")]
    tmp = os.path.join(out, "model.safetensors.partial")
    write_safetensors(tmp, entries, {"format": "pt"})
    cfg.dtype = "bfloat16"
    cfg.to_json_file(os.path.join(out, "config.json"))
    if MODELS[name][0] == "esm2":
        write_esm2_vocab(out)
    os.replace(tmp, os.path.join(out, "model.safetensors"))


def run(bin_path, model_dir, fasta, precision, threads):
    cmd = [bin_path, "bench", "embed", fasta, "--weights", model_dir, "--threads", str(threads),
           "--repeat", "1", "--warmup-records", "1", "--precision", precision]
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "maxrss_kb %M"] + cmd, capture_output=True,
                       text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        return {"error": p.stderr.strip()[-2000:]}
    row = json.loads(p.stdout.strip().splitlines()[-1])
    rss = [l for l in p.stderr.splitlines() if l.startswith("maxrss_kb ")]
    row["process_wall_s"] = wall
    row["process_peak_rss_mb"] = int(rss[-1].split()[1]) / 1024 if rss else None
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="esm2_15B:int8,esmc_6B:bf16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workdir", default="/tmp/bioinfer_lm_large")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bioinfer"))
    ap.add_argument("--keep", action="store_true", help="keep the checkpoints")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "lm_large_cpu.json"))
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    rng = random.Random(0)
    fasta = os.path.join(args.workdir, "two_128.fasta")
    with open(fasta, "w") as f:
        for i in range(2):
            f.write(f">s{i}\n" + "".join(rng.choice("LAGVSERTIDPKQNFYMHWC") for _ in range(128)) + "\n")
    rows = []
    for spec in args.models.split(","):
        name, precision = spec.split(":")
        mdir = os.path.join(args.workdir, name)
        t0 = time.time()
        make_checkpoint(name, mdir)
        size = os.path.getsize(os.path.join(mdir, "model.safetensors"))
        print(f"{name}: checkpoint {size / 1e9:.1f} GB ready in {time.time() - t0:.0f} s",
              file=sys.stderr)
        arch, layers, hidden, heads, inter = MODELS[name]
        row = {"model": name, "precision": precision, "checkpoint_gb": size / 1e9,
               "shape": {"layers": layers, "hidden": hidden, "heads": heads,
                         "intermediate": inter},
               "input": "2 random sequences of 128 residues", **run(args.bin, mdir, fasta,
                                                                    precision, args.threads)}
        print(json.dumps(row), file=sys.stderr)
        rows.append(row)
        if not args.keep:
            os.remove(os.path.join(mdir, "model.safetensors"))
        write_json(args.out, {"bench": "lm_large_cpu",
                              "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
                              "machine": machine_info(args.threads), "rows": rows})
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
