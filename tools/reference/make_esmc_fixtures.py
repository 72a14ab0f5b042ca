#!/usr/bin/env python3
"""Builds tiny random-weight ESM C models with the two upstream implementations, runs them, and
writes the parity fixtures the C++ tests read (tests/fixtures/esmc_*/):

- esmc_tiny, esmc_tiny_hd10: transformers' EsmcForMaskedLM, saved in the Hugging Face layout
  (config.json + safetensors);
- esmc_tiny_pth: the esm package's ESMC, its state dict saved with torch.save the way
  EvolutionaryScale's repositories ship it (data/weights/<name>.pth, no config.json).

Each fixture folder also holds reference.safetensors (per-sequence input ids, every hidden state,
logits and layer-0 module intermediates) and cases.json (the sequences).

    .venv-reference/bin/python tools/reference/make_esmc_fixtures.py [--out tests/fixtures]
"""
import argparse
import os
import shutil

import torch
from transformers import EsmcConfig, EsmcForMaskedLM, EsmcTokenizer

from fixture_util import ESMC_ALPHABET, PROTEIN_CASES, randomize, save_reference, save_two_shards, write_cases

VOCAB = ESMC_ALPHABET
# The shared cases plus a two-chain input joined by the chain break.
CASES = PROTEIN_CASES[:3] + [("dimer", "MKVLAAGIW|GSHMKTAYIA")] + PROTEIN_CASES[3:]

CONFIGS = {
    # head_dim 16, SwiGLU hidden = ESM C's rule (8/3 d rounded up to 256), F32, one file.
    "esmc_tiny": dict(hidden_size=48, num_hidden_layers=3, num_attention_heads=3, dtype="f32"),
    # head_dim 10 (not a multiple of 8), 2 layers, BF16 weights in two shards plus an index.
    "esmc_tiny_hd10": dict(hidden_size=40, num_hidden_layers=2, num_attention_heads=4, dtype="bf16"),
}


