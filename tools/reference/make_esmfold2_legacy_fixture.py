#!/usr/bin/env python3
"""Rewrites the tiny ESMFold2 fixture (tests/fixtures/esmfold2_tiny/, transformers 5.24
`EsmFold2Model` layout, ESM C tower bundled under `esmc.`) into ESMFold2's OLD research
checkpoint layout, the one biohub/ESMFold2 shipped before transformers did:

  tests/fixtures/esmfold2_tiny_legacy/
    config.json             the old nested config ("type": "release", d_single, d_pair, inputs{...},
                            folding_trunk{...}, parcae{...}, structure_head{...}, ..., dtype;
                            no model_type)
    model.safetensors       the trunk only, in the research key names, with the packed tensors
                            the research modules hold (atom attn.Wqkv, token kv_proj, unfused
                            conditioning a_proj/b_proj), plus the three dead confidence tensors
                            (confidence_head.s_norm / s_inputs_to_single / s_input_to_s) that a
                            loader has to drop
    esmc/config.json        the old ESM C config (d_model, n_heads, n_layers, ...)
    esmc/model.safetensors  the ESM C tower in TransformerEngine names under `esmc.`
                            (attn.layernorm_qkv.*, ffn.fc1_weight, ...), with the empty
                            `_extra_state` entries TE writes, and a random masked-LM head
                            `lm_head.{0,2,3}.*` stored without the `esmc.` prefix

Every tensor is the fixture's own (split or concatenated along rows, never transposed or
scaled), so a loader that maps this folder back onto the transformers layout has to reproduce
tests/fixtures/esmfold2_tiny/model.safetensors bit for bit, and its folds must match that
fixture's reference. Only the dead confidence tensors and the masked-LM head are new random
draws (fixed seed).

Where the new -> old key mapping comes from. It is NOT the inverse of the R-rules in the
old -> new renames of transformers' conversion (as bioinfer's
src/models/esmfold2/legacy.cpp applies them); it restates Biohub's own table, which reads the transformers
port into the research layout:
  - trunk: esm/models/esmfold2/hf_checkpoint.py in Biohub/esm (`_KEY_RULES`, `_PACKED` and the
    a_proj split in `hf_state_dict_to_native`), commit cbdc4ba2c3ea1ae2667247b3b9eb68918abb087d;
  - ESM C tower: esm/models/esmc/checkpoint_layout.py (`_ROOT`, `_BLOCK`, `_FUSED`, `_LM_HEAD`),
    which hf_checkpoint.py calls through `published_to_native_subtree`.
The script then checks the result against transformers' conversion rules (old -> new), implemented here
independently: the trunk renames R01..R61 with the drops, the q/k/v and k/v splits (S1/S2) and the
a/b fusion (F1); the tower's renames and splits; the config mapping. The checks assert that the forward rules
rebuild the fixture's state dict exactly (same key set, every tensor bit-equal, every new key made
from exactly one old tensor or one split/fusion, no old tensor unused except the dead/dropped
ones), that the old configs map back onto an EsmFold2Config/EsmcConfig equal to the fixture's,
and that EsmFold2Model built from that config loads the rebuilt state dict strictly.

Where Biohub's table and the conversion differ:
  - State-dict keys: nowhere. Biohub's new -> old table composed with the conversion's old -> new rules
    is the identity on every key of this fixture (asserted), and both agree on the packing
    orders (atom Wqkv rows q|k|v, token kv_proj rows k|v, conditioning gate_up = a_proj|b_proj,
    ESM C layernorm_qkv rows q|k|v and fc1 rows gate|up).
  - The dead confidence tensors: Biohub's table never produces them (it only reads the port),
    and the conversion does not know their sub-keys; the `.weight` names and shapes here are guesses.
  - Config: Biohub's esm/models/esmfold2/config.py (`_LEGACY_PATHS`) maps the old
    `inputs.atom_encoder.d_token` onto ITS `atom_encoder.output_dim` (default 768, the full token
    width; the research inputs embedder aggregates to d_token // 2), whereas 5.24's
    `atom_encoder.output_dim` is the aggregated width (= single_inputs_size - 67) and the conversion
    drops d_token. Same name, values 2x apart: the old config here carries
    d_token = 2 * output_dim. Biohub also keeps the MSA width as `head_width` where 5.24 says
    `head_dim`, and its `num_loops` default is 20 where the research fork's is 10 (every value
    is explicit here, so defaults never apply).

Widths the old config cannot carry. The fixture's pair/MSA transition widths (2x) differ from
the research code's hard-coded 4x, and its atom SwiGLU width (64) is not the esm
`swiglu_correction_fn(expansion_ratio, d_atom)` value (256): a loader has to read those widths
from tensor shapes, as the conversion recommends; the checks here do the same. The old
`inputs.atom_encoder.expansion_ratio` is written as intermediate_size / d_atom. The runtime-only
`chunk_size` (the fixture's null) has no old source and is left out of the config comparison.

    .venv-reference/bin/python tools/reference/make_esmfold2_legacy_fixture.py
"""
import json
import os
import re
import shutil

import torch
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SRC = os.path.join(ROOT, "tests", "fixtures", "esmfold2_tiny")
OUT = os.path.join(ROOT, "tests", "fixtures", "esmfold2_tiny_legacy")
SEED = 20250517
ESMC = "esmc."
META = {"format": "pt"}

# ------------------------------------------------------------------------------------------------
# new -> old, after Biohub's hf_checkpoint.py (trunk) and checkpoint_layout.py (ESM C tower)
# ------------------------------------------------------------------------------------------------

