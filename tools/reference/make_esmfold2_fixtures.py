#!/usr/bin/env python3
"""Builds a tiny random-weight ESMFold2 with Hugging Face transformers (EsmFold2Model: a 2-layer ESM C
tower, small widths, every stage of the released architecture: the SWA atom encoder with 3D RoPE,
the LM shim, the MSA encoder, the parcae recurrence with per-loop LM dropout, the diffusion module,
the sampler and the confidence head), runs it in fp32 on the CPU, and writes the parity fixture
the C++ tests read (tests/fixtures/esmfold2_tiny/).

The folder is a real model directory in the transformers layout (config.json, model.safetensors
with the ESM C tower under `esmc.`) plus reference.safetensors and cases.json. Every random draw of
the reference is recorded so a test can replay it: the initial pair state (trunc_normal_), the
per-loop LM dropout masks, the sampler's initial noise and per-step rotation, translation and churn
draws. Per case `<id>.`:

  feat.<name>            the featurised inputs as EsmFold2Model.fold takes them (batch dim dropped)
  lm.hidden              (L, layers + 1, D) the ESM C hidden states at the residues
  lm.pair                (L, L, C) the LM shim's pair output
  embed.single_inputs    (L, 451-like) s_inputs; embed.atom_embeds (A, c_atom) the atom encoder's
                         base embedding; embed.z_init, embed.relpos, embed.bonds (L, L, C)
  trunk.init             the initial pair state; trunk.dropout<k> (L, L, C) loop k's keep mask
  trunk.lm<k>, trunk.inject<k>, trunk.state<k>, trunk.z<k>
                         loop k: the refined LM pair, the injection (MSA encoder + LM), the parcae
                         state after the update, the pair after the folding trunk
  trunk.pair             (L, L, C) the decoded trunk output (fp32); trunk.distogram (L, L, bins)
  diff.pair_cond         (L, L, C) the diffusion conditioning's pair half; diff.bias<l> (H, L, L)
  diff.single_proj       (L, c_tok) the projected single inputs
  diff.call.{noisy,sigma,single,atom_tokens,tokens,update,denoised}
                         the sampler's first denoiser call: inputs, the single conditioning, the
                         atom encoder's token output, the token transformer's output, the
                         decoder's coordinate update and the denoised coordinates
  sample.x0_randn, sample.quat_randn (steps, S, 4), sample.trans_randn (steps, S, 1, 3),
  sample.eps_randn (steps, S, A, 3), sample.denoised (steps, S, A, 3), sample.coords (S, A, 3)
  conf.<name>            the confidence head's outputs (plddt_logits, plddt, plddt_per_atom,
                         plddt_ca, complex_plddt, complex_iplddt, pae_logits, pae, pde_logits, pde,
                         resolved_logits, ptm, iptm, pair_chains_iptm) and conf.pair (S, L, L, C)
                         after its trunk, conf.single (S, L, c_s)

    .venv-reference/bin/python tools/reference/make_esmfold2_fixtures.py [--out tests/fixtures]
"""
import argparse
import json
import math
import os
import shutil

import torch
import torch.nn.functional as F
from transformers import EsmFold2Config, EsmFold2Model
from transformers.models.esmfold2 import generation_esmfold2, modeling_esmfold2, protein_utils

from fixture_util import save_reference

NAME = "esmfold2_tiny"
# (id, chains separated by ':', extra MSA rows for the first chain: (aligned row, deletions before
# each column) pairs)
CASES = [
    ("mono", "MKTAYIAKQRQISFVKSHFXRQLW",
     [("MKTAYLAKQRQ-SFVKSHFARQLW", [0] * 5 + [2] + [0] * 12 + [1] + [0] * 5),
      ("MRT-YIAKERQISF--SHFSRQLW", [0] * 24),
      ("-KTAYIAKQRQISFVKAHFSRQL-", [0] * 10 + [7] + [0] * 13)]),
    ("dimer", "MKVLAAGIVG:MKVLAAGIVG:GSHMEKR", []),
]
SAMPLES = 2
STEPS = 8  # the Karras schedule's length; the cap at sigma 256 leaves fewer steps