def swiglu_hidden(d):
    return int(((8 / 3) * d + 255) // 256 * 256)


def tokenize(seq):
    ids, i = [0], 0
    while i < len(seq):
        if seq[i] == "<":
            j = seq.index(">", i)
            ids.append(VOCAB.index(seq[i:j + 1]))
            i = j + 1
        else:
            ids.append(VOCAB.index(seq[i].upper()))
            i += 1
    return ids + [2]


def build(name, spec, out_root):
    torch.manual_seed(0)
    d = spec["hidden_size"]
    cfg = EsmcConfig(vocab_size=64, hidden_size=d, num_hidden_layers=spec["num_hidden_layers"],
                     num_attention_heads=spec["num_attention_heads"],
                     intermediate_size=swiglu_hidden(d), max_position_embeddings=2048)
    cfg._attn_implementation = "eager"
    model = EsmcForMaskedLM(cfg).eval()
    randomize(model, len(name), lambda n: "norm" in n)
    if spec["dtype"] == "bf16":  # weights representable in bf16, computed in fp32
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).to(torch.float32))

    out = os.path.join(out_root, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    if spec["dtype"] == "f32":
        model.save_pretrained(out, safe_serialization=True)
    else:
        cfg.save_pretrained(out)
        sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
        save_two_shards(sd, out, lambda t: t.to(torch.bfloat16))

    tok_ids = [tokenize(s) for _, s in CASES]
    # The upstream tokenizer must agree with the table above.
    hf_tok = EsmcTokenizer()
    for (cid, s), ids in zip(CASES, tok_ids):
        up = hf_tok(s.upper().replace("<MASK>", "<mask>"))["input_ids"]
        assert up == ids, (cid, up, ids)
    T = max(len(t) for t in tok_ids)
    ids = torch.full((len(CASES), T), 1, dtype=torch.long)
    am = torch.zeros((len(CASES), T), dtype=torch.long)
    for b, t in enumerate(tok_ids):
        ids[b, :len(t)] = torch.tensor(t)
        am[b, :len(t)] = 1

    taps = {}
    layer0 = model.esmc.layers[0]
    hooks = [
        layer0.input_layernorm.register_forward_hook(lambda m, i, o: taps.__setitem__("attn_ln", o)),
        layer0.self_attn.o_proj.register_forward_hook(lambda m, i, o: taps.__setitem__("attn_ctx", i[0])),
        layer0.post_attention_layernorm.register_forward_hook(lambda m, i, o: taps.__setitem__("attn_out", i[0])),
        layer0.mlp.down_proj.register_forward_hook(lambda m, i, o: taps.__setitem__("ffn_up", i[0])),
    ]
    with torch.no_grad():
        res = model(input_ids=ids, attention_mask=am, output_hidden_states=True)
        base = model.esmc(input_ids=ids, attention_mask=am)
        for h in hooks:
            h.remove()

    L = cfg.num_hidden_layers
    ref = {}
    for b, (cid, _) in enumerate(CASES):
        n = int(am[b].sum())
        ref[f"{cid}.input_ids"] = ids[b, :n].to(torch.float32)
        # bioinfer's layer convention: 0 = embedding, 1..L-1 = block outputs, L = after the final
        # LayerNorm. transformers' hidden_states[L] is block L's output before that norm.
        for l in range(L):
            ref[f"{cid}.hidden.{l}"] = res.hidden_states[l][b, :n]
        ref[f"{cid}.hidden.{L}"] = base.last_hidden_state[b, :n]
        ref[f"{cid}.logits"] = res.logits[b, :n]
        for k, v in taps.items():
            ref[f"{cid}.layer0.{k}"] = v[b, :n]
    save_reference(ref, os.path.join(out, "reference.safetensors"),
                   f"transformers {__import__('transformers').__version__}, torch {torch.__version__}")
    write_cases(out, name, L, CASES)
    print(f"wrote {out}")


def build_original(name, out_root):
    """The esm package's ESMC: d_model 128 = two 64-wide heads (ESM C's head width), 2 layers."""
    from esm.models.esmc import ESMC
    from esm.tokenization import get_esmc_model_tokenizers

    torch.manual_seed(0)
    tokenizer = get_esmc_model_tokenizers()
    model = ESMC(d_model=128, n_heads=2, n_layers=2, tokenizer=tokenizer, use_flash_attn=False).eval()
    randomize(model, len(name), lambda n: "norm" in n)
    with torch.no_grad():  # stored in bf16 like a compact release; computed in fp32
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    out = os.path.join(out_root, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "data", "weights"))
    sd = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    torch.save(sd, os.path.join(out, "data", "weights", f"{name}_v0.pth"))

    tok_ids = [tokenize(s) for _, s in CASES]
    for (cid, s), ids in zip(CASES, tok_ids):
        up = tokenizer(s.upper().replace("<MASK>", "<mask>"))["input_ids"]
        assert up == ids, (cid, up, ids)
    T = max(len(t) for t in tok_ids)
    ids = torch.full((len(CASES), T), 1, dtype=torch.long)
    for b, t in enumerate(tok_ids):
        ids[b, :len(t)] = torch.tensor(t)

    taps = {}
    block0 = model.transformer.blocks[0]
    hooks = [
        model.embed.register_forward_hook(lambda m, i, o: taps.__setitem__("embed", o)),
        block0.attn.layernorm_qkv[0].register_forward_hook(lambda m, i, o: taps.__setitem__("attn_ln", o)),
        block0.attn.out_proj.register_forward_hook(lambda m, i, o: taps.__setitem__("attn_ctx", i[0])),
        block0.ffn[0].register_forward_hook(lambda m, i, o: taps.__setitem__("attn_out", i[0])),
        block0.ffn[3].register_forward_hook(lambda m, i, o: taps.__setitem__("ffn_up", i[0])),
    ]
    with torch.no_grad():
        res = model(sequence_tokens=ids)
        for h in hooks:
            h.remove()
    L = len(model.transformer.blocks)
    ref = {}
    for b, (cid, _) in enumerate(CASES):
        n = len(tok_ids[b])
        ref[f"{cid}.input_ids"] = ids[b, :n].to(torch.float32)
        # ESMC returns the per-block outputs (before the final norm) and the normed embeddings.
        ref[f"{cid}.hidden.0"] = taps["embed"][b, :n]
        for l in range(1, L):
            ref[f"{cid}.hidden.{l}"] = res.hidden_states[l - 1][b, :n]
        ref[f"{cid}.hidden.{L}"] = res.embeddings[b, :n]
        ref[f"{cid}.logits"] = res.sequence_logits[b, :n]
        for k in ("attn_ln", "attn_ctx", "attn_out", "ffn_up"):
            ref[f"{cid}.layer0.{k}"] = taps[k][b, :n]
    save_reference(ref, os.path.join(out, "reference.safetensors"),
                   f"esm {__import__('esm').__version__}, torch {torch.__version__}")
    write_cases(out, name, L, CASES)
    print(f"wrote {out}")


class AttributeDict(dict):
    """A dict subclass, as Lightning's AttributeDict among a trainer checkpoint's options."""


class _Hostile:
    """Unpickling this runs a shell command: what a malicious checkpoint does."""

    def __reduce__(self):
        return (os.system, ("touch /tmp/bioinfer_pickle_was_executed",))


def build_hostile(out_root):
    """Checkpoints a loader must refuse without executing anything."""
    out = os.path.join(out_root, "hostile_checkpoints")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    torch.save({"embed.weight": torch.zeros(2, 2), "payload": _Hostile()}, os.path.join(out, "os_system.pth"))
    # A trainer checkpoint may carry objects among its options, never among its weights.
    torch.save({"state_dict": {"embed.weight": torch.zeros(2, 2), "payload": _Hostile()},
                "hyper_parameters": {"token_s": 8}}, os.path.join(out, "trainer_os_system.ckpt"))
    # A dict subclass (as Lightning's AttributeDict) among a trainer checkpoint's options: read
    # past, its items dropped, never constructed.
    torch.save({"state_dict": {"embed.weight": torch.zeros(2, 2)},
                "hyper_parameters": {"token_s": 8, "training_args": AttributeDict(max_lr=0.1),
                                     "tags": AttributeDict(a=[1, 2])}},
               os.path.join(out, "trainer_attribute_dict.ckpt"))
    good = os.path.join(out, "truncated.pth")
    torch.save({"embed.weight": torch.arange(4096, dtype=torch.float32)}, good)
    with open(good, "rb") as f:
        data = f.read()
    with open(good, "wb") as f:
        f.write(data[: len(data) // 2])
    print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    for name, spec in CONFIGS.items():
        build(name, spec, os.path.abspath(args.out))
    build_original("esmc_tiny_pth", os.path.abspath(args.out))
    build_hostile(os.path.abspath(args.out))


if __name__ == "__main__":
    main()
