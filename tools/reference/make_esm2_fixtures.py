#!/usr/bin/env python3
"""Builds tiny random-weight ESM-2 models with Hugging Face transformers, runs them, and writes
the parity fixtures the C++ tests read (tests/fixtures/esm2_*/).

Each fixture folder is a real model directory (config.json, safetensors weights, tokenizer vocab)
plus reference.safetensors (per-sequence input ids, every hidden state, logits, contacts, and
layer-0 module intermediates) and cases.json (the sequences).

    .venv-reference/bin/python tools/reference/make_esm2_fixtures.py [--out tests/fixtures]
"""
import argparse
import os
import shutil

import torch
from transformers import EsmConfig, EsmForMaskedLM, EsmTokenizer

from fixture_util import ESM2_ALPHABET, PROTEIN_CASES, randomize, save_reference, save_two_shards, write_cases

ALPHABET = ESM2_ALPHABET
CASES = PROTEIN_CASES

CONFIGS = {
    # head_dim 8; saved by save_pretrained (model-level inv_freq, tied decoder omitted), F32.
    "esm2_tiny": dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                      intermediate_size=64, layout="save_pretrained", dtype="f32"),
    # head_dim 12 (not a multiple of 8); old checkpoint layout (per-layer fp16 inv_freq, explicit
    # decoder weight), BF16 weights, two shards with an index.
    "esm2_tiny_hd12": dict(hidden_size=36, num_hidden_layers=2, num_attention_heads=3,
                           intermediate_size=72, layout="legacy_sharded", dtype="bf16"),
}


def write_vocab(path):
    with open(path, "w") as f:
        f.write("\n".join(ALPHABET) + "\n")


def build(name, spec, out_root):
    torch.manual_seed(0)
    cfg = EsmConfig(vocab_size=33, hidden_size=spec["hidden_size"],
                    num_hidden_layers=spec["num_hidden_layers"],
                    num_attention_heads=spec["num_attention_heads"],
                    intermediate_size=spec["intermediate_size"], hidden_act="gelu",
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                    max_position_embeddings=1026, position_embedding_type="rotary",
                    layer_norm_eps=1e-5, emb_layer_norm_before=False, token_dropout=True,
                    mask_token_id=32, pad_token_id=1, tie_word_embeddings=True)
    cfg._attn_implementation = "eager"
    model = EsmForMaskedLM(cfg).eval()
    randomize(model, len(name), lambda n: "LayerNorm" in n or "layer_norm" in n)
    if spec["dtype"] == "bf16":  # weights representable in bf16, computed in fp32
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
    inv = model.esm.rotary_embeddings.inv_freq
    if spec["layout"] == "legacy_sharded":  # older checkpoints stored inv_freq in fp16
        with torch.no_grad():
            inv.copy_(inv.to(torch.float16).to(torch.float32))

    out = os.path.join(out_root, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    if spec["layout"] == "save_pretrained":
        model.save_pretrained(out, safe_serialization=True)
    else:
        cfg.save_pretrained(out)
        sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
        sd.pop("esm.rotary_embeddings.inv_freq")
        for i in range(cfg.num_hidden_layers):
            sd[f"esm.encoder.layer.{i}.attention.self.rotary_embeddings.inv_freq"] = inv.to(torch.float16)
        sd["lm_head.decoder.weight"] = model.lm_head.decoder.weight.detach().clone()
        save_two_shards(sd, out, lambda t: t.to(torch.bfloat16) if t.dtype == torch.float32 else t)
    write_vocab(os.path.join(out, "vocab.txt"))
    tok = EsmTokenizer(os.path.join(out, "vocab.txt"))

    seqs = [s.upper().replace("<MASK>", "<mask>") for _, s in CASES]
    enc = tok(seqs, padding=True, return_tensors="pt")
    ids, am = enc["input_ids"], enc["attention_mask"]

    taps = {}
    layer0 = model.esm.encoder.layer[0]
    hooks = [
        layer0.attention.LayerNorm.register_forward_hook(lambda m, i, o: taps.__setitem__("attn_ln", o)),
        layer0.attention.self.register_forward_hook(lambda m, i, o: taps.__setitem__("attn_ctx", o[0])),
        layer0.attention.register_forward_hook(lambda m, i, o: taps.__setitem__("attn_out", o)),
        layer0.intermediate.register_forward_hook(lambda m, i, o: taps.__setitem__("ffn_up", o)),
    ]
    with torch.no_grad():
        res = model(input_ids=ids, attention_mask=am, output_hidden_states=True)
        for h in hooks:
            h.remove()
        contacts = model.predict_contacts(ids, am)

    ref = {}
    for b, (cid, _) in enumerate(CASES):
        n = int(am[b].sum())
        L = n - 2
        ref[f"{cid}.input_ids"] = ids[b, :n].to(torch.float32)
        for l, h in enumerate(res.hidden_states):
            ref[f"{cid}.hidden.{l}"] = h[b, :n]
        ref[f"{cid}.logits"] = res.logits[b, :n]
        ref[f"{cid}.contacts"] = contacts[b, :L, :L]
        for k, v in taps.items():
            ref[f"{cid}.layer0.{k}"] = v[b, :n]
    save_reference(ref, os.path.join(out, "reference.safetensors"),
                   f"transformers {__import__('transformers').__version__}, torch {torch.__version__}")
    write_cases(out, name, cfg.num_hidden_layers, CASES)
    print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    for name, spec in CONFIGS.items():
        build(name, spec, os.path.abspath(args.out))


if __name__ == "__main__":
    main()
