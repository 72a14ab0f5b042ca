#!/usr/bin/env python3
"""Structure prediction: bioinfer predict vs Hugging Face transformers' EsmForProteinFolding on
the CPU, same machine, same run, same threads, fp32 on both sides, with random weights at the
real shapes of facebook/esmfold_v1 (ESM-2 3B stem, 48 trunk blocks, 8-block structure module).

    .venv-reference/bin/python bench/fold_bench.py [--lengths 64,128,256] [--bioinfer-only 512]
        [--threads 2] [--workdir DIR] [--out bench/results/esmfold_cpu.json]

The checkpoint is written once to --workdir (about 8.4 GB, the real file's layout: the stem in
fp16, the folding trunk in fp32). bioinfer computes the stem in fp32 from the fp16 weights;
transformers is loaded in fp32 with fp16_esm off (its default would run the stem in fp16, which
its CPU kernels do slowly), so both sides run the same fp32 arithmetic. Every (side, length) runs
in its own process, so peak RSS (VmHWM) is its own: model load, one fold of a warm-up sequence,
then --repeat timed folds of the target; the fastest counts. Sequences are random (seeded) over
the 20 amino acids. Stage times: language-model stem, trunk (all recycling passes), structure
module (all passes), heads. Upstream's stages are timed by wrapping its modules.

Each bioinfer row compared with transformers also states its ceiling: the trunk's FLOPs in
GEMMs and attention matmuls (counted from the shapes, every recycling pass), the fp32 register
peak of this CPU (`bioinfer bench peak`, measured before and after the folds; the higher counts),
the trunk's rate as a fraction of it, and the floor: those FLOPs at the peak plus bioinfer's other
stages as measured, with the speedup over transformers that floor would give.

--memory-probe L folds one L-residue target with bioinfer only and records its peak RSS (the
1024-residue figure in docs/performance.md).
"""
import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lm_bench import machine_info, peak_rss_mb, time_calls, write_json  # noqa: E402
AA = "ACDEFGHIKLMNPQRSTVWY"

STEMS = {  # hidden, layers, heads, intermediate
    "3B": (2560, 36, 40, 10240),  # facebook/esmfold_v1's ESM-2 3B
    "8M": (320, 6, 20, 1280),     # for quick probes of the trunk only
}


def config(stem="3B", blocks=48):
    from transformers import EsmConfig
    from fixture_util import ESM2_ALPHABET
    hidden, layers, heads, inter = STEMS[stem]
    return EsmConfig(vocab_size=33, hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=heads, intermediate_size=inter, hidden_act="gelu",
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     max_position_embeddings=1026, position_embedding_type="rotary",
                     layer_norm_eps=1e-5, emb_layer_norm_before=False, token_dropout=True,
                     mask_token_id=32, pad_token_id=1, is_folding_model=True,
                     vocab_list=ESM2_ALPHABET, architectures=["EsmForProteinFolding"],
                     esmfold_config=dict(fp16_esm=True, embed_aa=True, lddt_head_hid_dim=128,
                                         trunk=dict(num_blocks=blocks, chunk_size=None)))


def make_checkpoint(out, stem="3B", blocks=48, seed=0):
    """Random weights in EsmForProteinFolding's layout (stem fp16, the rest fp32), written without
    building the model in memory."""
    import torch
    from safetensors.torch import save_file
    from transformers import EsmForProteinFolding
    done = os.path.join(out, "model.safetensors")
    if os.path.exists(done):
        return out
    os.makedirs(out, exist_ok=True)
    cfg = config(stem, blocks)
    with torch.device("meta"):
        meta = EsmForProteinFolding(cfg)
    norms = {f"{mn}.{pn}" for mn, m in meta.named_modules() if isinstance(m, torch.nn.LayerNorm)
             for pn, _ in m.named_parameters(recurse=False)}
    g = torch.Generator().manual_seed(seed)
    sd = {}
    for name, t in meta.state_dict().items():
        shape = tuple(t.shape)
        if name == "af2_to_esm":
            v = EsmForProteinFolding._af2_to_esm_from_vocab_list(cfg.vocab_list)
        elif name.endswith("inv_freq"):
            d = cfg.hidden_size // cfg.num_attention_heads
            v = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        elif name in norms or "LayerNorm" in name:
            base = 1.0 if name.endswith(("weight", "gamma")) else 0.0
            v = base + 0.1 * torch.randn(shape, generator=g)
        elif len(shape) == 1:
            v = 0.1 * torch.randn(shape, generator=g)
        else:
            v = torch.randn(shape, generator=g) / shape[-1] ** 0.5
        if name.startswith("esm.") and v.is_floating_point() and not name.endswith("inv_freq"):
            v = v.half()
        sd[name] = v.contiguous()
    save_file(sd, done + ".tmp", metadata={"format": "pt"})
    os.replace(done + ".tmp", done)
    cfg.save_pretrained(out)
    with open(os.path.join(out, "vocab.txt"), "w") as f:
        f.write("\n".join(cfg.vocab_list) + "\n")
    return out