# (pattern, replacement) for re.sub, applied in this order to every trunk key. Later rules see the
# output of earlier ones, so the order carries meaning (e.g. the token transformer's layers are
# split into attn_blocks / transition_blocks before the generic layers -> blocks rule runs).
HF_TO_RESEARCH = (
    # inputs embedder: the atom encoder is re-parented, the rest sits at the root
    (r"^input_embedder\.atom_encoder\.", "inputs_embedder.atom_attention_encoder."),
    (r"^input_embedder\.pair_init_", "z_init_"),
    (r"^input_embedder\.", ""),
    # the structure head regains its diffusion_module level; coords_linear moves into its
    # atom encoder
    (r"^structure_head\.coords_linear\.",
     "structure_head.diffusion_module.atom_encoder.coords_linear."),
    (r"^structure_head\.(?!diffusion_module\.)", "structure_head.diffusion_module."),
    (r"^structure_head\.diffusion_module\.single_", "structure_head.diffusion_module.s_"),
    # diffusion conditioning: pair/single -> z/s, numbered transitions -> lists
    (r"\.conditioning\.pair_transition_(\d+)\.", r".conditioning.z_transitions.\1."),
    (r"\.conditioning\.single_transition_(\d+)\.", r".conditioning.s_transitions.\1."),
    (r"\.conditioning\.pair_", ".conditioning.z_"),
    (r"\.conditioning\.single_", ".conditioning.s_"),
    (r"(_transitions\.\d+)\.mlp\.gate_up_proj", r"\1.a_proj"),  # split into a/b below
    (r"(_transitions\.\d+)\.mlp\.down_proj", r"\1.out_proj"),
    (r"\.fourier\.frequencies$", ".fourier.w"),
    (r"\.fourier\.phases$", ".fourier.b"),
    # atom transformers (inputs embedder, diffusion encoder and decoder)
    (r"(atom_(?:attention_)?(?:encoder|decoder))\.layers\.(\d+)\.",
     r"\1.atom_transformer.blocks.\2."),
    (r"(\.atom_transformer\.blocks\.\d+)\.self_attn\.", r"\1.attn."),
    (r"(\.atom_transformer\.blocks\.\d+)\.mlp\.gate_up_proj", r"\1.ffn.w_up"),
    (r"(\.atom_transformer\.blocks\.\d+)\.mlp\.down_proj", r"\1.ffn.w_down"),
    (r"(\.atom_transformer\.blocks\.\d+)\.adaln_linear", r"\1.adaln_modulation.1"),
    # diffusion token transformer: layers.i -> attn_blocks.i + transition_blocks.i
    (r"\.token_transformer\.layers\.(\d+)\.input_layernorm\.",
     r".token_transformer.attn_blocks.\1.adaln.s_"),
    (r"\.token_transformer\.layers\.(\d+)\.post_attention_layernorm\.",
     r".token_transformer.transition_blocks.\1.adaln.s_"),
    (r"\.token_transformer\.layers\.(\d+)\.attn_gate\.",
     r".token_transformer.attn_blocks.\1.out_gate."),
    (r"\.token_transformer\.layers\.(\d+)\.mlp_gate\.",
     r".token_transformer.transition_blocks.\1.output_gate."),
    (r"\.token_transformer\.layers\.(\d+)\.mlp\.gate_up_proj",
     r".token_transformer.transition_blocks.\1.lin_swish"),
    (r"\.token_transformer\.layers\.(\d+)\.mlp\.down_proj",
     r".token_transformer.transition_blocks.\1.lin_out"),
    (r"\.token_transformer\.layers\.(\d+)\.(pair_norm|pair_bias_proj)\.",
     r".token_transformer.attn_blocks.\1.\2."),
    (r"\.token_transformer\.layers\.(\d+)\.self_attn\.", r".token_transformer.attn_blocks.\1."),
    (r"\.adaln\.s_cond_norm\.weight$", ".adaln.s_scale"),
    (r"(\.adaln\.s_(?:gate|shift))_proj", r"\1"),
    (r"(\.attn_blocks\.\d+\.)gate_proj", r"\1g_proj"),
    # parcae: a submodule in the port, loose parcae_* attributes in the research model
    (r"^parcae\.output_stack\.layers\.", "parcae_coda.blocks."),
    (r"^parcae\.out_proj", "parcae_readout"),
    (r"^parcae\.input_matrix_continuous", "parcae_b_cont"),
    (r"^parcae\.log_state_decay", "parcae_log_a"),
    (r"^parcae\.", "parcae_"),
    # pair stacks (folding trunk, LM encoder, parcae coda, MSA encoder, confidence trunk)
    (r"\.layers\.(\d+)\.", r".blocks.\1."),
    (r"\.(tri_mul_(?:in|out))\.", r".\1._engine."),
    (r"\.mlp\.gate_up_proj", ".ffn.w12"),
    (r"\.mlp\.down_proj", ".ffn.w3"),
    # MSA encoder
    (r"\.msa_pair_weighted_averaging\.bias_norm\.",
     ".msa_pair_weighted_averaging.compute_bias.0."),
    (r"\.msa_pair_weighted_averaging\.bias_proj\.",
     ".msa_pair_weighted_averaging.compute_bias.1."),
    (r"\.msa_pair_weighted_averaging\.(gate|v)_proj\.", r".msa_pair_weighted_averaging.W\1."),
    (r"\.msa_pair_weighted_averaging\.o_proj\.", ".msa_pair_weighted_averaging.Wout."),
    (r"\.outer_product_mean\.input_proj\.", ".outer_product_mean.W."),
    (r"\.outer_product_mean\.output_proj\.", ".outer_product_mean.Wout."),
    # confidence head: a flat input embedder, short layer-norm names
    (r"^confidence_head\.input_embedder\.single_inputs_norm", "confidence_head.s_inputs_norm"),
    (r"^confidence_head\.input_embedder\.single_to_pair", "confidence_head.s_to_z"),
    (r"^confidence_head\.input_embedder\.pair_norm", "confidence_head.z_norm"),
    (r"^confidence_head\.(\w+)_layernorm\.", r"confidence_head.\1_ln."),
    # LM shim: two nn.Sequentials in the research model
    (r"^language_model\.pair_input_norm", "language_model.base_z_linear.0"),
    (r"^language_model\.pair_proj", "language_model.base_z_linear.1"),
    (r"^language_model\.pair_output_norm", "language_model.base_z_mlp.1"),
    (r"^language_model\.single_to_pair\.output_fc1", "language_model.base_z_mlp.0.output_mlp.0"),
    (r"^language_model\.single_to_pair\.output_fc2", "language_model.base_z_mlp.0.output_mlp.2"),
    (r"^language_model\.single_to_pair\.", "language_model.base_z_mlp.0."),
    (r"^language_model\.layer_weights$", "language_model.base_z_combine"),
    # attention projections the research model packs (joined below)
    (r"\.attn\.[qkv]_proj\.weight$", ".attn.Wqkv.weight"),
    (r"\.attn_blocks\.(\d+)\.[kv]_proj\.weight$", r".attn_blocks.\1.kv_proj.weight"),
    (r"\.o_proj\.weight$", ".out_proj.weight"),
)

