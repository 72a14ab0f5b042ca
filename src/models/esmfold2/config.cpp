#include "models/esmfold2/config.h"

#include "bioinfer/error.h"
#include "io/model_dir.h"

namespace bioinfer::esmfold2 {
namespace {

template <typename T>
T get_or(const nlohmann::json& j, const char* key, T dflt, const std::string& where) {
    return io::config_get_or<T>(j, key, dflt, where);
}

const nlohmann::json& sub(const nlohmann::json& j, const char* key) {
    static const nlohmann::json empty = nlohmann::json::object();
    auto it = j.find(key);
    return it != j.end() && it->is_object() ? *it : empty;
}

AtomStackConfig atom_stack(const nlohmann::json& j, int64_t output_dim, const std::string& where) {
    AtomStackConfig a;
    a.hidden = get_or<int64_t>(j, "hidden_size", a.hidden, where);
    a.output_dim = get_or<int64_t>(j, "output_dim", output_dim, where);
    a.layers = get_or<int64_t>(j, "num_hidden_layers", a.layers, where);
    a.heads = get_or<int64_t>(j, "num_attention_heads", a.heads, where);
    BI_CHECK(a.hidden > 0 && a.heads > 0 && a.hidden % a.heads == 0, where,
             "atom_encoder: hidden_size ", a.hidden, " does not split into ", a.heads, " heads");
    a.head_dim = get_or<int64_t>(j, "head_dim", a.hidden / a.heads, where);
    a.intermediate = get_or<int64_t>(j, "intermediate_size", a.intermediate, where);
    a.spatial_base = get_or<double>(j, "spatial_rope_base_frequency", a.spatial_base, where);
    a.uid_base = get_or<double>(j, "uid_rope_base_frequency", a.uid_base, where);
    a.spatial_pairs = get_or<int64_t>(j, "num_spatial_rope_pairs_per_axis", a.spatial_pairs, where);
    a.uid_pairs = get_or<int64_t>(j, "num_uid_rope_pairs", a.uid_pairs, where);
    BI_CHECK(a.head_dim * a.heads == a.hidden && a.head_dim % 2 == 0, where,
             "atom_encoder: head_dim ", a.head_dim, " x ", a.heads, " heads != hidden_size ",
             a.hidden);
    BI_CHECK(3 * a.spatial_pairs + a.uid_pairs <= a.head_dim / 2, where,
             "atom_encoder: the 3D rotary embedding needs ", 3 * a.spatial_pairs + a.uid_pairs,
             " pairs, more than the ", a.head_dim / 2, " of a head");
    return a;
}

}  // namespace

Config Config::from_json(const nlohmann::json& j, const std::string& where) {
    Config c;
    const std::string type = get_or<std::string>(j, "model_type", "", where);
    BI_CHECK(type == "esmfold2", where, "model_type '", type, "' is not ESMFold2");
    c.c_s = get_or<int64_t>(j, "hidden_size", c.c_s, where);
    c.c_z = get_or<int64_t>(j, "pairwise_hidden_size", c.c_z, where);
    c.c_inputs = get_or<int64_t>(j, "single_inputs_size", c.c_inputs, where);
    c.pair_ff = get_or<int64_t>(j, "pair_transition_intermediate_size", c.pair_ff, where);
    c.window = get_or<int64_t>(j, "sliding_window", c.window, where);
    c.num_loops = get_or<int64_t>(j, "num_loops", c.num_loops, where);
    c.res_types = get_or<int64_t>(j, "num_res_types", c.res_types, where);
    c.elements = get_or<int64_t>(j, "max_atomic_number", c.elements, where);
    c.char_vocab = get_or<int64_t>(j, "char_vocab_size", c.char_vocab, where);
    c.max_chars = get_or<int64_t>(j, "max_chars", c.max_chars, where);
    c.max_atoms_per_token = get_or<int64_t>(j, "max_atoms_per_token", c.max_atoms_per_token, where);
    c.atom_features = get_or<int64_t>(j, "atom_feature_dim",
                                      3 + 1 + 1 + c.elements + c.char_vocab * c.max_chars, where);
    c.trunk_layers = get_or<int64_t>(j, "folding_trunk_num_hidden_layers", c.trunk_layers, where);
    c.coda_layers = get_or<int64_t>(j, "parcae_num_coda_layers", c.coda_layers, where);
    c.relpos_bins = get_or<int64_t>(j, "num_relative_residx_bins", c.relpos_bins, where);
    c.chain_bins = get_or<int64_t>(j, "num_relative_chain_bins", c.chain_bins, where);
    BI_CHECK(c.atom_features == 5 + c.elements + c.char_vocab * c.max_chars, where,
             "atom_feature_dim ", c.atom_features, " is not 5 + max_atomic_number + ",
             "char_vocab_size * max_chars");
    BI_CHECK(c.window > 0 && c.window % 2 == 0, where, "sliding_window ", c.window,
             " must be a positive even width");
    BI_CHECK(c.num_loops >= 0, where, "num_loops must be >= 0");

    c.atom = atom_stack(sub(j, "atom_encoder"), 384, where);
    BI_CHECK(c.atom.output_dim == c.c_inputs - (2 * c.res_types + 1), where,
             "atom_encoder.output_dim ", c.atom.output_dim, " != single_inputs_size - 67");

    const nlohmann::json& head = sub(j, "structure_head");
    const nlohmann::json& dm = sub(head, "diffusion_module");
    auto& d = c.diffusion;
    d.sigma_data = get_or<double>(dm, "sigma_data", d.sigma_data, where);
    d.hidden = get_or<int64_t>(dm, "hidden_size", d.hidden, where);
    d.fourier = get_or<int64_t>(dm, "fourier_dim", d.fourier, where);
    d.layers = get_or<int64_t>(dm, "num_hidden_layers", d.layers, where);
    d.heads = get_or<int64_t>(dm, "num_attention_heads", d.heads, where);
    BI_CHECK(d.heads > 0 && d.hidden % d.heads == 0, where, "diffusion_module: hidden_size ",
             d.hidden, " does not split into ", d.heads, " heads");
    d.head_dim = get_or<int64_t>(dm, "head_dim", d.hidden / d.heads, where);
    d.intermediate = get_or<int64_t>(dm, "intermediate_size", d.intermediate, where);
    d.pair_intermediate = get_or<int64_t>(dm, "pair_intermediate_size", d.pair_intermediate, where);
    c.diff_atom = atom_stack(sub(dm, "atom_encoder"), d.hidden, where);
    BI_CHECK(c.diff_atom.output_dim == d.hidden, where,
             "diffusion atom_encoder.output_dim != diffusion hidden_size");

    auto& s = c.sampler;
    s.distogram_bins = get_or<int64_t>(head, "num_distogram_bins", s.distogram_bins, where);
    s.samples = get_or<int64_t>(head, "num_diffusion_samples", s.samples, where);
    s.num_steps = get_or<int64_t>(head, "inference_num_steps", s.num_steps, where);
    s.gamma_0 = get_or<double>(head, "gamma_0", s.gamma_0, where);
    s.gamma_min = get_or<double>(head, "gamma_min", s.gamma_min, where);
    s.noise_scale = get_or<double>(head, "noise_scale", s.noise_scale, where);
    s.step_scale = get_or<double>(head, "step_scale", s.step_scale, where);
    s.sigma_max_ratio = get_or<double>(head, "inference_sigma_max_ratio", s.sigma_max_ratio, where);
    s.sigma_min_ratio = get_or<double>(head, "inference_sigma_min_ratio", s.sigma_min_ratio, where);
    s.exponent = get_or<double>(head, "inference_exponent", s.exponent, where);
    // a null cap disables it; an absent key keeps the code's default
    const auto cap = head.find("inference_sigma_cap");
    s.capped = cap == head.end() || !cap->is_null();
    s.sigma_cap = get_or<double>(head, "inference_sigma_cap", s.sigma_cap, where);

    const nlohmann::json& ch = sub(j, "confidence_head");
    auto& k = c.confidence;
    k.layers = get_or<int64_t>(ch, "num_hidden_layers", k.layers, where);
    k.plddt_bins = get_or<int64_t>(ch, "num_plddt_bins", k.plddt_bins, where);
    k.pde_bins = get_or<int64_t>(ch, "num_pde_bins", k.pde_bins, where);
    k.pae_bins = get_or<int64_t>(ch, "num_pae_bins", k.pae_bins, where);
    k.distogram_bins = get_or<int64_t>(ch, "distogram_bins", k.distogram_bins, where);
    k.min_dist = get_or<double>(ch, "min_dist", k.min_dist, where);
    k.max_dist = get_or<double>(ch, "max_dist", k.max_dist, where);
    k.eps = get_or<double>(ch, "eps", k.eps, where);

    const nlohmann::json& me = sub(j, "msa_encoder");
    auto& m = c.msa;
    m.enabled = get_or<bool>(me, "enabled", m.enabled, where);
    m.hidden = get_or<int64_t>(me, "hidden_size", m.hidden, where);
    m.outer = get_or<int64_t>(me, "outer_hidden_size", m.outer, where);
    m.layers = get_or<int64_t>(me, "num_hidden_layers", m.layers, where);
    m.heads = get_or<int64_t>(me, "num_attention_heads", m.heads, where);
    m.head_dim = get_or<int64_t>(me, "head_dim", m.head_dim, where);
    m.intermediate = get_or<int64_t>(me, "intermediate_size", m.intermediate, where);

    const nlohmann::json& le = sub(j, "lm_encoder");
    c.lm.layers = get_or<int64_t>(le, "num_hidden_layers", c.lm.layers, where);
    c.lm.dropout = get_or<double>(le, "lm_dropout", c.lm.dropout, where);
    c.lm.per_loop = get_or<bool>(le, "per_loop_lm_dropout", c.lm.per_loop, where);
    BI_CHECK(c.lm.dropout >= 0 && c.lm.dropout < 1, where, "lm_dropout must lie in [0, 1)");

    c.esmc = sub(j, "esmc_config");
    BI_CHECK(!c.esmc.empty(), where, "config.json lacks the ESM C tower's esmc_config");
    return c;
}

}  // namespace bioinfer::esmfold2