def config():
    atom = dict(hidden_size=32, output_dim=32, num_hidden_layers=2, num_attention_heads=1,
                intermediate_size=64, num_spatial_rope_pairs_per_axis=2, num_uid_rope_pairs=8)
    diff_atom = dict(atom, output_dim=32)
    cfg = EsmFold2Config(
        hidden_size=24, pairwise_hidden_size=16, single_inputs_size=32 + 67,
        pair_transition_intermediate_size=32, sliding_window=24, chunk_size=None, num_loops=2,
        folding_trunk_num_hidden_layers=2, parcae_num_coda_layers=1,
        atom_encoder=atom,
        structure_head=dict(
            diffusion_module=dict(sigma_data=16.0, hidden_size=32, fourier_dim=16,
                                  num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                  pair_intermediate_size=32, atom_encoder=diff_atom),
            num_distogram_bins=16, num_diffusion_samples=SAMPLES, gamma_0=0.8, gamma_min=1.0,
            noise_scale=1.003, step_scale=1.5, inference_sigma_max_ratio=160.0,
            inference_sigma_min_ratio=4e-4, inference_exponent=7.0, inference_num_steps=STEPS,
            inference_sigma_cap=256.0),
        confidence_head=dict(num_hidden_layers=1, num_plddt_bins=10, num_pde_bins=16,
                             num_pae_bins=16, distogram_bins=16),
        msa_encoder=dict(hidden_size=16, outer_hidden_size=4, num_hidden_layers=2,
                         num_attention_heads=2, head_dim=8, intermediate_size=32),
        lm_encoder=dict(num_hidden_layers=1, lm_dropout=0.25, per_loop_lm_dropout=True),
        esmc_config=dict(model_type="esmc", hidden_size=32, intermediate_size=96,
                         num_hidden_layers=2, num_attention_heads=2, vocab_size=64),
    )
    cfg._attn_implementation = "eager"
    cfg.esmc_config._attn_implementation = "eager"
    return cfg


def randomize(model, seed):
    """Every parameter redrawn (the released initialisation zeroes gates and heads, which would hide
    whole stages): LayerNorm weights near 1, biases small, matrices with unit-variance outputs,
    the parcae recurrence's log-parameters near their trained range."""
    g = torch.Generator().manual_seed(seed)
    norms = {f"{mn}.{pn}" for mn, m in model.named_modules() if isinstance(m, torch.nn.LayerNorm)
             for pn, _ in m.named_parameters(recurse=False)}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in norms or name.endswith(("norm.weight", "norm.bias")):
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(("log_state_decay", "log_delta")):
                p.copy_(-0.5 + 0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith("layer_weights"):
                p.copy_(torch.randn(p.shape, generator=g))
            elif name.endswith("bias") or p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                fan_in = p.shape[-2] if name.endswith(("plddt_weight", "resolved_weight")) else p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)


