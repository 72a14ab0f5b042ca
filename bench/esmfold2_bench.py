#!/usr/bin/env python3
"""ESMFold2 structure prediction: bioinfer vs Hugging Face transformers' EsmFold2Model on the CPU,
same machine, same run, same threads, fp32 on both sides, with random weights at the released
trunk and diffusion shapes (pair 256, 48 folding-trunk blocks, 4-block LM encoder and MSA
encoder, 2-block coda, 12-block diffusion transformer of width 768, 4-block confidence trunk) and
an ESM C tower of the 600M shape (the 6B tower's fp32 reference does not fit this machine).

    .venv-reference/bin/python bench/esmfold2_bench.py [--lengths 64,128] [--threads 2]
        [--num-loops 3] [--steps 20] [--workdir DIR] [--out bench/results/esmfold2_cpu.json]
    .venv-reference/bin/python bench/esmfold2_bench.py --tower 6b --lengths 128

--tower 6b runs bioinfer alone at the released shapes, the ESM C 6B tower included and stored in
bf16 as released (a 16 GB checkpoint): `bench fold` with each stage's peak RSS, then `bioinfer
predict` end to end under /usr/bin/time (results in bench/results/esmfold2_6b_cpu.json).

The checkpoint (about 3.3 GB, fp32) is written once to --workdir in the transformers layout.
Every (side, length) runs in its own process, so peak RSS (VmHWM) is its own: model load, one
fold of a warm-up sequence, then --repeat timed folds of the target (one diffusion sample); the
fastest counts. Stage times: language model, trunk (inputs embedder, LM shim and every loop), the
diffusion sampler, the confidence head. Upstream's stages are timed by wrapping its methods. The
sampler's schedule length is --steps on both sides (the cap at sigma 256 drops the top entries).

Each bioinfer row also states its ceiling: the trunk's pair-update GEMM FLOPs (counted from the
shapes), the fp32 register peak of this CPU (`bioinfer bench peak`, measured before and after the
folds; the higher counts), the trunk's GEMM rate as a fraction of it, and the floor: those FLOPs
at the peak plus bioinfer's other stages as measured, with the speedup over transformers that
floor would give.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fold_bench import add_ceiling, bioinfer_fold, print_fastest_fold, register_peak  # noqa: E402
from lm_bench import machine_info, time_calls, write_json  # noqa: E402

TOWERS = {  # hidden, layers, heads, intermediate (ESM C's SwiGLU width)
    "6b": (2560, 80, 40, 6912),  # the released tower: stored bf16, bioinfer only (see --tower)
    "600m": (1152, 36, 18, 3072),
    "tiny": (64, 2, 4, 256),  # quick probes of the trunk only
}


def config(tower, num_loops, steps):
    from transformers import EsmFold2Config
    hidden, layers, heads, inter = TOWERS[tower]
    cfg = EsmFold2Config(
        num_loops=num_loops, folding_trunk_num_hidden_layers=48, chunk_size=None,
        structure_head=dict(num_distogram_bins=64, num_diffusion_samples=1, gamma_0=0.8,
                            gamma_min=1.0, noise_scale=1.003, step_scale=1.5,
                            inference_exponent=7.0, inference_num_steps=steps,
                            inference_sigma_cap=256.0),
        esmc_config=dict(model_type="esmc", hidden_size=hidden, intermediate_size=inter,
                         num_hidden_layers=layers, num_attention_heads=heads, vocab_size=64))
    return cfg


def write_safetensors(path, entries, metadata):
    """A safetensors file from (name, dtype, shape, make) entries, each tensor made and written in
    turn, so a checkpoint larger than memory never exists in memory."""
    import struct
    import torch
    codes = {torch.float32: ("F32", 4), torch.bfloat16: ("BF16", 2)}
    header, offset = {"__metadata__": metadata}, 0
    for name, dtype, shape, _ in entries:
        n = 1
        for d in shape:
            n *= d
        header[name] = {"dtype": codes[dtype][0], "shape": list(shape),
                        "data_offsets": [offset, offset + n * codes[dtype][1]]}
        offset += n * codes[dtype][1]
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    written, step = 0, 2e9
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        for name, dtype, shape, make in entries:
            t = make().to(dtype).contiguous()
            assert tuple(t.shape) == tuple(shape), name
            f.write(t.view(torch.int16 if dtype == torch.bfloat16 else torch.int32).numpy().tobytes())
            before, written = written, written + t.numel() * t.element_size()
            if written // step > before // step:  # a line every 2 GB
                print(f"{os.path.basename(path)}: {written / 1e9:.0f} of {offset / 1e9:.0f} GB",
                      file=sys.stderr, flush=True)


def make_checkpoint(out, tower, num_loops, steps, seed=0):
    """Random weights in EsmFold2Model's layout, written without building the model in memory.
    The 6B tower's weights are stored in bf16, as released; everything else in fp32."""
    import torch
    from transformers import EsmFold2Model
    done = os.path.join(out, "model.safetensors")
    if os.path.exists(done):
        return out
    os.makedirs(out, exist_ok=True)
    cfg = config(tower, num_loops, steps)
    with torch.device("meta"):
        meta = EsmFold2Model(cfg)
    norms = {f"{mn}.{pn}" for mn, m in meta.named_modules() if isinstance(m, torch.nn.LayerNorm)
             for pn, _ in m.named_parameters(recurse=False)}
    g = torch.Generator().manual_seed(seed)

    def maker(name, shape):
        def make():
            if name.endswith("boundaries"):
                c = cfg.confidence_head
                return torch.linspace(c.min_dist, c.max_dist, c.distogram_bins - 1)
            if name in norms or name.endswith(("norm.weight", "norm.bias")):
                return (1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn(shape, generator=g)
            if name.endswith(("log_state_decay", "log_delta")):
                return -0.5 + 0.3 * torch.randn(shape, generator=g)
            if len(shape) == 1:
                return 0.1 * torch.randn(shape, generator=g)
            fan_in = shape[-2] if name.endswith(("plddt_weight", "resolved_weight")) else shape[-1]
            return torch.randn(shape, generator=g) / fan_in ** 0.5
        return make

    entries = []
    for name, t in meta.state_dict().items():
        if name.endswith("inv_freq"):
            continue
        dtype = torch.bfloat16 if tower == "6b" and name.startswith("esmc.") else torch.float32
        entries.append((name, dtype, tuple(t.shape), maker(name, tuple(t.shape))))
    write_safetensors(done + ".tmp", entries, {"format": "pt"})
    os.replace(done + ".tmp", done)
    cfg.save_pretrained(out)
    return out


def hf_worker(model_dir, length, threads, repeat, steps):
    import torch
    from transformers import EsmFold2Model
    from transformers.models.esmfold2.protein_utils import prepare_protein_features

    torch.set_num_threads(threads)
    model = EsmFold2Model.from_pretrained(model_dir, dtype=torch.float32).eval()
    stages = {}
    time_calls(stages, model, "_compute_lm_hidden_states", "language_model")
    time_calls(stages, model, "forward", "trunk_total")
    time_calls(stages, model, "_sample_structure", "diffusion")
    time_calls(stages, model.confidence_head, "forward", "confidence")

    def fold(seq):
        feats = prepare_protein_features(seq)
        stages.clear()
        t0 = time.perf_counter()
        with torch.inference_mode():
            model.fold(**feats, num_diffusion_samples=1, num_sampling_steps=steps)
        total = time.perf_counter() - t0
        out = dict(stages)
        out["trunk"] = out.pop("trunk_total") - out["language_model"]
        return total, out

    print_fastest_fold(fold, length, repeat, torch.get_num_threads())


def pair_update_flop(cfg, length):
    """The GEMM FLOPs of the trunk's pair-update layers at `length` tokens, counted from the
    shapes: per layer two triangle multiplications (the bundle and gate projections C -> 5C, the
    per-channel L x L x L product, the C -> C output) and the SwiGLU transition (C -> 2F, F -> C);
    layers: the MSA encoder's once, (num_loops + 1) x (LM encoder + folding trunk), the coda. The
    rest of the trunk (LM shim, outer product mean, parcae projections, distogram) is left out, so
    this is a lower bound on the trunk's GEMM work."""
    c, f, n = cfg["pairwise_hidden_size"], cfg["pair_transition_intermediate_size"], length
    trimul = 2 * n * n * c * 5 * c + 2 * c * n ** 3 + 2 * n * n * c * c
    layer = 2 * trimul + 2 * n * n * c * 3 * f
    layers = (cfg["msa_encoder"]["num_hidden_layers"] +
              (cfg["num_loops"] + 1) * (cfg["lm_encoder"]["num_hidden_layers"] +
                                        cfg["folding_trunk_num_hidden_layers"]) +
              cfg["parcae_num_coda_layers"])
    return layers * layer


def add_pair_ceiling(row, model_dir, peaks, reference=None):
    """The fold's floor at the fp32 register peak, counting the trunk's pair-update GEMMs."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    add_ceiling(row, pair_update_flop(cfg, row["length"]), peaks, reference, "pair_update")


def write_doc(args, rows):
    """The results so far (rewritten after every row, so a long run keeps what it measured)."""
    import torch
    import transformers
    doc = {"bench": "esmfold2_cpu",
           "command": shlex.join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
           "machine": machine_info(args.threads),
           "model": {"tower": f"ESM C {args.tower} shape, random weights" +
                              (", stored bf16" if args.tower == "6b" else ""),
                     "trunk": "released shapes: pair 256, 48 trunk blocks, LM encoder 4, MSA encoder 4, coda 2",
                     "diffusion": "released shapes: width 768, 12 token blocks, atom width 128",
                     "num_loops": args.num_loops, "sampling_steps": args.steps, "samples": 1,
                     "compute": "fp32" if args.tower == "6b" else "fp32 on both sides"},
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
           "fp32_register_peaks": args.peaks,
           "rows": rows}
    write_json(args.out, doc)


def predict_run(bin_path, model_dir, length, threads, steps, workdir):
    """`bioinfer predict` end to end on the target: wall time, peak RSS, the files it wrote."""
    fasta = os.path.join(workdir, f"target_{length}.fa")
    out_dir = os.path.join(workdir, f"predict_{length}")
    cmd = [bin_path, "predict", fasta, "--weights", model_dir, "--out-dir", out_dir, "--threads",
           str(threads), "--sampling-steps", str(steps)]
    t0 = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "maxrss_kb %M"] + cmd, capture_output=True,
                          text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"bioinfer predict failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    rss = [l for l in proc.stderr.splitlines() if l.startswith("maxrss_kb ")]
    return {"impl": "bioinfer", "command": "predict", "length": length, "seconds": seconds,
            "peak_rss_mb": int(rss[-1].split()[1]) / 1024 if rss else None,
            "outputs": sorted(os.listdir(out_dir))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lengths", default="64,128")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--num-loops", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--tower", default="600m", choices=sorted(TOWERS),
                    help="6b: the released tower in bf16, bioinfer alone (bench fold and predict)")
    ap.add_argument("--workdir", default="/tmp/bioinfer_esmfold2_bench")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bioinfer"))
    ap.add_argument("--out", default=None, help="default bench/results/esmfold2_cpu.json "
                    "(esmfold2_6b_cpu.json with --tower 6b)")
    ap.add_argument("--hf-worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.out is None:
        name = "esmfold2_6b_cpu.json" if args.tower == "6b" else "esmfold2_cpu.json"
        args.out = os.path.join(ROOT, "bench", "results", name)
    model_dir = os.path.join(args.workdir, f"esmfold2_random_{args.tower}_{args.num_loops}_{args.steps}")
    if args.hf_worker:
        hf_worker(args.hf_worker[0], int(args.hf_worker[1]), args.threads, args.repeat, args.steps)
        return
    t0 = time.time()
    make_checkpoint(model_dir, args.tower, args.num_loops, args.steps)
    print(f"checkpoint ready in {time.time() - t0:.0f} s: {model_dir}", file=sys.stderr)
    rows = []
    # the fp32 register peak before and after the folds (a shared machine's speed drifts)
    args.peaks = [register_peak(args.bin, args.threads)]
    for n in [int(x) for x in args.lengths.split(",") if x]:
        r = bioinfer_fold(args.bin, model_dir, n, args.threads, args.repeat, args.workdir,
                          ["--sampling-steps", str(args.steps)])
        add_pair_ceiling(r, model_dir, args.peaks)
        print(json.dumps(r), file=sys.stderr)
        rows.append(r)
        write_doc(args, rows)
        if args.tower == "6b":  # no reference: its fp32 tower does not fit this machine
            p = predict_run(args.bin, model_dir, n, args.threads, args.steps, args.workdir)
            print(json.dumps(p), file=sys.stderr)
            rows.append(p)
            write_doc(args, rows)
            continue
        out = subprocess.run([sys.executable, __file__, "--hf-worker", model_dir, str(n),
                              "--threads", str(args.threads), "--repeat", str(args.repeat),
                              "--steps", str(args.steps), "--tower", args.tower,
                              "--num-loops", str(args.num_loops)],
                             check=True, capture_output=True, text=True).stdout
        h = json.loads(out.strip().splitlines()[-1])
        print(json.dumps(h), file=sys.stderr)
        rows.append(h)
        r["speedup_vs_transformers"] = h["seconds"] / r["seconds"]
        add_pair_ceiling(r, model_dir, args.peaks, h)
        write_doc(args, rows)
    args.peaks.append(register_peak(args.bin, args.threads))
    for r in rows:  # restated against the highest peak of the run
        if "ceiling" in r:
            h = next((x for x in rows
                      if x["impl"] == "transformers" and x["length"] == r["length"]), None)
            add_pair_ceiling(r, model_dir, args.peaks, h)
    write_doc(args, rows)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