def sequence(n, seed):
    rng = random.Random(seed)
    return "".join(rng.choice(AA) for _ in range(n))


def hf_worker(model_dir, length, threads, repeat, recycles):
    import torch
    from transformers import EsmForProteinFolding
    from transformers.models.esm import modeling_esmfold as mf
    from transformers.models.esm.openfold_utils import residue_constants as rc

    torch.set_num_threads(threads)
    model = EsmForProteinFolding.from_pretrained(model_dir, dtype=torch.float32,
                                                 esmfold_config={"fp16_esm": False}).eval()
    model.esm.float()
    stages = {}
    time_calls(stages, model, "compute_language_model_representations", "language_model")
    time_calls(stages, model.trunk, "forward", "trunk_total")
    time_calls(stages, model.trunk.structure_module, "forward", "structure_module")

    def fold(seq):
        aatype = torch.tensor([[rc.restype_order_with_x.get(a, 20) for a in seq]])
        stages.clear()
        t0 = time.perf_counter()
        with torch.inference_mode():
            model(input_ids=aatype, attention_mask=torch.ones_like(aatype),
                  num_recycles=None if recycles < 0 else recycles)
        total = time.perf_counter() - t0
        out = dict(stages)
        out["trunk"] = out.pop("trunk_total") - out["structure_module"]
        out["heads"] = total - out["language_model"] - out["trunk"] - out["structure_module"]
        return total, out

    print_fastest_fold(fold, length, repeat, torch.get_num_threads())


def print_fastest_fold(fold, length, repeat, threads):
    """A reference worker's result line: one warm-up fold of 16 residues, then the fastest of
    `repeat` folds of the target; fold(seq) returns (seconds, stage seconds)."""
    fold(sequence(16, 99))
    runs = [fold(sequence(length, length)) for _ in range(repeat)]
    best = min(runs, key=lambda r: r[0])
    print(json.dumps({"impl": "transformers", "length": length, "seconds": best[0],
                      "stages_s": best[1], "peak_rss_mb": peak_rss_mb(), "threads": threads}))


def bioinfer_fold(bin_path, model_dir, length, threads, repeat, workdir, extra=()):
    """`bioinfer bench fold` on the target of `length` residues (written to workdir), its JSON."""
    fasta = os.path.join(workdir, f"target_{length}.fa")
    with open(fasta, "w") as f:
        f.write(f">target_{length}\n{sequence(length, length)}\n")
    cmd = [bin_path, "bench", "fold", fasta, "--weights", model_dir, "--threads", str(threads),
           "--repeat", str(repeat), *extra]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def bioinfer_run(bin_path, model_dir, length, threads, repeat, recycles, workdir):
    extra = ["--num-recycles", str(recycles)] if recycles >= 0 else []
    return bioinfer_fold(bin_path, model_dir, length, threads, repeat, workdir, extra)


def trunk_flop(cfg, length, num_recycles=-1):
    """The folding trunk's FLOPs in GEMMs and attention matmuls at `length` residues, counted from
    the shapes of EsmFoldTriangularSelfAttentionBlock, times the trunk passes (max_recycles by
    default, num_recycles + 1 when given, as transformers counts them). Layer norms, softmax, gates
    and the recycling embeddings are left out, so this is a lower bound on the trunk's work."""
    t = cfg["esmfold_config"]["trunk"]
    s, z, n = t["sequence_state_dim"], t["pairwise_state_dim"], length
    hs, hz = s // t["sequence_head_width"], z // t["pairwise_head_width"]
    seq = (2 * n * s * 5 * s            # qkv, gate and output projections
           + 2 * 2 * n * n * s          # scores and weighted sum
           + 2 * n * n * z * hs         # pair bias
           + 2 * n * 2 * s * 4 * s)     # sequence transition
    seq_to_pair = 2 * n * s * z + 2 * n * n * z * z
    tri_mul = 2 * n * n * z * z * 6 + 2 * z * n ** 3
    tri_att = 2 * n * n * z * (5 * z + hz) + 2 * 2 * z * n ** 3
    pair_mlp = 2 * n * n * 2 * z * 4 * z
    block = seq + seq_to_pair + 2 * tri_mul + 2 * tri_att + pair_mlp
    passes = t["max_recycles"] if num_recycles < 0 else num_recycles + 1
    return passes * t["num_blocks"] * block