def write_a3m(path, query, msa_rows):
    """The query, then each row with its deletion counts written back as lower-case insertions
    ('a' repeated d times) before the residue they precede, as a3m files hold them."""
    lines = [">query", query]
    for k, (row, dels) in enumerate(msa_rows):
        lines += [f">r{k + 1}", "".join("a" * d + c for c, d in zip(row, dels))]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def featurize(chains, msa_rows):
    """EsmFold2Model.fold's inputs for protein chains, as protein_utils builds one chain: chains
    concatenated, residue_index restarting per chain, token_index and ref_space_uid running over the
    complex; entity_id per distinct sequence (first seen first), sym_id the copy within it. The
    first chain's MSA rows (aligned to it, the other chains gapped) follow the query row."""
    per = [protein_utils.prepare_protein_features(c) for c in chains]
    entities, copies = {}, {}
    tok = {k: [] for k in ("token_index", "residue_index", "asym_id", "sym_id", "entity_id",
                           "mol_type", "res_type", "input_ids", "distogram_atom_idx")}
    atoms = {k: [] for k in ("ref_pos", "ref_element", "ref_charge", "ref_atom_name_chars",
                             "ref_space_uid", "atom_to_token")}
    t0 = a0 = 0
    for ci, (seq, f) in enumerate(zip(chains, per)):
        f = {k: v[0] for k, v in f.items()}
        L = len(seq)
        ent = entities.setdefault(seq, len(entities))
        sym = copies.get(seq, 0)
        copies[seq] = sym + 1
        tok["token_index"].append(torch.arange(L) + t0)
        tok["residue_index"].append(torch.arange(L))
        tok["asym_id"].append(torch.full((L,), ci))
        tok["sym_id"].append(torch.full((L,), sym))
        tok["entity_id"].append(torch.full((L,), ent))
        tok["mol_type"].append(f["mol_type"])
        tok["res_type"].append(f["res_type"])
        tok["input_ids"].append(f["input_ids"])
        n = int(f["atom_attention_mask"].sum())
        tok["distogram_atom_idx"].append(f["distogram_atom_idx"] + a0)
        atoms["ref_pos"].append(f["ref_pos"][:n])
        atoms["ref_element"].append(f["ref_element"][:n])
        atoms["ref_charge"].append(f["ref_charge"][:n])
        atoms["ref_atom_name_chars"].append(f["ref_atom_name_chars"][:n])
        atoms["ref_space_uid"].append(f["ref_space_uid"][:n] + t0)
        atoms["atom_to_token"].append(f["atom_to_token"][:n] + t0)
        t0 += L
        a0 += n
    out = {k: torch.cat(v) for k, v in tok.items()}
    A = math.ceil(a0 / 32) * 32
    for k, v in atoms.items():
        v = torch.cat(v)
        pad = torch.zeros((A - a0, *v.shape[1:]), dtype=v.dtype)
        out[k] = torch.cat([v, pad])
    out["atom_attention_mask"] = torch.arange(A) < a0
    L = t0
    out["token_bonds"] = torch.zeros(L, L, 1)
    out["attention_mask"] = torch.ones(L, dtype=torch.bool)
    # MSA: the query, then the first chain's rows
    rows, dels = [out["res_type"]], [torch.zeros(L)]
    for row, d in msa_rows:
        r = out["res_type"].clone()
        for i, c in enumerate(row):
            r[i] = 1 if c == "-" else protein_utils.PROTEIN_RESIDUE_TO_RES_TYPE.get(
                protein_utils.PROTEIN_1TO3.get(c, "UNK"), 22)
        n0 = len(chains[0])
        r[n0:] = 1
        rows.append(r)
        dels.append(torch.tensor(d + [0] * (L - n0), dtype=torch.float32))
    out["msa"] = torch.stack(rows)
    dv = torch.stack(dels)
    out["has_deletion"] = dv > 0
    # the esm package's ESMFold2 builder (paired_msa.py): pi/2 atan(d / 3), not AlphaFold3's 2/pi,
    # and the mean of the transformed values over the rows
    out["deletion_value"] = (math.pi / 2.0) * torch.atan(dv / 3.0)
    out["msa_attention_mask"] = torch.ones_like(out["msa"], dtype=torch.bool)
    out["deletion_mean"] = out["deletion_value"].mean(0)
    return {k: v.unsqueeze(0) for k, v in out.items()}