# packed research tensor (by suffix) -> the port's projections, in row order
PACKED = {".attn.Wqkv.weight": ("q", "k", "v"), ".kv_proj.weight": ("k", "v")}

# ESM C, port name -> TransformerEngine name (checkpoint_layout.py); under `esmc.`
ESMC_ROOT = {"embed_tokens.weight": "embed.weight", "norm.weight": "transformer.norm.weight"}
ESMC_BLOCK = {
    "input_layernorm.weight": "attn.layernorm_qkv.layer_norm_weight",
    "input_layernorm.bias": "attn.layernorm_qkv.layer_norm_bias",
    "self_attn.q_norm.weight": "attn.q_ln.weight",
    "self_attn.k_norm.weight": "attn.k_ln.weight",
    "self_attn.o_proj.weight": "attn.out_proj.weight",
    "post_attention_layernorm.weight": "ffn.layer_norm_weight",
    "post_attention_layernorm.bias": "ffn.layer_norm_bias",
    "mlp.down_proj.weight": "ffn.fc2_weight",
}
ESMC_FUSED = {
    "attn.layernorm_qkv.weight": ("self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                  "self_attn.v_proj.weight"),
    "ffn.fc1_weight": ("mlp.gate_proj.weight", "mlp.up_proj.weight"),
}
# TransformerEngine module state, written as empty uint8 tensors
ESMC_EXTRA_STATE = ("attn.layernorm_qkv._extra_state", "attn.out_proj._extra_state",
                    "ffn._extra_state")

DEAD_CONFIDENCE = ("confidence_head.s_norm.", "confidence_head.s_inputs_to_single.",
                   "confidence_head.s_input_to_s.")


def to_research_key(key):
    for pattern, repl in HF_TO_RESEARCH:
        key = re.sub(pattern, repl, key)
    return key


def trunk_to_research(new_trunk):
    """The port's trunk tensors under the research names, packed as the research model holds
    them. Raises on a name collision or an incomplete packed projection."""
    out, packed = {}, {}

    def emit(key, tensor):
        assert key not in out, f"two tensors map onto {key}"
        out[key] = tensor

    for key, tensor in new_trunk.items():
        old = to_research_key(key)
        suffix = next((s for s in PACKED if old.endswith(s)), None)
        if suffix is not None:
            part = key.rsplit(".", 2)[-2][0]  # q_proj -> q
            parts = packed.setdefault(old, (PACKED[suffix], {}))[1]
            assert part not in parts, f"two {part} parts for {old}"
            parts[part] = tensor
        elif old.endswith(".a_proj.weight"):
            # the conditioning transitions keep gate (a) and up (b) as two linears
            gate, up = torch.chunk(tensor, 2, dim=0)
            emit(old, gate.clone())
            emit(old.replace(".a_proj.", ".b_proj."), up.clone())
        else:
            emit(old, tensor)
    for old, (order, parts) in packed.items():
        assert set(parts) == set(order), f"{old}: parts {sorted(parts)}, need {order}"
        emit(old, torch.cat([parts[p] for p in order], dim=0))
    return out


def esmc_to_research(new_esmc):
    """The port's `esmc.` tower under TransformerEngine names (still `esmc.`-prefixed)."""
    out, blocks = {}, {}
    for key, tensor in new_esmc.items():
        rest = key[len(ESMC):]
        if rest in ESMC_ROOT:
            out[ESMC + ESMC_ROOT[rest]] = tensor
            continue
        m = re.match(r"^layers\.(\d+)\.(.+)$", rest)
        assert m, f"unexpected ESM C key {key}"
        blocks.setdefault(int(m.group(1)), {})[m.group(2)] = tensor
    for i, leaves in sorted(blocks.items()):
        base = f"{ESMC}transformer.blocks.{i}."
        used = set()
        for leaf, te in ESMC_BLOCK.items():
            out[base + te] = leaves[leaf]
            used.add(leaf)
        for te, parts in ESMC_FUSED.items():
            out[base + te] = torch.cat([leaves[p] for p in parts], dim=0)
            used.update(parts)
        assert used == set(leaves), f"block {i}: unmapped {sorted(set(leaves) - used)}"
    return out


# ------------------------------------------------------------------------------------------------
# configs
# ------------------------------------------------------------------------------------------------

def research_config(cfg):
    """The fixture's 5.24 config as the research fork's nested config.json."""
    ae = cfg["atom_encoder"]
    sh = cfg["structure_head"]
    dm = sh["diffusion_module"]
    dae = dm["atom_encoder"]
    ch = cfg["confidence_head"]
    msa = cfg["msa_encoder"]
    lm = cfg["lm_encoder"]
    esmc = cfg["esmc_config"]
    d_pair = cfg["pairwise_hidden_size"]

    # what the old schema cannot express must already hold in the fixture
    rope = ("spatial_rope_base_frequency", "num_spatial_rope_pairs_per_axis",
            "num_uid_rope_pairs", "uid_rope_base_frequency")
    for f in rope:  # one set of rope values, shared by all three atom stacks
        assert dae[f] == ae[f], f"diffusion atom encoder {f} differs from the inputs'"
    assert cfg["single_inputs_size"] == ae["output_dim"] + 2 * cfg["num_res_types"] + 1
    assert dae["output_dim"] == dm["hidden_size"]
    assert ae["intermediate_size"] % ae["hidden_size"] == 0
    mult = dm["intermediate_size"] // dm["hidden_size"]
    assert dm["intermediate_size"] == mult * dm["hidden_size"]
    assert dm["pair_intermediate_size"] == mult * d_pair
    assert ae["head_dim"] == ae["hidden_size"] // ae["num_attention_heads"]
    assert dae["head_dim"] == dae["hidden_size"] // dae["num_attention_heads"]
    assert dm["head_dim"] == dm["hidden_size"] // dm["num_attention_heads"]

    return {
        "type": "release",
        "d_single": cfg["hidden_size"],
        "d_pair": d_pair,
        "inputs": {
            "d_inputs": cfg["single_inputs_size"],
            "atom_encoder": {
                "d_atom": ae["hidden_size"],
                # the research embedder aggregates atoms to d_token // 2
                "d_token": 2 * ae["output_dim"],
                "n_blocks": ae["num_hidden_layers"],
                "n_heads": ae["num_attention_heads"],
                "swa_window_size": cfg["sliding_window"],
                "expansion_ratio": ae["intermediate_size"] // ae["hidden_size"],
                "spatial_rope_base_frequency": ae["spatial_rope_base_frequency"],
                "n_spatial_rope_pairs_per_axis": ae["num_spatial_rope_pairs_per_axis"],
                "n_uid_rope_pairs": ae["num_uid_rope_pairs"],
                "uid_rope_base_frequency": ae["uid_rope_base_frequency"],
            },
        },
        "n_relative_residx_bins": cfg["num_relative_residx_bins"],
        "n_relative_chain_bins": cfg["num_relative_chain_bins"],
        "num_loops": cfg["num_loops"],
        "num_diffusion_samples": sh["num_diffusion_samples"],
        "folding_trunk": {
            "n_layers": cfg["folding_trunk_num_hidden_layers"], "n_heads": 4, "dropout": 0.0},
        "parcae": {
            "enabled": True, "poisson_mean": 3.0, "min_steps": 1, "max_steps": 6,
            "coda_n_layers": cfg["parcae_num_coda_layers"]},
        "structure_head": {
            "distogram_bins": sh["num_distogram_bins"],
            "train_noise_log_mean": -1.2,
            "train_noise_log_std": 1.5,
            "gamma_0": sh["gamma_0"],
            "gamma_min": sh["gamma_min"],
            "noise_scale": sh["noise_scale"],
            "step_scale": sh["step_scale"],
            "inference_s_max": sh["inference_sigma_max_ratio"],
            "inference_s_min": sh["inference_sigma_min_ratio"],
            "inference_p": sh["inference_exponent"],
            "inference_num_steps": sh["inference_num_steps"],
            "diffusion_module": {
                "sigma_data": dm["sigma_data"],
                "c_atom": dae["hidden_size"],
                "c_token": dm["hidden_size"],
                "c_z": d_pair,
                "c_s_inputs": cfg["single_inputs_size"],
                "fourier_dim": dm["fourier_dim"],
                "relpos_r_max": cfg["num_relative_residx_bins"],
                "relpos_s_max": cfg["num_relative_chain_bins"],
                "atom_num_blocks": dae["num_hidden_layers"],
                "atom_num_heads": dae["num_attention_heads"],
                "token_num_blocks": dm["num_hidden_layers"],
                "token_num_heads": dm["num_attention_heads"],
                "transition_multiplier": mult,
            },
        },
        "confidence_head": {
            "enabled": True,
            "num_plddt_bins": ch["num_plddt_bins"],
            "num_pde_bins": ch["num_pde_bins"],
            "num_pae_bins": ch["num_pae_bins"],
            "min_dist": ch["min_dist"],
            "max_dist": ch["max_dist"],
            "distogram_bins": ch["distogram_bins"],
            "folding_trunk": {"n_layers": ch["num_hidden_layers"], "n_heads": 4, "dropout": 0.0},
        },
        "msa_encoder": {
            "enabled": msa["enabled"],
            "d_msa": msa["hidden_size"],
            "d_hidden": msa["outer_hidden_size"],
            "n_layers": msa["num_hidden_layers"],
            "n_heads_msa": msa["num_attention_heads"],
            "msa_head_width": msa["head_dim"],
        },
        "lm_encoder": {
            "enabled": True,
            "n_layers": lm["num_hidden_layers"],
            "lm_dropout": lm["lm_dropout"],
            "per_loop_lm_dropout": lm["per_loop_lm_dropout"],
        },
        "msa_encoder_overwrite": True,
        "disable_msa_features": False,
        "esmc_id": "biohub/ESMC-6B",  # what a release config names; never read by a converter
        "lm_d_model": esmc["hidden_size"],
        "lm_num_layers": esmc["num_hidden_layers"],
        "dtype": cfg["dtype"],
    }


def research_esmc_config(esmc):
    return {
        "architectures": ["ESMCForMaskedLM"],
        "d_model": esmc["hidden_size"],
        "dtype": "float32",
        "mask_token_id": 32,
        "model_type": "esmc",
        "n_heads": esmc["num_attention_heads"],
        "n_layers": esmc["num_hidden_layers"],
        "pad_token_id": 1,
        "tie_word_embeddings": False,
        "vocab_size": esmc["vocab_size"],
    }


# ------------------------------------------------------------------------------------------------
# checks: the conversion's forward (old -> new) rules, written out independently of the table above
# ------------------------------------------------------------------------------------------------

SPEC_RULES = (
    ("R01", r"^inputs_embedder\.atom_attention_encoder\.", "input_embedder.atom_encoder."),
    ("R02", r"^z_init_(\d+)\.", r"input_embedder.pair_init_\1."),
    ("R03", r"^rel_pos\.", "input_embedder.rel_pos."),
    ("R04", r"^token_bonds\.", "input_embedder.token_bonds."),
    ("R05", r"^structure_head\.diffusion_module\.atom_encoder\.coords_linear\.",
     "structure_head.coords_linear."),
    ("R06", r"^structure_head\.diffusion_module\.", "structure_head."),
    ("R07", r"^structure_head\.s_to_token\.", "structure_head.single_to_token."),
    ("R08", r"^structure_head\.s_step_norm\.", "structure_head.single_step_norm."),
    ("R09", r"^structure_head\.conditioning\.z_transitions\.(\d+)\.",
     r"structure_head.conditioning.pair_transition_\1."),
    ("R10", r"^structure_head\.conditioning\.s_transitions\.(\d+)\.",
     r"structure_head.conditioning.single_transition_\1."),
    ("R11", r"^structure_head\.conditioning\.z_", "structure_head.conditioning.pair_"),
    ("R12", r"^structure_head\.conditioning\.s_", "structure_head.conditioning.single_"),
    ("R13", r"(\.conditioning\.(?:pair|single)_transition_\d+)\.out_proj\.", r"\1.mlp.down_proj."),
    ("R14", r"\.fourier\.w$", ".fourier.frequencies"),
    ("R15", r"\.fourier\.b$", ".fourier.phases"),
    ("R16", r"\.atom_transformer\.blocks\.(\d+)\.attn\.out_proj\.",
     r".layers.\1.self_attn.o_proj."),
    ("R17", r"\.atom_transformer\.blocks\.(\d+)\.attn\.", r".layers.\1.self_attn."),
    ("R18", r"\.atom_transformer\.blocks\.(\d+)\.ffn\.w_up\.", r".layers.\1.mlp.gate_up_proj."),
    ("R19", r"\.atom_transformer\.blocks\.(\d+)\.ffn\.w_down\.", r".layers.\1.mlp.down_proj."),
    ("R20", r"\.atom_transformer\.blocks\.(\d+)\.adaln_modulation\.1\.",
     r".layers.\1.adaln_linear."),
    ("R21", r"\.token_transformer\.attn_blocks\.(\d+)\.adaln\.s_scale$",
     r".token_transformer.layers.\1.input_layernorm.cond_norm.weight"),
    ("R22", r"\.token_transformer\.attn_blocks\.(\d+)\.adaln\.s_gate\.",
     r".token_transformer.layers.\1.input_layernorm.gate_proj."),
    ("R23", r"\.token_transformer\.attn_blocks\.(\d+)\.adaln\.s_shift\.",
     r".token_transformer.layers.\1.input_layernorm.shift_proj."),
    ("R24", r"\.token_transformer\.transition_blocks\.(\d+)\.adaln\.s_scale$",
     r".token_transformer.layers.\1.post_attention_layernorm.cond_norm.weight"),
    ("R25", r"\.token_transformer\.transition_blocks\.(\d+)\.adaln\.s_gate\.",
     r".token_transformer.layers.\1.post_attention_layernorm.gate_proj."),
    ("R26", r"\.token_transformer\.transition_blocks\.(\d+)\.adaln\.s_shift\.",
     r".token_transformer.layers.\1.post_attention_layernorm.shift_proj."),
    ("R27", r"\.token_transformer\.attn_blocks\.(\d+)\.out_gate\.",
     r".token_transformer.layers.\1.attn_gate."),
    ("R28", r"\.token_transformer\.transition_blocks\.(\d+)\.output_gate\.",
     r".token_transformer.layers.\1.mlp_gate."),
    ("R29", r"\.token_transformer\.transition_blocks\.(\d+)\.lin_swish\.",
     r".token_transformer.layers.\1.mlp.gate_up_proj."),
    ("R30", r"\.token_transformer\.transition_blocks\.(\d+)\.lin_out\.",
     r".token_transformer.layers.\1.mlp.down_proj."),
    ("R31", r"\.token_transformer\.attn_blocks\.(\d+)\.(pair_norm|pair_bias_proj)\.",
     r".token_transformer.layers.\1.\2."),
    ("R32", r"\.token_transformer\.attn_blocks\.(\d+)\.g_proj\.",
     r".token_transformer.layers.\1.self_attn.gate_proj."),
    ("R33", r"\.token_transformer\.attn_blocks\.(\d+)\.out_proj\.",
     r".token_transformer.layers.\1.self_attn.o_proj."),
    ("R34", r"\.token_transformer\.attn_blocks\.(\d+)\.(q_proj|kv_proj)\.",
     r".token_transformer.layers.\1.self_attn.\2."),
    ("R35", r"^parcae_coda\.blocks\.", "parcae.output_stack.blocks."),
    ("R36", r"^parcae_readout\.", "parcae.out_proj."),
    ("R37", r"^parcae_b_cont$", "parcae.input_matrix_continuous"),
    ("R38", r"^parcae_log_a$", "parcae.log_state_decay"),
    ("R39", r"^parcae_", "parcae."),
    ("R40", r"\.blocks\.(\d+)\.", r".layers.\1."),
    ("R41", r"\.(tri_mul_(?:in|out))\._engine\.", r".\1."),
    ("R42", r"\.ffn\.w12\.", ".mlp.gate_up_proj."),
    ("R43", r"\.ffn\.w3\.", ".mlp.down_proj."),
    ("R44", r"\.msa_pair_weighted_averaging\.compute_bias\.0\.",
     ".msa_pair_weighted_averaging.bias_norm."),
    ("R45", r"\.msa_pair_weighted_averaging\.compute_bias\.1\.",
     ".msa_pair_weighted_averaging.bias_proj."),
    ("R46", r"\.msa_pair_weighted_averaging\.Wv\.", ".msa_pair_weighted_averaging.v_proj."),
    ("R47", r"\.msa_pair_weighted_averaging\.Wgate\.", ".msa_pair_weighted_averaging.gate_proj."),
    ("R48", r"\.msa_pair_weighted_averaging\.Wout\.", ".msa_pair_weighted_averaging.o_proj."),
    ("R49", r"\.outer_product_mean\.W\.", ".outer_product_mean.input_proj."),
    ("R50", r"\.outer_product_mean\.Wout\.", ".outer_product_mean.output_proj."),
    ("R51", r"^confidence_head\.s_inputs_norm\.",
     "confidence_head.input_embedder.single_inputs_norm."),
    ("R52", r"^confidence_head\.z_norm\.", "confidence_head.input_embedder.pair_norm."),
    ("R53", r"^confidence_head\.s_to_z(_transpose|_prod_in1|_prod_in2|_prod_out)?\.",
     r"confidence_head.input_embedder.single_to_pair\1."),
    ("R54", r"^confidence_head\.(plddt|pae|pde|resolved)_ln\.", r"confidence_head.\1_layernorm."),
    ("R55", r"^language_model\.base_z_linear\.0\.", "language_model.pair_input_norm."),
    ("R56", r"^language_model\.base_z_linear\.1\.", "language_model.pair_proj."),
    ("R57", r"^language_model\.base_z_mlp\.0\.output_mlp\.0\.",
     "language_model.single_to_pair.output_fc1."),
    ("R58", r"^language_model\.base_z_mlp\.0\.output_mlp\.2\.",
     "language_model.single_to_pair.output_fc2."),
    ("R59", r"^language_model\.base_z_mlp\.0\.", "language_model.single_to_pair."),
    ("R60", r"^language_model\.base_z_mlp\.1\.", "language_model.pair_output_norm."),
    ("R61", r"^language_model\.base_z_combine$", "language_model.layer_weights"),
)

SPEC_ESMC_RENAMES = (
    ("embed.", "embed_tokens."),
    ("transformer.blocks.", "layers."),
    ("transformer.norm.", "norm."),
    ("attn.layernorm_qkv.layer_norm_weight", "input_layernorm.weight"),
    ("attn.layernorm_qkv.layer_norm_bias", "input_layernorm.bias"),
    ("attn.q_ln.", "self_attn.q_norm."),
    ("attn.k_ln.", "self_attn.k_norm."),
    ("attn.out_proj.", "self_attn.o_proj."),
    ("ffn.layer_norm_weight", "post_attention_layernorm.weight"),
    ("ffn.layer_norm_bias", "post_attention_layernorm.bias"),
    ("ffn.fc2_weight", "mlp.down_proj.weight"),
    ("lm_head.0.", "lm_head.dense."),
    ("lm_head.2.", "lm_head.layer_norm."),
    ("lm_head.3.", "lm_head.decoder."),
)


class Forward:
    """Collects the new state dict with the old tensor(s) each key was made from."""

    def __init__(self):
        self.out, self.source, self.uses = {}, {}, {}

    def emit(self, key, tensor, op, *old_keys):
        """op: "copy" (one old tensor), "split" (a row block of one old tensor) or "fuse"
        (several old tensors concatenated)."""
        assert key not in self.out, f"{key} produced twice ({self.source[key]}, {old_keys})"
        assert len(old_keys) == (2 if op == "fuse" else 1)
        self.out[key] = tensor
        self.source[key] = old_keys
        for k in old_keys:
            self.uses.setdefault(k, []).append(op)

    def check_coverage(self, old, ignored):
        """Every old tensor is used by exactly one operation (one copy, one fusion, or the row
        blocks of one split) or is deliberately ignored."""
        for k, ops in self.uses.items():
            assert len(ops) == 1 or set(ops) == {"split"}, f"{k} used by {ops}"
        unused = set(old) - set(self.uses) - set(ignored)
        assert not unused, f"old tensors not used: {sorted(unused)}"
        assert not set(self.uses) & set(ignored)


def spec_forward_trunk(old):
    """The trunk's conversion: drops, R01..R61, then S1 / S2 / F1.

    Returns (new dict, Forward, dropped old keys)."""
    dropped, renamed = [], {}
    for key, tensor in old.items():
        if any(d in key for d in DEAD_CONFIDENCE):
            dropped.append(key)
            continue
        new = key
        for _, pattern, repl in SPEC_RULES:
            new = re.sub(pattern, repl, new)
        assert new not in renamed, f"{key} and {renamed[new][0]} rename onto {new}"
        renamed[new] = (key, tensor)

    fw = Forward()
    for new, (key, t) in renamed.items():
        if new.endswith(".self_attn.Wqkv.weight"):  # S1
            base = new[: -len("Wqkv.weight")]
            c = t.shape[0] // 3
            assert 3 * c == t.shape[0]
            for i, p in enumerate("qkv"):
                fw.emit(f"{base}{p}_proj.weight", t[i * c:(i + 1) * c], "split", key)
        elif new.endswith(".self_attn.kv_proj.weight"):  # S2
            base = new[: -len("kv_proj.weight")]
            d = t.shape[0] // 2
            assert 2 * d == t.shape[0]
            fw.emit(base + "k_proj.weight", t[:d], "split", key)
            fw.emit(base + "v_proj.weight", t[d:], "split", key)
        elif re.search(r"_transition_\d+\.a_proj\.weight$", new):  # F1
            b_new = new.replace(".a_proj.", ".b_proj.")
            b_key, b = renamed[b_new]
            fw.emit(new.replace(".a_proj.weight", ".mlp.gate_up_proj.weight"),
                    torch.cat([t, b], dim=0), "fuse", key, b_key)
        elif re.search(r"_transition_\d+\.b_proj\.weight$", new):
            assert new.replace(".b_proj.", ".a_proj.") in renamed, f"{key} has no a_proj"
        else:
            fw.emit(new, t, "copy", key)
    return fw.out, fw, dropped


def spec_forward_esmc(old):
    """The tower's conversion: keep `esmc.`, skip `_extra_state`, rename, split q/k/v and gate/up."""
    fw = Forward()
    skipped = []
    for key, t in old.items():
        if not key.startswith(ESMC) or key.endswith("_extra_state"):
            skipped.append(key)
            continue
        new = key
        for a, b in SPEC_ESMC_RENAMES:
            new = new.replace(a, b)
        if new.endswith("attn.layernorm_qkv.weight"):
            base = new[: -len("attn.layernorm_qkv.weight")]
            for name, part in zip(("q", "k", "v"), torch.chunk(t, 3, dim=0)):
                fw.emit(f"{base}self_attn.{name}_proj.weight", part, "split", key)
        elif new.endswith("ffn.fc1_weight"):
            base = new[: -len("ffn.fc1_weight")]
            gate, up = torch.chunk(t, 2, dim=0)
            fw.emit(base + "mlp.gate_proj.weight", gate, "split", key)
            fw.emit(base + "mlp.up_proj.weight", up, "split", key)
        else:
            fw.emit(new, t, "copy", key)
    return fw.out, fw, skipped


def spec_forward_config(old, old_esmc, trunk, esmc):
    """The config mapping: the 5.24 config values for an old checkpoint, widths the old
    config lacks taken from the old tensors' shapes."""
    ia = old["inputs"]["atom_encoder"]
    sh = old["structure_head"]
    dm = sh["diffusion_module"]
    ch = old["confidence_head"]
    msa = old["msa_encoder"]
    lm = old["lm_encoder"]
    d_pair = old["d_pair"]
    d_inputs = old["inputs"]["d_inputs"]

    def rows(key):
        return trunk[key].shape[0]

    # the old-only switches 5.24 cannot express, and the redundant widths
    assert old["type"] == "release"
    assert old["msa_encoder_overwrite"] is True and old["disable_msa_features"] is False
    assert (dm["c_z"], dm["c_s_inputs"]) == (d_pair, d_inputs)
    assert (dm["relpos_r_max"], dm["relpos_s_max"]) == (
        old["n_relative_residx_bins"], old["n_relative_chain_bins"])
    assert old["lm_d_model"] == old_esmc["d_model"]
    assert old["lm_num_layers"] == old_esmc["n_layers"]
    assert trunk["language_model.base_z_combine"].shape[0] == old["lm_num_layers"] + 1
    assert tuple(trunk["language_model.base_z_linear.1.weight"].shape) == (d_pair,
                                                                           old["lm_d_model"])
    assert msa["enabled"] == any(k.startswith("msa_encoder.") for k in trunk)

    mult = dm["transition_multiplier"]
    c_token = dm["c_token"]
    atom_ff = ("inputs_embedder.atom_attention_encoder.atom_transformer.blocks.0."
               "ffn.w_up.weight")
    diff_ff = ("structure_head.diffusion_module.atom_encoder.atom_transformer.blocks.0."
               "ffn.w_up.weight")
    # "check with" cross-checks of the conversion
    assert rows("structure_head.diffusion_module.token_transformer.transition_blocks.0."
                "lin_swish.weight") == 2 * mult * c_token
    assert rows("structure_head.diffusion_module.conditioning.z_transitions.0."
                "a_proj.weight") == mult * d_pair
    assert rows("inputs_embedder.atom_attention_encoder.atom_to_token_linear.weight") == (
        d_inputs - 67)
    # d_token is dropped, but the research embedder aggregates to d_token // 2
    assert ia["d_token"] // 2 == d_inputs - 67
    assert rows("distogram_head.weight") == sh["distogram_bins"]

    rope = {
        "spatial_rope_base_frequency": ia["spatial_rope_base_frequency"],
        "num_spatial_rope_pairs_per_axis": ia["n_spatial_rope_pairs_per_axis"],
        "num_uid_rope_pairs": ia["n_uid_rope_pairs"],
        "uid_rope_base_frequency": ia["uid_rope_base_frequency"],
    }
    esmc_cfg = {k: old_esmc[k] for k in ("vocab_size", "initializer_range", "pad_token_id",
                                         "tie_word_embeddings", "mask_token_id",
                                         "classifier_dropout") if k in old_esmc}
    esmc_cfg.update(hidden_size=old_esmc["d_model"], num_attention_heads=old_esmc["n_heads"],
                    num_hidden_layers=old_esmc["n_layers"],
                    intermediate_size=esmc["esmc.transformer.blocks.0.ffn.fc1_weight"].shape[0]
                    // 2)
    if "dtype" in old_esmc:
        esmc_cfg["dtype"] = old_esmc["dtype"]
    unknown = set(old_esmc) - {"vocab_size", "initializer_range", "pad_token_id",
                               "tie_word_embeddings", "mask_token_id", "classifier_dropout",
                               "d_model", "n_heads", "n_layers", "dtype", "architectures",
                               "model_type", "transformers_version"}
    assert not unknown, f"unmapped ESM C config fields {unknown}"

    new = {
        "architectures": ["EsmFold2Model"],
        "hidden_size": old["d_single"],
        "pairwise_hidden_size": d_pair,
        "single_inputs_size": d_inputs,
        "pair_transition_intermediate_size": rows(
            "folding_trunk.blocks.0.pair_transition.ffn.w12.weight") // 2,
        "sliding_window": ia["swa_window_size"],
        "num_relative_residx_bins": old["n_relative_residx_bins"],
        "num_relative_chain_bins": old["n_relative_chain_bins"],
        "num_loops": old["num_loops"],
        "folding_trunk_num_hidden_layers": old["folding_trunk"]["n_layers"],
        "parcae_num_coda_layers": old["parcae"]["coda_n_layers"],
        "atom_encoder": dict(
            hidden_size=ia["d_atom"], output_dim=d_inputs - 67, num_hidden_layers=ia["n_blocks"],
            num_attention_heads=ia["n_heads"], intermediate_size=rows(atom_ff) // 2, **rope),
        "structure_head": {
            "num_distogram_bins": sh["distogram_bins"],
            "num_diffusion_samples": old["num_diffusion_samples"],
            "gamma_0": sh["gamma_0"],
            "gamma_min": sh["gamma_min"],
            "noise_scale": sh["noise_scale"],
            "step_scale": sh["step_scale"],
            "inference_sigma_max_ratio": sh["inference_s_max"],
            "inference_sigma_min_ratio": sh["inference_s_min"],
            "inference_exponent": sh["inference_p"],
            "inference_num_steps": sh["inference_num_steps"],
            "diffusion_module": {
                "sigma_data": dm["sigma_data"],
                "hidden_size": c_token,
                "fourier_dim": dm["fourier_dim"],
                "num_hidden_layers": dm["token_num_blocks"],
                "num_attention_heads": dm["token_num_heads"],
                "intermediate_size": mult * c_token,
                "pair_intermediate_size": mult * d_pair,
                "atom_encoder": dict(
                    hidden_size=dm["c_atom"], output_dim=c_token,
                    num_hidden_layers=dm["atom_num_blocks"],
                    num_attention_heads=dm["atom_num_heads"],
                    intermediate_size=rows(diff_ff) // 2, **rope),
            },
        },
        "confidence_head": {
            "num_hidden_layers": ch["folding_trunk"]["n_layers"],
            "num_plddt_bins": ch["num_plddt_bins"],
            "num_pde_bins": ch["num_pde_bins"],
            "num_pae_bins": ch["num_pae_bins"],
            "min_dist": ch["min_dist"],
            "max_dist": ch["max_dist"],
            "distogram_bins": ch["distogram_bins"],
        },
        "msa_encoder": {
            "enabled": msa["enabled"],
            "hidden_size": msa["d_msa"],
            "outer_hidden_size": msa["d_hidden"],
            "num_hidden_layers": msa["n_layers"],
            "num_attention_heads": msa["n_heads_msa"],
            "head_dim": msa["msa_head_width"],
            "intermediate_size": rows("msa_encoder.blocks.0.msa_transition.ffn.w12.weight") // 2,
        },
        "lm_encoder": {
            "num_hidden_layers": lm["n_layers"],
            "lm_dropout": lm["lm_dropout"],
            "per_loop_lm_dropout": lm["per_loop_lm_dropout"],
        },
        "esmc_config": esmc_cfg,
    }
    if "dtype" in old:
        new["dtype"] = old["dtype"]
    return new


BOOKKEEPING = {"transformers_version", "_name_or_path"}


def comparable(d, skip=()):
    """A config dict without the keys no conversion carries, recursively."""
    if not isinstance(d, dict):
        return d
    return {k: comparable(v) for k, v in d.items() if k not in BOOKKEEPING and k not in skip}


def diff(a, b, path=""):
    """Dotted paths where two nested dicts differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += diff(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}{k}.")
        return out
    return [] if a == b else [f"{path[:-1]}: {a!r} != {b!r}"]


def leaf_count(d):
    return sum(leaf_count(v) if isinstance(v, dict) else 1 for v in d.values())


def check(old_trunk, old_esmc, old_cfg, old_esmc_cfg, new_sd):
    from transformers import EsmcConfig, EsmFold2Config, EsmFold2Model

    # (1) the conversion's forward rules rebuild the fixture's state dict exactly
    trunk, fw_t, dropped = spec_forward_trunk(old_trunk)
    esmc, fw_e, skipped = spec_forward_esmc(old_esmc)
    assert sorted(dropped) == sorted(d + "weight" for d in DEAD_CONFIDENCE), dropped
    assert all(k.endswith("._extra_state") or k.startswith("lm_head.") for k in skipped)
    fw_t.check_coverage(old_trunk, dropped)
    fw_e.check_coverage(old_esmc, skipped)
    rebuilt = {**trunk, **esmc}
    assert not set(trunk) & set(esmc)
    missing, extra = set(new_sd) - set(rebuilt), set(rebuilt) - set(new_sd)
    assert not missing and not extra, f"missing {sorted(missing)[:5]}, extra {sorted(extra)[:5]}"
    for k, v in new_sd.items():
        r = rebuilt[k]
        assert r.dtype == v.dtype and r.shape == v.shape, k
        # bit-exact: compare the bytes, so -0.0 / NaN payloads count too
        assert r.contiguous().view(torch.uint8).equal(v.contiguous().view(torch.uint8)), k
    # and Biohub's table composed with the conversion's rules is the identity on every key
    for k in new_sd:
        if k.startswith(ESMC):
            continue
        old_name = to_research_key(k)
        assert k in fw_t.out and old_name in {
            s.replace(".b_proj.", ".a_proj.") for s in fw_t.source[k]}, k

    # (2) the old configs map onto the fixture's config
    new_cfg = EsmFold2Config.from_pretrained(SRC)
    mapped = spec_forward_config(old_cfg, old_esmc_cfg, old_trunk, old_esmc)
    got = EsmFold2Config(**mapped)
    # chunk_size is a runtime knob with no old source; the esmc dtype follows the outer config
    want_d = comparable(new_cfg.to_dict(), skip={"chunk_size"})
    got_d = comparable(got.to_dict(), skip={"chunk_size"})
    want_d["esmc_config"] = comparable(new_cfg.esmc_config.to_dict(), skip={"dtype"})
    got_d["esmc_config"] = comparable(got.esmc_config.to_dict(), skip={"dtype"})
    bad = diff(want_d, got_d)
    assert not bad, "config mismatch:\n  " + "\n  ".join(bad)
    assert isinstance(got.esmc_config, EsmcConfig)

    # the mapped config builds a model that takes the rebuilt weights strictly
    model = EsmFold2Model(got)
    model.load_state_dict(rebuilt, strict=True)
    return {
        "old trunk tensors": len(old_trunk),
        "dropped dead tensors": len(dropped),
        "old esmc file tensors": len(old_esmc),
        "skipped esmc entries": len(skipped),
        "rebuilt trunk keys": len(trunk),
        "rebuilt esmc keys": len(esmc),
        "config leaves compared": leaf_count(want_d),
    }


# ------------------------------------------------------------------------------------------------

def main():
    with open(os.path.join(SRC, "config.json")) as f:
        cfg = json.load(f)
    new_sd = load_file(os.path.join(SRC, "model.safetensors"))
    new_trunk = {k: v for k, v in new_sd.items() if not k.startswith(ESMC)}
    new_esmc = {k: v for k, v in new_sd.items() if k.startswith(ESMC)}
    esmc_cfg = cfg["esmc_config"]
    d, v = esmc_cfg["hidden_size"], esmc_cfg["vocab_size"]

    g = torch.Generator().manual_seed(SEED)

    def draw(*shape, scale=None):
        scale = shape[-1] ** -0.5 if scale is None else scale
        return torch.randn(shape, generator=g) * scale

    old_trunk = trunk_to_research(new_trunk)
    # dead tensors the released trunk still carries; no 5.24 module reads them
    d_single, d_inputs = cfg["hidden_size"], cfg["single_inputs_size"]
    dead = {
        "confidence_head.s_norm.weight": 1.0 + draw(d_single, scale=0.1),
        "confidence_head.s_inputs_to_single.weight": draw(d_single, d_inputs),
        "confidence_head.s_input_to_s.weight": draw(d_single, d_inputs),
    }
    assert not set(dead) & set(old_trunk)
    old_trunk.update(dead)

    old_esmc = esmc_to_research(new_esmc)
    for i in range(esmc_cfg["num_hidden_layers"]):
        for leaf in ESMC_EXTRA_STATE:
            old_esmc[f"{ESMC}transformer.blocks.{i}.{leaf}"] = torch.empty(0, dtype=torch.uint8)
    old_esmc.update({  # the masked-LM head, stored without the esmc. prefix
        "lm_head.0.weight": draw(d, d), "lm_head.0.bias": draw(d, scale=0.1),
        "lm_head.2.weight": 1.0 + draw(d, scale=0.1), "lm_head.2.bias": draw(d, scale=0.1),
        "lm_head.3.weight": draw(v, d), "lm_head.3.bias": draw(v, scale=0.1),
    })

    old_cfg = research_config(cfg)
    old_esmc_cfg = research_esmc_config(esmc_cfg)

    stats = check(old_trunk, old_esmc, old_cfg, old_esmc_cfg, new_sd)

    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(os.path.join(OUT, "esmc"))
    for path, obj in ((os.path.join(OUT, "config.json"), old_cfg),
                      (os.path.join(OUT, "esmc", "config.json"), old_esmc_cfg)):
        with open(path, "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
    save_file({k: t.contiguous() for k, t in old_trunk.items()},
              os.path.join(OUT, "model.safetensors"), metadata=META)
    save_file({k: t.contiguous() for k, t in old_esmc.items()},
              os.path.join(OUT, "esmc", "model.safetensors"), metadata=META)

    # what was written reads back to what was checked
    for name, sd in (("model.safetensors", old_trunk),
                     (os.path.join("esmc", "model.safetensors"), old_esmc)):
        back = load_file(os.path.join(OUT, name))
        assert set(back) == set(sd) and all(torch.equal(back[k], sd[k]) for k in sd), name

    stats["new keys"] = len(new_sd)
    for k, n in stats.items():
        print(f"{k}: {n}")
    print(f"wrote {os.path.relpath(OUT, ROOT)}")


if __name__ == "__main__":
    main()
