#!/usr/bin/env python3
"""Language-model embedding throughput: bioinfer vs Hugging Face transformers (EsmModel, EsmcModel),
same machine, same run, same threads, random weights at the real shapes of the released
checkpoints, in fp32 (both sides), bf16 (bioinfer's --precision bf16 vs torch's own bf16) and
int8 (bioinfer's --precision int8 vs transformers in fp32, the comparison a user makes).

    .venv-reference/bin/python bench/lm_bench.py [--models esm2_650M,esmc_600M]
        [--precisions fp32,bf16,int8] [--sets uniform_8x256,mixed_64_lognormal300] [--threads 2]

transformers runs two ways: "typical", as users call it (batches of 8 in input order, each padded
to its longest member), and "sorted", at its best (length-sorted batches filled up to 4096 padded
tokens). bioinfer runs its own batching (length-sorted, 4096 real tokens per batch, packed without
padding). Every run is its own process (so peak RSS is its own): model load, a warm-up on the
first --warmup-records records, then --repeat timed passes over the whole set; the fastest counts.
The sides alternate for --rounds rounds, so a slow spell of a shared machine hits all of them.

--sides picks who runs (default bioinfer and both transformers modes). tuned_ab is bioinfer
with and without its tuned kernel table in one process (`bench embed --compare-table none`: two
copies of the model, passes alternating ABBA), so a row's ratio_tuned (tokens/s with the table
over without, the median of back-to-back pass pairs, then over rounds) is what the op sweep's
table changed, with the machine's slow spells mostly cancelled.

A GEMM microbenchmark in the same run (bioinfer bench matmul and torch.nn.functional.linear at each
model's FFN shape, 2048 tokens) measures the machine's bf16 and fp32 GEMM throughput; the highest
bf16 figure is the peak that bf16 rows are held against: tokens/s that peak allows = peak FLOP/s
divided by the model's FLOPs per token on that set (linear layers and attention, no LM head).
Writes bench/results/lm_cpu.json.
"""
import argparse
import json
import math
import os
import platform
import random
import subprocess
import sys
import tempfile
import time

AA = "LAGVSERTIDPKQNFYMHWC"
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TOKS_PER_BATCH = 4096


def swiglu_hidden(d):
    return int(((8 / 3) * d + 255) // 256 * 256)


# arch, layers, hidden, heads, intermediate (facebook/esm2_* config.json; ESM C from the esm package)
MODELS = {
    "esm2_8M": ("esm2", 6, 320, 20, 1280),
    "esm2_35M": ("esm2", 12, 480, 20, 1920),
    "esm2_150M": ("esm2", 30, 640, 20, 2560),
    "esm2_650M": ("esm2", 33, 1280, 20, 5120),
    "esmc_300M": ("esmc", 30, 960, 15, swiglu_hidden(960)),
    "esmc_600M": ("esmc", 36, 1152, 18, swiglu_hidden(1152)),
}


def make_sets(seed=0):
    rng = random.Random(seed)
    uniform = ["".join(rng.choice(AA) for _ in range(256)) for _ in range(8)]
    lengths = [min(1022, max(30, int(round(rng.lognormvariate(math.log(300), 0.5))))) for _ in range(64)]
    mixed = ["".join(rng.choice(AA) for _ in range(n)) for n in lengths]
    long = ["".join(rng.choice(AA) for _ in range(1000)) for _ in range(4)]
    return {"uniform_8x256": uniform, "mixed_64_lognormal300": mixed, "uniform_4x1000": long}


def hf_batches(seqs, mode):
    """typical: batches of 8 in input order; sorted: longest first, up to 4096 padded tokens."""
    if mode == "typical":
        return [list(range(i, min(i + 8, len(seqs)))) for i in range(0, len(seqs), 8)]
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    out, max_len = [], 0
    for i in order:
        n = len(seqs[i]) + 2
        m = max(max_len, n)
        if not out or m * (len(out[-1]) + 1) > TOKS_PER_BATCH:
            out.append([i])
            max_len = n
        else:
            out[-1].append(i)
            max_len = m
    return out


def gflop_per_token(model, seqs):
    """Forward FLOPs per token (with <cls>/<eos>): linear layers and attention, no LM head."""
    arch, layers, d, _, f = MODELS[model]
    n_ffn = 3 if arch == "esmc" else 2  # SwiGLU: gate, up, down; GELU: up, down
    total = tokens = 0
    for s in seqs:
        n = len(s) + 2
        total += layers * (2 * n * (4 * d * d + n_ffn * d * f) + 4 * n * n * d)
        tokens += n
    return total / tokens * 1e-9


def peak_rss_mb():
    """This process's peak resident memory (VmHWM). Not ru_maxrss: Linux carries that across fork
    and exec, so it would include the driver's peak."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def machine_info(threads):
    """The CPU a benchmark ran on: model, cores, threads, ISA flags, memory, load at start."""
    cpuinfo = open("/proc/cpuinfo").read().splitlines()
    model = next((l.split(":", 1)[1].strip() for l in cpuinfo if l.startswith("model name")), "")
    flags = next((l.split(":", 1)[1].split() for l in cpuinfo if l.startswith("flags")), [])
    return {"cpu_model": model, "cores": os.cpu_count(), "threads": threads,
            "isa": [f for f in flags if f.startswith(("avx512", "amx", "avx2", "fma", "f16c"))],
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "load_average_at_start": os.getloadavg()}


def write_json(path, doc):
    """Writes a results JSON under a temporary name, then renames it into place (a stopped run
    never leaves half a file)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)