class Recorder:
    """Hooks and patches that record the reference's intermediates and random draws."""

    def __init__(self, model):
        self.model = model
        self.r = {}
        self.loop = {"lm": [], "inject": [], "state": [], "z": [], "dropout": []}
        self.draws = []
        self.calls = []
        self.hooks = []

    def __enter__(self):
        m = self.model
        r = self.r

        def keep(name, fn=lambda o: o):
            return lambda mod, i, o: r.__setitem__(name, fn(o))

        self.hooks += [
            m.language_model.register_forward_hook(keep("lm.pair")),
            m.input_embedder.register_forward_hook(
                lambda mod, i, o: r.update({"embed.single_inputs": o[0], "embed.z_init": o[1],
                                            "embed.relpos": o[2], "embed.bonds": o[3]})),
            m.lm_encoder.register_forward_hook(lambda mod, i, o: self.loop["lm"].append(o)),
            m.folding_trunk.register_forward_hook(lambda mod, i, o: self.loop["z"].append(o)),
            m.parcae.register_forward_hook(self._parcae),
            m.confidence_head.row_attention_pooling.register_forward_hook(
                lambda mod, i, o: r.update({"conf.pair": i[0], "conf.single": o})),
        ]
        enc = m.input_embedder.atom_encoder
        embed_atoms = enc.embed_atoms

        def embed_atoms_rec(atom_inputs):
            out = embed_atoms(atom_inputs)
            r.setdefault("embed.atom_embeds", out[0])
            return out
        enc.embed_atoms = embed_atoms_rec

        lm_hidden = m._compute_lm_hidden_states

        def lm_hidden_rec(*a, **k):
            out = lm_hidden(*a, **k)
            r["lm.hidden"] = out
            return out
        m._compute_lm_hidden_states = lm_hidden_rec

        init_pair = m._init_pair_state

        def init_pair_rec(ref):
            out = init_pair(ref)
            r["trunk.init"] = out
            return out
        m._init_pair_state = init_pair_rec

        self.dropout = F.dropout

        def dropout_rec(x, p=0.5, training=True, inplace=False):
            out = self.dropout(x, p, training, inplace)
            if training and p > 0:  # the per-loop LM dropout (attention dropout runs with p 0)
                self.loop["dropout"].append(((out != 0) | (x == 0)).float())
            return out
        modeling_esmfold2.F.dropout = dropout_rec

        head = m.structure_head
        prep = head.prepare_conditioning

        def prep_rec(*a, **k):
            c = prep(*a, **k)
            for l, b in enumerate(c.token_attention_bias):
                r[f"diff.bias{l}"] = b
            r["diff.single_proj"] = c.projected_single_inputs
            return c
        head.prepare_conditioning = prep_rec
        self.hooks.append(head.conditioning.register_forward_hook(
            lambda mod, i, o: self.calls.append({"single": o}) if len(self.calls) == 0 else None))
        cpr = head.conditioning.compute_pair_repr

        def cpr_rec(pair_trunk, relative_position_encoding):
            out = cpr(pair_trunk, relative_position_encoding)
            r["trunk.pair"] = pair_trunk  # the decoded trunk output fold hands on
            r["diff.pair_cond"] = out
            return out
        head.conditioning.compute_pair_repr = cpr_rec
        self.hooks += [
            head.atom_encoder.register_forward_hook(self._first("atom_tokens", lambda o: o[0])),
            head.token_transformer.register_forward_hook(self._first("tokens")),
            head.atom_decoder.register_forward_hook(self._first("update")),
        ]
        self.randn, self.randn_like = torch.randn, torch.randn_like

        def randn_rec(*a, **k):
            out = self.randn(*a, **k)
            self.draws.append(out.clone())
            return out

        def randn_like_rec(*a, **k):
            out = self.randn_like(*a, **k)
            self.draws.append(out.clone())
            return out
        generation_esmfold2.torch.randn = randn_rec
        generation_esmfold2.torch.randn_like = randn_like_rec
        return self

    def _parcae(self, mod, i, o):
        self.loop["state"].append(o)
        self.loop["inject"].append(i[1])

    def _first(self, name, fn=lambda o: o):
        def hook(mod, i, o):
            if len(self.calls) == 1 and name not in self.calls[0]:
                self.calls[0][name] = fn(o)
        return hook

    def __exit__(self, *exc):
        for h in self.hooks:
            h.remove()
        for attr in ("embed_atoms",):
            self.model.input_embedder.atom_encoder.__dict__.pop(attr, None)
        for attr in ("_compute_lm_hidden_states", "_init_pair_state"):
            self.model.__dict__.pop(attr, None)
        self.model.structure_head.__dict__.pop("prepare_conditioning", None)
        self.model.structure_head.conditioning.__dict__.pop("compute_pair_repr", None)
        modeling_esmfold2.F.dropout = self.dropout
        generation_esmfold2.torch.randn = self.randn
        generation_esmfold2.torch.randn_like = self.randn_like


