// Boltz-2 hyper-parameters from a checkpoint: see config.h.
#include "models/boltz2/config.h"

#include <algorithm>
#include <set>
#include <type_traits>

namespace bioinfer::boltz2 {
namespace {

template <typename T>
void take(const nlohmann::json& j, const std::string& where, const char* key, T& v) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return;
    v = io::config_value<T>(*it, cat("hyper_parameters key '", key, "'"), where);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)  // sizes, counts, heads
        BI_CHECK(v > 0, where, "hyper_parameters key '", key, "' is out of range: ", it->dump());
}

const nlohmann::json& section(const nlohmann::json& hp, const char* key) {
    static const nlohmann::json empty = nlohmann::json::object();
    auto it = hp.find(key);
    return it != hp.end() && it->is_object() ? *it : empty;
}

}  // namespace

int64_t count_layers(const io::ModelDir& m, const std::string& prefix) {
    std::set<int64_t> idx;
    for (const auto& n : m.names()) {
        if (n.rfind(prefix, 0) != 0) continue;
        const size_t end = n.find('.', prefix.size());
        const std::string k = n.substr(prefix.size(), end - prefix.size());
        // a layer's index; another name under the prefix is no layer (check_consumed names it)
        if (k.empty() || k.size() > 9 ||
            !std::all_of(k.begin(), k.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
            continue;
        idx.insert(std::stoll(k));
    }
    return static_cast<int64_t>(idx.size());
}

Config Config::load(const io::ModelDir& m) {
    Config c;
    const nlohmann::json& hp = m.config();
    const std::string& where = m.dir();
    take(hp, where, "atom_s", c.atom_s);
    take(hp, where, "atom_z", c.atom_z);
    take(hp, where, "token_s", c.token_s);
    take(hp, where, "token_z", c.token_z);
    take(hp, where, "num_bins", c.num_bins);
    take(hp, where, "atom_feature_dim", c.atom_feature_dim);
    take(hp, where, "atoms_per_window_queries", c.window_queries);
    take(hp, where, "atoms_per_window_keys", c.window_keys);
    const auto& emb = section(hp, "embedder_args");
    take(emb, where, "atom_encoder_depth", c.embedder_atom_depth);
    take(emb, where, "atom_encoder_heads", c.embedder_atom_heads);
    take(emb, where, "add_method_conditioning", c.add_method_conditioning);
    take(emb, where, "add_modified_flag", c.add_modified_flag);
    take(emb, where, "add_cyclic_flag", c.add_cyclic_flag);
    take(emb, where, "add_mol_type_feat", c.add_mol_type_feat);
    const auto& msa = section(hp, "msa_args");
    take(msa, where, "msa_s", c.msa_s);
    take(msa, where, "pairwise_head_width", c.pairwise_head_width);
    take(msa, where, "pairwise_num_heads", c.pairwise_num_heads);
    take(msa, where, "use_paired_feature", c.msa_use_paired_feature);
    const auto& pf = section(hp, "pairformer_args");
    take(pf, where, "num_heads", c.pairformer_heads);
    const auto& sm = section(hp, "score_model_args");
    take(sm, where, "sigma_data", c.sigma_data);
    take(sm, where, "dim_fourier", c.dim_fourier);
    take(sm, where, "atom_encoder_depth", c.atom_encoder_depth);
    take(sm, where, "atom_encoder_heads", c.atom_encoder_heads);
    take(sm, where, "token_transformer_depth", c.token_transformer_depth);
    take(sm, where, "token_transformer_heads", c.token_transformer_heads);
    take(sm, where, "atom_decoder_depth", c.atom_decoder_depth);
    take(sm, where, "atom_decoder_heads", c.atom_decoder_heads);
    take(sm, where, "conditioning_transition_layers", c.conditioning_transition_layers);
    // boltz predict overrides the sampler's parameters at load with Boltz2DiffusionParams'
    // defaults (the values Config starts with); the stored ones are training values.
    const auto& conf = section(hp, "confidence_model_args");
    take(hp, where, "confidence_prediction", c.confidence_prediction);
    take(conf, where, "num_dist_bins", c.confidence_dist_bins);
    take(conf, where, "max_dist", c.confidence_max_dist);
    take(conf, where, "add_s_to_z_prod", c.add_s_to_z_prod);
    take(conf, where, "add_s_input_to_s", c.add_s_input_to_s);
    take(conf, where, "add_z_input_to_z", c.add_z_input_to_z);
    take(section(conf, "pairformer_args"), where, "num_heads", c.confidence_heads);
    const auto& ca = section(conf, "confidence_args");
    take(ca, where, "num_plddt_bins", c.num_plddt_bins);
    take(ca, where, "num_pde_bins", c.num_pde_bins);
    take(ca, where, "num_pae_bins", c.num_pae_bins);
    take(ca, where, "use_separate_heads", c.use_separate_heads);
    take(hp, where, "token_level_confidence", c.token_level_confidence);
    take(hp, where, "alpha_pae", c.alpha_pae);
    take(hp, where, "fix_sym_check", c.fix_sym_check);
    take(hp, where, "cyclic_pos_enc", c.cyclic_pos_enc);
    take(hp, where, "min_dist", c.min_dist);
    take(hp, where, "max_dist", c.max_dist);
    take(hp, where, "conditioning_cutoff_min", c.conditioning_cutoff_min);
    take(hp, where, "conditioning_cutoff_max", c.conditioning_cutoff_max);
    take(hp, where, "use_templates_v2", c.use_templates_v2);
    const auto& tmpl = section(hp, "template_args");
    take(tmpl, where, "template_dim", c.template_dim);
    take(tmpl, where, "pairwise_head_width", c.template_head_width);
    take(tmpl, where, "pairwise_num_heads", c.template_num_heads);
    take(tmpl, where, "min_dist", c.template_min_dist);
    take(tmpl, where, "max_dist", c.template_max_dist);
    take(tmpl, where, "num_bins", c.template_num_bins);
    // Optional modules and block counts: what the tensors hold decides.
    c.bond_type_feature = m.has("token_bonds_type.weight");
    c.predict_bfactor = m.has("bfactor_module.bfactor.weight");
    c.use_templates = count_layers(m, "template_module.pairformer.layers.") > 0 ||
                      m.has("template_module.z_proj.weight");
    c.confidence_prediction = c.confidence_prediction &&
                              count_layers(m, "confidence_module.pairformer_stack.layers.") > 0;
    c.template_blocks = count_layers(m, "template_module.pairformer.layers.");
    c.pairformer_blocks = count_layers(m, "pairformer_module.layers.");
    c.msa_blocks = count_layers(m, "msa_module.layers.");
    if (c.confidence_prediction)
        c.confidence_blocks = count_layers(m, "confidence_module.pairformer_stack.layers.");
    c.token_transformer_depth =
        count_layers(m, "structure_module.score_model.token_transformer.layers.");
    BI_CHECK(c.pairformer_blocks > 0, m.dir(), "not a Boltz-2 checkpoint: no pairformer_module.layers.*");
    return c;
}

}  // namespace bioinfer::boltz2