def time_calls(stages, obj, attr, key):
    """Wraps obj.attr so that each call adds its seconds to stages[key] (upstream's stage times)."""
    fn = getattr(obj, attr)

    def wrapper(*a, **k):
        t0 = time.perf_counter()
        r = fn(*a, **k)
        stages[key] = stages.get(key, 0.0) + time.perf_counter() - t0
        return r
    setattr(obj, attr, wrapper)


def hf_worker(model_dir, arch, fasta, threads, repeat, precision, mode, warmup):
    import torch

    torch.set_num_threads(threads)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    seqs = [l.strip() for l in open(fasta) if l.strip() and not l.startswith(">")]
    if arch == "esmc":
        from transformers import EsmcModel, EsmcTokenizer
        tok = EsmcTokenizer()
        model = EsmcModel.from_pretrained(model_dir, dtype=dtype).eval()
    else:
        from transformers import EsmModel, EsmTokenizer
        tok = EsmTokenizer(os.path.join(model_dir, "vocab.txt"))
        model = EsmModel.from_pretrained(model_dir, add_pooling_layer=False, dtype=dtype).eval()

    def encode(idx):
        enc = tok([seqs[i] for i in idx], padding=True, return_tensors="pt")
        return enc["input_ids"], enc["attention_mask"]

    encoded = [encode(b) for b in hf_batches(seqs, mode)]
    tokens = sum(len(s) + 2 for s in seqs)

    def run(batches):
        t0 = time.perf_counter()
        with torch.inference_mode():
            for ids, am in batches:
                model(input_ids=ids, attention_mask=am).last_hidden_state
        return time.perf_counter() - t0

    run([encode(list(range(min(warmup, len(seqs)))))] if warmup > 0 else encoded)
    best = min(run(encoded) for _ in range(repeat))
    print(json.dumps({"impl": "transformers", "batching": mode,
                      "precision": "fp32" if precision == "int8" else precision,
                      "threads": torch.get_num_threads(),
                      "attn_implementation": model.config._attn_implementation,
                      "sequences": len(seqs), "tokens": tokens, "seconds": best,
                      "tokens_per_s": tokens / best, "peak_rss_mb": peak_rss_mb(), "repeat": repeat}))


def torch_matmul(threads, m, k, n, precision, repeat=5, calls=10):
    """torch.nn.functional.linear throughput (GFLOP/s) at one shape, random data."""
    import torch

    torch.set_num_threads(threads)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    g = torch.Generator().manual_seed(1)
    x = torch.randn(m, k, generator=g).to(dtype)
    w = (torch.randn(n, k, generator=g) * 0.02).to(dtype)
    for _ in range(3):
        torch.nn.functional.linear(x, w)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(calls):
            torch.nn.functional.linear(x, w)
        best = min(best, (time.perf_counter() - t0) / calls)
    return {"impl": "torch", "op": "linear", "precision": precision, "threads": threads, "m": m,
            "k": k, "n": n, "seconds_per_call": best, "gflops": 2.0 * m * k * n / best * 1e-9,
            "repeat": repeat}


