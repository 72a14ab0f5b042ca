#include "models/esmfold2/legacy.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <utility>
#include <vector>

#include "bioinfer/error.h"

namespace bioinfer::esmfold2 {
namespace {

using nlohmann::json;

// A value of the nested research config by dotted path; `dflt` (the research code's default)
// where it is absent, an error naming the key where there is none.
template <typename T>
T old_get(const json& cfg, const std::string& path, const std::string& where,
          std::optional<T> dflt = std::nullopt) {
    const json* node = &cfg;
    size_t start = 0;
    while (true) {
        const size_t dot = path.find('.', start);
        const std::string part = path.substr(start, dot == std::string::npos ? dot : dot - start);
        auto it = node->find(part);
        if (it == node->end() || it->is_null()) {
            BI_CHECK(dflt.has_value(), where, "research-layout config.json lacks '", path, "'");
            return *dflt;
        }
        node = &*it;
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    try {
        return node->get<T>();
    } catch (const std::exception&) {
        fail(where, cat("research-layout config.json key '", path,
                        "' has the wrong type: ", node->dump()));
    }
}

// Rows of a stored tensor, or `dflt` where the checkpoint lacks it.
int64_t rows_of(const io::ModelDir& m, const std::string& name, int64_t dflt) {
    return m.has(name) ? m.get_raw(name).size(0) : dflt;
}

// transformers' EsmFold2Config (the fields bioinfer's Config reads) from the research config;
// widths the research config does not carry come from the tensors' shapes.
json map_config(const json& o, const io::ModelDir& trunk, const json& esmc,
                const std::string& where) {
    const std::string type = old_get<std::string>(o, "type", where, std::string("release"));
    BI_CHECK(type == "release", where, "research-layout type '", type,
             "' is not the released ESMFold2 (\"release\")");
    BI_CHECK(old_get<bool>(o, "msa_encoder_overwrite", where, true), where,
             "msa_encoder_overwrite false (the MSA pair added, not substituted) is not supported");
    BI_CHECK(!old_get<bool>(o, "disable_msa_features", where, false), where,
             "disable_msa_features true is not supported");
    const auto i64 = [&](const char* path, int64_t d) {
        return old_get<int64_t>(o, path, where, d);
    };
    const auto f64 = [&](const char* path, double d) { return old_get<double>(o, path, where, d); };
    const int64_t c_z = i64("d_pair", 256), c_inputs = i64("inputs.d_inputs", 451);
    const int64_t c_token = i64("structure_head.diffusion_module.c_token", 768);
    const json rope = {
        {"spatial_rope_base_frequency",
         f64("inputs.atom_encoder.spatial_rope_base_frequency", 20.0)},
        {"num_spatial_rope_pairs_per_axis",
         i64("inputs.atom_encoder.n_spatial_rope_pairs_per_axis", 2)},
        {"num_uid_rope_pairs", i64("inputs.atom_encoder.n_uid_rope_pairs", 10)},
        {"uid_rope_base_frequency", f64("inputs.atom_encoder.uid_rope_base_frequency", 10000.0)}};
    json atom = rope;
    atom["hidden_size"] = i64("inputs.atom_encoder.d_atom", 128);
    atom["num_hidden_layers"] = i64("inputs.atom_encoder.n_blocks", 3);
    atom["num_attention_heads"] = i64("inputs.atom_encoder.n_heads", 4);
    atom["output_dim"] =
        c_inputs - 67;  // single inputs = atoms, res type and profile (33 each), deletion mean
    atom["intermediate_size"] =
        rows_of(trunk,
                "inputs_embedder.atom_attention_encoder.atom_transformer.blocks.0.ffn.w_up.weight",
                512) /
        2;
    json diff_atom = rope;
    diff_atom["hidden_size"] = i64("structure_head.diffusion_module.c_atom", 128);
    diff_atom["num_hidden_layers"] = i64("structure_head.diffusion_module.atom_num_blocks", 3);
    diff_atom["num_attention_heads"] = i64("structure_head.diffusion_module.atom_num_heads", 4);
    diff_atom["output_dim"] = c_token;
    diff_atom["intermediate_size"] = rows_of(trunk,
                                             "structure_head.diffusion_module.atom_encoder.atom_"
                                             "transformer.blocks.0.ffn.w_up.weight",
                                             512) /
                                     2;
    const std::string dm = "structure_head.diffusion_module.";
    json cfg = {
        {"model_type", "esmfold2"},
        {"hidden_size", i64("d_single", 384)},
        {"pairwise_hidden_size", c_z},
        {"single_inputs_size", c_inputs},
        {"pair_transition_intermediate_size",
         rows_of(trunk, "folding_trunk.blocks.0.pair_transition.ffn.w12.weight", 8 * c_z) / 2},
        {"sliding_window", i64("inputs.atom_encoder.swa_window_size", 128)},
        {"num_relative_residx_bins", i64("n_relative_residx_bins", 32)},
        {"num_relative_chain_bins", i64("n_relative_chain_bins", 2)},
        {"num_loops", i64("num_loops", 10)},
        {"folding_trunk_num_hidden_layers", i64("folding_trunk.n_layers", 24)},
        {"parcae_num_coda_layers", i64("parcae.coda_n_layers", 2)},
        {"atom_encoder", atom},
        {"structure_head",
         {{"num_distogram_bins", i64("structure_head.distogram_bins", 128)},
          {"num_diffusion_samples", i64("num_diffusion_samples", 8)},
          {"gamma_0", f64("structure_head.gamma_0", 0.605)},
          {"gamma_min", f64("structure_head.gamma_min", 1.107)},
          {"noise_scale", f64("structure_head.noise_scale", 0.0)},
          {"step_scale", f64("structure_head.step_scale", 1.0)},
          {"inference_sigma_max_ratio", f64("structure_head.inference_s_max", 160.0)},
          {"inference_sigma_min_ratio", f64("structure_head.inference_s_min", 4e-4)},
          {"inference_exponent", f64("structure_head.inference_p", 8.0)},
          {"inference_num_steps", i64("structure_head.inference_num_steps", 68)},
          {"diffusion_module",
           {{"sigma_data", f64((dm + "sigma_data").c_str(), 16.0)},
            {"hidden_size", c_token},
            {"fourier_dim", i64((dm + "fourier_dim").c_str(), 256)},
            {"num_hidden_layers", i64((dm + "token_num_blocks").c_str(), 12)},
            {"num_attention_heads", i64((dm + "token_num_heads").c_str(), 16)},
            {"intermediate_size",
             rows_of(trunk, dm + "token_transformer.transition_blocks.0.lin_swish.weight",
                     4 * c_token) /
                 2},
            {"pair_intermediate_size",
             rows_of(trunk, dm + "conditioning.z_transitions.0.a_proj.weight", 2 * c_z)},
            {"atom_encoder", diff_atom}}}}},
        {"confidence_head",
         {{"num_hidden_layers", i64("confidence_head.folding_trunk.n_layers", 4)},
          {"num_plddt_bins", i64("confidence_head.num_plddt_bins", 50)},
          {"num_pde_bins", i64("confidence_head.num_pde_bins", 64)},
          {"num_pae_bins", i64("confidence_head.num_pae_bins", 64)},
          {"min_dist", f64("confidence_head.min_dist", 2.0)},
          {"max_dist", f64("confidence_head.max_dist", 52.0)},
          {"distogram_bins", i64("confidence_head.distogram_bins", 128)}}},
        {"msa_encoder",
         {// the research config's flag; ESMFold2-Fast ships false and no msa_encoder tensors
          {"enabled",
           old_get<bool>(o, "msa_encoder.enabled", where, trunk.has("msa_encoder.embed.weight"))},
          {"hidden_size", i64("msa_encoder.d_msa", 128)},
          {"outer_hidden_size", i64("msa_encoder.d_hidden", 32)},
          {"num_hidden_layers", i64("msa_encoder.n_layers", 4)},
          {"num_attention_heads", i64("msa_encoder.n_heads_msa", 8)},
          {"head_dim", i64("msa_encoder.msa_head_width", 32)},
          {"intermediate_size",
           rows_of(trunk, "msa_encoder.blocks.0.msa_transition.ffn.w12.weight", 1024) / 2}}},
        {"lm_encoder",
         {{"num_hidden_layers", i64("lm_encoder.n_layers", 4)},
          {"lm_dropout", f64("lm_encoder.lm_dropout", 0.25)},
          {"per_loop_lm_dropout",
           old_get<bool>(o, "lm_encoder.per_loop_lm_dropout", where, true)}}},
        {"esmc_config", esmc}};
    return cfg;
}

// The tower's config (biohub/ESMC-6B: d_model, n_heads, n_layers) as transformers' EsmcConfig;
// the SwiGLU width from the first block's fused gate/up rows.
json map_esmc_config(const io::ModelDir& tower) {
    const json& o = tower.config();
    const std::string where = tower.dir() + "/config.json";
    json c = {{"model_type", "esmc"},
              {"hidden_size", old_get<int64_t>(o, "d_model", where)},
              {"num_attention_heads", old_get<int64_t>(o, "n_heads", where)},
              {"num_hidden_layers", old_get<int64_t>(o, "n_layers", where)},
              {"vocab_size", old_get<int64_t>(o, "vocab_size", where, 64)}};
    const std::string fc1 = "esmc.transformer.blocks.0.ffn.fc1_weight";
    BI_CHECK(tower.has(fc1), tower.dir(), "missing tensor '", fc1, "' (not an ESM C tower in ",
             "TransformerEngine names)");
    c["intermediate_size"] = tower.get_raw(fc1).size(0) / 2;
    return c;
}

struct Rule {
    std::regex pattern;
    std::string replacement;  // ECMAScript format: $1 is the first group
};

// Trunk key renames, in order (transformers' conversion to its EsmFold2Model names).
const std::vector<Rule>& trunk_rules() {
    static const std::vector<Rule> rules = [] {
        const std::vector<std::pair<const char*, const char*>> r = {
            // inputs embedder
            {R"(^inputs_embedder\.atom_attention_encoder\.)", "input_embedder.atom_encoder."},
            {R"(^z_init_(\d+)\.)", "input_embedder.pair_init_$1."},
            {R"(^rel_pos\.)", "input_embedder.rel_pos."},
            {R"(^token_bonds\.)", "input_embedder.token_bonds."},
            // the diffusion module flattened into structure_head (coords_linear leaves the encoder)
            {R"(^structure_head\.diffusion_module\.atom_encoder\.coords_linear\.)",
             "structure_head.coords_linear."},
            {R"(^structure_head\.diffusion_module\.)", "structure_head."},
            {R"(^structure_head\.s_to_token\.)", "structure_head.single_to_token."},
            {R"(^structure_head\.s_step_norm\.)", "structure_head.single_step_norm."},
            // diffusion conditioning
            {R"(^structure_head\.conditioning\.z_transitions\.(\d+)\.)",
             "structure_head.conditioning.pair_transition_$1."},
            {R"(^structure_head\.conditioning\.s_transitions\.(\d+)\.)",
             "structure_head.conditioning.single_transition_$1."},
            {R"(^structure_head\.conditioning\.z_)", "structure_head.conditioning.pair_"},
            {R"(^structure_head\.conditioning\.s_)", "structure_head.conditioning.single_"},
            {R"((\.conditioning\.(?:pair|single)_transition_\d+)\.out_proj\.)",
             "$1.mlp.down_proj."},
            {R"(\.fourier\.w$)", ".fourier.frequencies"},
            {R"(\.fourier\.b$)", ".fourier.phases"},
            // the three atom transformers
            {R"(\.atom_transformer\.blocks\.(\d+)\.attn\.out_proj\.)",
             ".layers.$1.self_attn.o_proj."},
            {R"(\.atom_transformer\.blocks\.(\d+)\.attn\.)", ".layers.$1.self_attn."},
            {R"(\.atom_transformer\.blocks\.(\d+)\.ffn\.w_up\.)", ".layers.$1.mlp.gate_up_proj."},
            {R"(\.atom_transformer\.blocks\.(\d+)\.ffn\.w_down\.)", ".layers.$1.mlp.down_proj."},
            {R"(\.atom_transformer\.blocks\.(\d+)\.adaln_modulation\.1\.)",
             ".layers.$1.adaln_linear."},
            // the diffusion token transformer: attn_blocks.i and transition_blocks.i are layers.i
            {R"(\.token_transformer\.attn_blocks\.(\d+)\.adaln\.s_scale$)",
             ".token_transformer.layers.$1.input_layernorm.cond_norm.weight"},
            {R"(\.token_transformer\.attn_blocks\.(\d+)\.adaln\.s_gate\.)",
             ".token_transformer.layers.$1.input_layernorm.gate_proj."},
            {R"(\.token_transformer\.attn_blocks\.(\d+)\.adaln\.s_shift\.)",
             ".token_transformer.layers.$1.input_layernorm.shift_proj."},
            {R"(\.token_transformer\.transition_blocks\.(\d+)\.adaln\.s_scale$)",
             ".token_transformer.layers.$1.post_attention_layernorm.cond_norm.weight"},
            {R"(\.token_transformer\.transition_blocks\.(\d+)\.adaln\.s_gate\.)",
             ".token_transformer.layers.$1.post_attention_layernorm.gate_proj."},
            {R"(\.token_transformer\.transition_blocks\.(\d+)\.adaln\.s_shift\.)",
             ".token_transformer.layers.$1.post_attention_layernorm.shift_proj."},
            {R"(\.token_transformer\.attn_blocks\.(\d+)\.out_gate\.)",
             ".token_transformer.layers.$1.attn_gate."},
            {R"(\.token_transformer\.transition_blocks\.(\d+)\.output_gate\.)",
             ".token_transformer.layers.$1.mlp_gate."},
            {R"(\.token_transformer\.transition_blocks\.(\d+)\.lin_swish\.)",
             ".token_transformer.layers.$1.mlp.gate_up_proj."},
            {R"(\.token_transformer\.transition_blocks\.(\d+)\.lin_out\.)",
             ".token_transformer.layers.$1.mlp.down_proj."},
            {R"(\.token_transformer\.attn_blocks\.(\d+)\.(pair_norm|pair_bias_proj)\.)",
             ".token_transformer.layers.$1.$2."},
            {R"(\.token_transformer\.attn_blocks\.(\d+)\.g_proj\.)",
             ".token_transformer.layers.$1.self_attn.gate_proj."},
            {R"(\.token_transformer\.attn_blocks\.(\d+)\.out_proj\.)",
             ".token_transformer.layers.$1.self_attn.o_proj."},
            {R"(\.token_transformer\.attn_blocks\.(\d+)\.(q_proj|kv_proj)\.)",
             ".token_transformer.layers.$1.self_attn.$2."},
            // parcae: loose parameters into its module
            {R"(^parcae_coda\.blocks\.)", "parcae.output_stack.blocks."},
            {R"(^parcae_readout\.)", "parcae.out_proj."},
            {R"(^parcae_b_cont$)", "parcae.input_matrix_continuous"},
            {R"(^parcae_log_a$)", "parcae.log_state_decay"},
            {R"(^parcae_)", "parcae."},
            // pair-update stacks (trunk, LM encoder, coda, MSA encoder, confidence trunk)
            {R"(\.blocks\.(\d+)\.)", ".layers.$1."},
            {R"(\.(tri_mul_(?:in|out))\._engine\.)", ".$1."},
            {R"(\.ffn\.w12\.)", ".mlp.gate_up_proj."},
            {R"(\.ffn\.w3\.)", ".mlp.down_proj."},
            // MSA encoder
            {R"(\.msa_pair_weighted_averaging\.compute_bias\.0\.)",
             ".msa_pair_weighted_averaging.bias_norm."},
            {R"(\.msa_pair_weighted_averaging\.compute_bias\.1\.)",
             ".msa_pair_weighted_averaging.bias_proj."},
            {R"(\.msa_pair_weighted_averaging\.Wv\.)", ".msa_pair_weighted_averaging.v_proj."},
            {R"(\.msa_pair_weighted_averaging\.Wgate\.)",
             ".msa_pair_weighted_averaging.gate_proj."},
            {R"(\.msa_pair_weighted_averaging\.Wout\.)", ".msa_pair_weighted_averaging.o_proj."},
            {R"(\.outer_product_mean\.W\.)", ".outer_product_mean.input_proj."},
            {R"(\.outer_product_mean\.Wout\.)", ".outer_product_mean.output_proj."},
            // confidence head
            {R"(^confidence_head\.s_inputs_norm\.)",
             "confidence_head.input_embedder.single_inputs_norm."},
            {R"(^confidence_head\.z_norm\.)", "confidence_head.input_embedder.pair_norm."},
            {R"(^confidence_head\.s_to_z(_transpose|_prod_in1|_prod_in2|_prod_out)?\.)",
             "confidence_head.input_embedder.single_to_pair$1."},
            {R"(^confidence_head\.(plddt|pae|pde|resolved)_ln\.)", "confidence_head.$1_layernorm."},
            // LM shim
            {R"(^language_model\.base_z_linear\.0\.)", "language_model.pair_input_norm."},
            {R"(^language_model\.base_z_linear\.1\.)", "language_model.pair_proj."},
            {R"(^language_model\.base_z_mlp\.0\.output_mlp\.0\.)",
             "language_model.single_to_pair.output_fc1."},
            {R"(^language_model\.base_z_mlp\.0\.output_mlp\.2\.)",
             "language_model.single_to_pair.output_fc2."},
            {R"(^language_model\.base_z_mlp\.0\.)", "language_model.single_to_pair."},
            {R"(^language_model\.base_z_mlp\.1\.)", "language_model.pair_output_norm."},
            {R"(^language_model\.base_z_combine$)", "language_model.layer_weights"},
        };
        std::vector<Rule> out;
        for (const auto& [p, rep] : r) out.push_back({std::regex(p), rep});
        return out;
    }();
    return rules;
}

// The tower's TransformerEngine names as transformers' EsmcModel names (literal, in order).
const std::vector<std::pair<std::string, std::string>>& tower_renames() {
    static const std::vector<std::pair<std::string, std::string>> r = {
        {"embed.", "embed_tokens."},
        {"transformer.blocks.", "layers."},
        {"transformer.norm.", "norm."},
        {"attn.layernorm_qkv.layer_norm_weight", "input_layernorm.weight"},
        {"attn.layernorm_qkv.layer_norm_bias", "input_layernorm.bias"},
        {"attn.q_ln.", "self_attn.q_norm."},
        {"attn.k_ln.", "self_attn.k_norm."},
        {"attn.out_proj.", "self_attn.o_proj."},
        {"ffn.layer_norm_weight", "post_attention_layernorm.weight"},
        {"ffn.layer_norm_bias", "post_attention_layernorm.bias"},
        {"ffn.fc2_weight", "mlp.down_proj.weight"},
    };
    return r;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
    for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
        s.replace(p, from.size(), to);
}

// `t`'s rows split into `parts` equal blocks named base + names[i] (views of t).
void split_rows(std::map<std::string, Tensor>& out, const Tensor& t, const std::string& base,
                const std::vector<std::string>& names, const std::string& where) {
    const int64_t n = int64_t(names.size()), rows = t.size(0);
    BI_CHECK(t.ndim() == 2 && rows % n == 0, where, "tensor '", base, "...' of shape ",
             shape_str(t.shape()), " does not split into ", n, " row blocks");
    for (int64_t i = 0; i < n; ++i)
        out[base + names[size_t(i)]] = t.narrow0(i * rows / n, (i + 1) * rows / n);
}

// a's rows, then b's (one new tensor in their stored dtype).
Tensor cat_rows(const Tensor& a, const Tensor& b, const std::string& where) {
    BI_CHECK(a.ndim() == 2 && b.ndim() == 2 && a.size(1) == b.size(1) && a.dtype() == b.dtype(),
             where, "cannot join rows of ", shape_str(a.shape()), " and ", shape_str(b.shape()));
    Tensor t = Tensor::empty({a.size(0) + b.size(0), a.size(1)}, a.dtype());
    const size_t na = size_t(a.numel()) * dtype_size(a.dtype());
    std::memcpy(t.raw(), a.raw(), na);
    std::memcpy(static_cast<char*>(t.raw()) + na, b.raw(),
                size_t(b.numel()) * dtype_size(b.dtype()));
    return t;
}

// The conditioning transitions' unfused SwiGLU halves, joined into one gate_up_proj.
const std::regex kTransitionAB(R"(_transition_\d+\.(a|b)_proj\.weight$)");

}  // namespace

bool is_legacy_layout(const io::ModelDir& dir) {
    const json& c = dir.config();
    return !c.contains("model_type") && c.contains("type") && c.contains("d_pair");
}

namespace {

io::ModelDir open_tower(const io::ModelDir& dir) {
    const std::string tower_dir = dir.dir() + "/esmc";
    BI_CHECK(std::filesystem::is_directory(tower_dir), dir.dir(),
             "research-layout ESMFold2 checkpoint: the ESM C tower (biohub/ESMC-6B's config.json ",
             "and safetensors) is expected in ", tower_dir);
    return io::ModelDir::open(tower_dir);
}

}  // namespace

nlohmann::json legacy_config(const io::ModelDir& dir) {
    return map_config(dir.config(), dir, map_esmc_config(open_tower(dir)),
                      dir.dir() + "/config.json");
}

io::ModelDir from_legacy(const io::ModelDir& dir) {
    const std::string where = dir.dir() + "/config.json";
    const io::ModelDir tower = open_tower(dir);
    json cfg = map_config(dir.config(), dir, map_esmc_config(tower), where);

    std::map<std::string, Tensor> out;
    // the trunk: dead confidence tensors dropped, names mapped, fused rows split or joined
    std::map<std::string, Tensor> pending_b;  // conditioning b_proj, joined after its a_proj
    for (const std::string& old : dir.names()) {
        if (old.rfind("esmc.", 0) == 0)
            fail(dir.dir(), cat("research-layout trunk already holds tower tensor '", old, "'"));
        if (old.rfind("confidence_head.s_norm.", 0) == 0 ||
            old.rfind("confidence_head.s_inputs_to_single.", 0) == 0 ||
            old.rfind("confidence_head.s_input_to_s.", 0) == 0)
            continue;  // unused by the released model's forward
        std::string key = old;
        for (const Rule& r : trunk_rules()) key = std::regex_replace(key, r.pattern, r.replacement);
        const Tensor t = dir.get_raw(old);
        if (key.ends_with(".self_attn.Wqkv.weight")) {
            split_rows(out, t, key.substr(0, key.size() - 11),
                       {"q_proj.weight", "k_proj.weight", "v_proj.weight"}, where);
        } else if (key.ends_with(".self_attn.kv_proj.weight")) {
            split_rows(out, t, key.substr(0, key.size() - 14), {"k_proj.weight", "v_proj.weight"},
                       where);
        } else if (std::regex_search(key, kTransitionAB)) {
            pending_b[key] = t;
        } else {
            BI_CHECK(out.emplace(key, t).second, dir.dir(), "two research-layout tensors map to '",
                     key, "'");
        }
    }
    for (const auto& [key, t] : pending_b) {
        if (!key.ends_with(".a_proj.weight")) continue;
        const std::string base = key.substr(0, key.size() - 14);
        auto b = pending_b.find(base + ".b_proj.weight");
        BI_CHECK(b != pending_b.end(), dir.dir(), "research-layout tensor '", base,
                 ".b_proj.weight' (the pair of ", key, ") is missing");
        out[base + ".mlp.gate_up_proj.weight"] = cat_rows(t, b->second, where);  // gate first
    }
    for (const auto& [key, t] : pending_b)
        BI_CHECK(key.ends_with(".a_proj.weight") ||
                     pending_b.count(key.substr(0, key.size() - 14) + ".a_proj.weight"),
                 dir.dir(), "research-layout tensor '", key, "' has no a_proj");

    // the tower: esmc.* only (the masked-LM head and TransformerEngine's extra state dropped)
    for (const std::string& old : tower.names()) {
        if (old.rfind("esmc.", 0) != 0 || old.ends_with("_extra_state")) continue;
        std::string key = old;
        for (const auto& [from, to] : tower_renames()) replace_all(key, from, to);
        const Tensor t = tower.get_raw(old);
        if (key.ends_with("attn.layernorm_qkv.weight"))
            split_rows(
                out, t, key.substr(0, key.size() - 25),
                {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"},
                where);
        else if (key.ends_with("ffn.fc1_weight"))  // gate first, as SwiGLU reads it
            split_rows(out, t, key.substr(0, key.size() - 14),
                       {"mlp.gate_proj.weight", "mlp.up_proj.weight"}, where);
        else
            out[key] = t;
    }
    return io::ModelDir::from_tensors(dir.dir(), std::move(cfg), std::move(out));
}

}  // namespace bioinfer::esmfold2