def register_peak(bin_path, threads):
    """This CPU's fp32 register-level peak (`bioinfer bench peak`), GFLOP/s on `threads` threads."""
    out = subprocess.run([bin_path, "bench", "peak", "--no-gemm", "--threads", str(threads),
                          "--seconds", "0.5"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["best_register_peak"]["fp32"]


def add_ceiling(row, flop, peaks, reference=None, counted="trunk"):
    """The fold's floor at the fp32 register peak: `flop` (the trunk's counted work, named
    `counted`) at the highest peak measured in this run plus bioinfer's other stages as measured;
    with the reference row, the speedup over it that floor would give."""
    peak = max(p["value"] for p in peaks)
    other = row["seconds"] - row["stages_s"]["trunk"]
    row["ceiling"] = {f"{counted}_tflop": flop * 1e-12,
                      "fp32_register_peak_gflops": peak,
                      "trunk_gemm_gflops": flop / row["stages_s"]["trunk"] * 1e-9,
                      "trunk_fraction_of_peak": flop / row["stages_s"]["trunk"] * 1e-9 / peak,
                      "floor_seconds": flop / (peak * 1e9) + other}
    if reference:
        row["ceiling"]["max_speedup_at_peak"] = reference["seconds"] / row["ceiling"]["floor_seconds"]


def write_doc(args, rows):
    """The results so far (rewritten after every row, so a long run keeps what it measured)."""
    import torch
    import transformers
    doc = {"bench": "esmfold_memory" if args.memory_probe else "esmfold_cpu",
           "command": shlex.join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
           "machine": machine_info(args.threads),
           "model": {"stem": args.stem, "trunk_blocks": args.blocks,
                     "storage": "stem fp16, trunk fp32 (as facebook/esmfold_v1)",
                     "compute": "fp32 on both sides"},
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
           "num_recycles": args.num_recycles, "rows": rows}
    if getattr(args, "peaks", None):
        doc["fp32_register_peaks"] = args.peaks
    write_json(args.out, doc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lengths", default="64,128,256")
    ap.add_argument("--bioinfer-only", default="512", help="lengths run by bioinfer alone")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--num-recycles", type=int, default=-1)
    ap.add_argument("--stem", default="3B", choices=sorted(STEMS))
    ap.add_argument("--blocks", type=int, default=48)
    ap.add_argument("--workdir", default="/tmp/bioinfer_fold_bench")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bioinfer"))
    ap.add_argument("--memory-probe", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "esmfold_cpu.json"))
    ap.add_argument("--hf-worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    model_dir = os.path.join(args.workdir, f"esmfold_random_{args.stem}_{args.blocks}")
    if args.hf_worker:
        hf_worker(args.hf_worker[0], int(args.hf_worker[1]), args.threads, args.repeat,
                  args.num_recycles)
        return
    t0 = time.time()
    make_checkpoint(model_dir, args.stem, args.blocks)
    print(f"checkpoint ready in {time.time() - t0:.0f} s: {model_dir}", file=sys.stderr)
    rows = []
    if args.memory_probe:
        r = bioinfer_run(args.bin, model_dir, args.memory_probe, args.threads, 1, args.num_recycles,
                         args.workdir)
        rows.append(r)
        print(json.dumps(r), file=sys.stderr)
        write_doc(args, rows)
    else:
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        lengths = [int(x) for x in args.lengths.split(",") if x]
        solo = [int(x) for x in args.bioinfer_only.split(",") if x]
        # the fp32 register peak before and after the folds (a shared machine's speed drifts)
        args.peaks = [register_peak(args.bin, args.threads)]
        pairs = []
        for n in lengths + solo:
            r = bioinfer_run(args.bin, model_dir, n, args.threads, args.repeat, args.num_recycles,
                             args.workdir)
            print(json.dumps(r), file=sys.stderr)
            rows.append(r)
            write_doc(args, rows)
            if n in solo:
                continue
            out = subprocess.run([sys.executable, __file__, "--hf-worker", model_dir, str(n),
                                  "--threads", str(args.threads), "--repeat", str(args.repeat),
                                  "--num-recycles", str(args.num_recycles)],
                                 check=True, capture_output=True, text=True).stdout
            h = json.loads(out.strip().splitlines()[-1])
            print(json.dumps(h), file=sys.stderr)
            rows.append(h)
            r["speedup_vs_transformers"] = h["seconds"] / r["seconds"]
            pairs.append((r, h))
            add_ceiling(r, trunk_flop(cfg, n, args.num_recycles), args.peaks, h)
            write_doc(args, rows)
        args.peaks.append(register_peak(args.bin, args.threads))
        for r, h in pairs:  # restated against the highest peak of the run
            add_ceiling(r, trunk_flop(cfg, r["length"], args.num_recycles), args.peaks, h)
        write_doc(args, rows)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