def hf_model(arch, layers, hidden, heads, inter):
    """transformers' masked-LM class and config for an ESM-2 or ESM C shape."""
    if arch == "esmc":
        from transformers import EsmcConfig, EsmcForMaskedLM
        return EsmcForMaskedLM, EsmcConfig(vocab_size=64, hidden_size=hidden,
                                           num_hidden_layers=layers, num_attention_heads=heads,
                                           intermediate_size=inter, max_position_embeddings=2048)
    from transformers import EsmConfig, EsmForMaskedLM
    return EsmForMaskedLM, EsmConfig(
        vocab_size=33, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=inter, hidden_act="gelu", max_position_embeddings=1026,
        position_embedding_type="rotary", layer_norm_eps=1e-5, emb_layer_norm_before=False,
        token_dropout=True, mask_token_id=32, pad_token_id=1, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)


def write_esm2_vocab(out):
    """ESM-2's vocab.txt, which the checkpoint directories of EsmForMaskedLM carry."""
    with open(os.path.join(out, "vocab.txt"), "w") as f:
        f.write("\n".join(["<cls>", "<pad>", "<eos>", "<unk>"] + list("LAGVSERTIDPKQNFYMHWCXBUZO.-")
                          + ["<null_1>", "<mask>"]) + "\n")


def make_model(name, out):
    import torch

    arch = MODELS[name][0]
    torch.manual_seed(0)
    cls, cfg = hf_model(*MODELS[name])
    cls(cfg).save_pretrained(out, safe_serialization=True)
    if arch == "esm2":
        write_esm2_vocab(out)