def run_case(model, cid, seq, msa_rows):
    feats = featurize(seq.split(":"), msa_rows)
    denoiser_io = []
    head = model.structure_head
    h = head.register_forward_hook(
        lambda mod, args, kwargs, out: denoiser_io.append(
            (kwargs["noisy_coords"].clone(), kwargs["noise_level"].clone(), out.clone())),
        with_kwargs=True)
    with Recorder(model) as rec, torch.no_grad():
        out = model.fold(**feats, num_diffusion_samples=SAMPLES, num_sampling_steps=STEPS)
    h.remove()
    p = f"{cid}."
    ref = {}
    for k, v in feats.items():
        ref[p + "feat." + k] = v[0].float()
    for k, v in rec.r.items():
        ref[p + k] = v[0] if k not in ("conf.pair", "conf.single") else v
    for k in ("lm", "inject", "state", "z", "dropout"):
        for i, v in enumerate(rec.loop[k]):
            ref[p + f"trunk.{k}{i}"] = v[0]
    call = rec.calls[0]
    noisy, sigma, den = denoiser_io[0]
    ref[p + "diff.call.noisy"] = noisy
    ref[p + "diff.call.sigma"] = sigma
    ref[p + "diff.call.single"] = call["single"]
    ref[p + "diff.call.atom_tokens"] = call["atom_tokens"]
    ref[p + "diff.call.tokens"] = call["tokens"]
    ref[p + "diff.call.update"] = call["update"]
    ref[p + "diff.call.denoised"] = den
    steps = len(denoiser_io)
    draws = rec.draws
    assert len(draws) == 1 + 3 * steps, (len(draws), steps)
    ref[p + "sample.x0_randn"] = draws[0]
    ref[p + "sample.quat_randn"] = torch.stack(draws[1::3])
    ref[p + "sample.trans_randn"] = torch.stack(draws[2::3])
    ref[p + "sample.eps_randn"] = torch.stack(draws[3::3])
    ref[p + "sample.denoised"] = torch.stack([d for _, _, d in denoiser_io])
    ref[p + "sample.sigma"] = torch.stack([s[0] for _, s, _ in denoiser_io])
    ref[p + "sample.coords"] = out.sample_atom_coords
    ref[p + "trunk.distogram"] = out.distogram_logits[0]
    for k in ("plddt_logits", "plddt", "plddt_per_atom", "plddt_ca", "complex_plddt",
              "complex_iplddt", "pae_logits", "pae", "pde_logits", "pde", "resolved_logits", "ptm",
              "iptm", "pair_chains_iptm"):
        ref[p + "conf." + k] = getattr(out, k)
    return ref


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = EsmFold2Model(config()).eval()
    randomize(model, 7)
    out = os.path.join(os.path.abspath(args.out), NAME)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    model.save_pretrained(out, safe_serialization=True)

    ref = {}
    for cid, seq, msa_rows in CASES:
        torch.manual_seed(1)
        r = run_case(model, cid, seq, msa_rows)
        ref.update(r)
        print(f"{cid}: {len(r)} tensors", flush=True)
    save_reference(ref, os.path.join(out, "reference.safetensors"),
                   f"transformers {__import__('transformers').__version__}, torch {torch.__version__}")
    cases = []
    for cid, seq, msa_rows in CASES:
        cases.append({"id": cid, "sequence": seq})
        if msa_rows:  # the MSA the reference folded, as an a3m the parser must turn back into it
            write_a3m(os.path.join(out, f"{cid}.a3m"), seq, msa_rows)
            cases[-1]["msa"] = f"{cid}.a3m"
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"model": NAME, "samples": SAMPLES, "steps": STEPS, "cases": cases}, f, indent=2)
        f.write("\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