def run_json(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def best_of(runs, key="tokens_per_s"):
    """The run with the highest `key` (an error only when every run failed)."""
    ok = [r for r in runs if key in r]
    return max(ok, key=lambda r: r[key]) if ok else runs[-1]


def gemm_bench(args, shapes):
    """bf16 and fp32 GEMM throughput of both GEMM providers at each shape; the bf16 peak."""
    rows = []
    for m, k, n in shapes:
        for precision in ("bf16", "fp32"):
            ours = run_json([args.bin, "bench", "matmul", "--m", str(m), "--k", str(k), "--n", str(n),
                             "--precision", precision, "--threads", str(args.threads)])
            theirs = run_json([sys.executable, __file__, "--torch-matmul", str(args.threads), str(m),
                               str(k), str(n), precision])
            rows += [ours, theirs]
            print(f"gemm {m}x{k}x{n} {precision}: bioinfer {ours.get('gflops', float('nan')):.0f}"
                  f" GFLOP/s, torch {theirs.get('gflops', float('nan')):.0f} GFLOP/s", flush=True)
    bf16 = [r["gflops"] for r in rows if r.get("precision") == "bf16" and "gflops" in r]
    return {"rows": rows, "bf16_peak_gflops": max(bf16) if bf16 else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="esm2_650M,esmc_600M")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--sets", default="uniform_8x256,mixed_64_lognormal300")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--warmup-records", type=int, default=8)
    ap.add_argument("--sides", default="bioinfer,transformers_typical,transformers_sorted",
                    help="any of bioinfer, tuned_ab, transformers_typical, transformers_sorted")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bioinfer"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "lm_cpu.json"))
    ap.add_argument("--hf-worker", nargs=8, help=argparse.SUPPRESS)
    ap.add_argument("--torch-matmul", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.hf_worker:
        w = args.hf_worker
        hf_worker(w[0], w[1], w[2], int(w[3]), int(w[4]), w[5], w[6], int(w[7]))
        return
    if args.torch_matmul:
        t, m, k, n, p = args.torch_matmul
        print(json.dumps(torch_matmul(int(t), int(m), int(k), int(n), p)))
        return

    import torch
    import transformers

    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    flags = next((l.split(":", 1)[1].split() for l in open("/proc/cpuinfo") if l.startswith("flags")), [])
    models = args.models.split(",")
    sides = args.sides.split(",")
    known = ("bioinfer", "tuned_ab", "transformers_typical", "transformers_sorted")
    if any(s not in known for s in sides):
        ap.error(f"--sides: expected some of {', '.join(known)}")
    sets = make_sets()
    gemm = gemm_bench(args, sorted({(2048, MODELS[m][2], MODELS[m][4]) for m in models}))
    peak = gemm["bf16_peak_gflops"]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sets.split(","):
            with open(os.path.join(tmp, name + ".fasta"), "w") as f:
                for i, s in enumerate(sets[name]):
                    f.write(f">s{i}\n{s}\n")
        for model in models:
            arch = MODELS[model][0]
            mdir = os.path.join(tmp, model)
            make_model(model, mdir)
            for precision in args.precisions.split(","):
                for name in args.sets.split(","):
                    fasta = os.path.join(tmp, name + ".fasta")
                    runs = {side: [] for side in sides}
                    for _ in range(args.rounds):
                        for side in sides:
                            if side in ("bioinfer", "tuned_ab"):
                                runs[side].append(run_json(
                                    [args.bin, "bench", "embed", fasta, "--weights", mdir, "--threads",
                                     str(args.threads), "--repeat", str(args.repeat), "--precision",
                                     precision, "--warmup-records", str(args.warmup_records)]
                                    + (["--compare-table", "none"] if side == "tuned_ab" else [])))
                            else:
                                runs[side].append(run_json(
                                    [sys.executable, __file__, "--hf-worker", mdir, arch, fasta,
                                     str(args.threads), str(args.repeat), precision,
                                     side.split("_", 1)[1], str(args.warmup_records)]))
                    best = {k: best_of(v) for k, v in runs.items()}
                    row = {"model": model, "precision": precision, "set": name,
                           "gflop_per_token": gflop_per_token(model, sets[name]), **best, "rounds": runs}
                    # bioinfer's tokens/s: its own side, or the tuned copy of the tuned_ab run.
                    ours = best.get("bioinfer", {}).get("tokens_per_s") or \
                        best.get("tuned_ab", {}).get("tokens_per_s")
                    for mode in ("typical", "sorted"):
                        ref = best.get("transformers_" + mode, {}).get("tokens_per_s")
                        if ours and ref:
                            row["ratio_" + mode] = ours / ref
                    ab = sorted(r["ratio_median_paired"] for r in runs.get("tuned_ab", [])
                                if "ratio_median_paired" in r)
                    if ab:
                        row["ratio_tuned_by_round"] = ab
                        row["ratio_tuned"] = ab[len(ab) // 2] if len(ab) % 2 else \
                            (ab[len(ab) // 2 - 1] + ab[len(ab) // 2]) / 2
                        row["tuned_tokens_per_s"] = max(r["tokens_per_s"] for r in runs["tuned_ab"] if "tokens_per_s" in r)
                        row["untuned_tokens_per_s"] = max(r["compare_tokens_per_s"] for r in runs["tuned_ab"] if "compare_tokens_per_s" in r)
                    if precision == "bf16" and peak and ours:
                        row["peak_allowed_tokens_per_s"] = peak / row["gflop_per_token"]
                        row["fraction_of_peak"] = ours / row["peak_allowed_tokens_per_s"]
                    results.append(row)
                    print(f"{model:>10} {precision} {name:<22} bioinfer {ours or float('nan'):7.1f} tok/s"
                          f"  vs typical {row.get('ratio_typical', float('nan')):.2f}x"
                          f"  vs sorted {row.get('ratio_sorted', float('nan')):.2f}x"
                          f"  tuned vs untuned {row.get('ratio_tuned', float('nan')):.2f}x"
                          + (f"  {row['fraction_of_peak']:.0%} of bf16 GEMM peak"
                             if "fraction_of_peak" in row else ""), flush=True)
            subprocess.run(["rm", "-rf", mdir])
    doc = {"benchmark": "protein language model embedding throughput, CPU",
           "command": "bench/lm_bench.py " + " ".join(sys.argv[1:]),
           "machine": {"cpu": cpu, "cores": os.cpu_count(), "threads": args.threads,
                       "isa": [f for f in flags if f.startswith(("avx512", "amx", "avx2", "fma"))]},
           "method": {"repeat": args.repeat, "rounds": args.rounds, "warmup_records": args.warmup_records,
                      "toks_per_batch": TOKS_PER_BATCH, "weights": "random, real checkpoint shapes",
                      "tokens": "real tokens with <cls>/<eos>, padding not counted",
                      "transformers_typical": "batches of 8 in input order, padded to the longest",
                      "transformers_sorted": "length-sorted batches up to 4096 padded tokens",
                      "bioinfer": "length-sorted batches of up to 4096 tokens, packed (no padding)",
                      "tuned_ab": "bioinfer with its tuned table and with none (every kernel's default), "
                                  "two copies of the model in one process, --repeat passes alternating ABBA",
                      "sides": sides},
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
           "date": time.strftime("%Y-%m-%d"),
           "gemm": gemm,
           "results": results}
    write_json(args.out, doc)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
