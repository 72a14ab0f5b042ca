// ESMFold2's hyper-parameters (transformers' EsmFold2Config, config.json `model_type`
// "esmfold2"): the widths of every stage, the trunk's depths, the sampler's schedule and the
// bundled ESM C tower's own config. Defaults are the code's; a checkpoint's config.json sets the
// released values, read at load time (never assumed).
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace bioinfer::esmfold2 {

// A sliding-window atom transformer with 3D RoPE (the inputs embedder's and the denoiser's).
struct AtomStackConfig {
    int64_t hidden = 128, output_dim = 384, layers = 3, heads = 4, head_dim = 32;
    int64_t intermediate = 256;
    double spatial_base = 20.0, uid_base = 10000.0;
    int64_t spatial_pairs = 2, uid_pairs = 10;  // rotary pairs per spatial axis, for the uid
};

struct Config {
    int64_t c_s = 384;       // the confidence head's single width (hidden_size)
    int64_t c_z = 256;       // pair width
    int64_t c_inputs = 451;  // s_inputs: atom aggregation + res_type + profile + deletion_mean
    int64_t pair_ff = 1024;  // pair transition's SwiGLU width
    int64_t window = 128;    // the atom attention's total window width (keys within window / 2)
    int64_t num_loops = 10;  // trunk loops; the trunk runs num_loops + 1 times
    int64_t res_types = 33, elements = 128, char_vocab = 64, max_chars = 4;
    int64_t max_atoms_per_token = 23, atom_features = 389;
    int64_t trunk_layers = 24, coda_layers = 2;
    int64_t relpos_bins = 32, chain_bins = 2;
    AtomStackConfig atom;       // the inputs embedder's
    AtomStackConfig diff_atom;  // the denoiser's
    struct Diffusion {
        double sigma_data = 16.0;
        int64_t hidden = 768, fourier = 256, layers = 12, heads = 16, head_dim = 48;
        int64_t intermediate = 1536, pair_intermediate = 512;
    } diffusion;
    struct Sampler {
        int64_t distogram_bins = 128, samples = 8, num_steps = 68;
        double gamma_0 = 0.605, gamma_min = 1.107, noise_scale = 0.0, step_scale = 1.0;
        double sigma_max_ratio = 160.0, sigma_min_ratio = 4e-4, exponent = 8.0;
        bool capped = true;
        double sigma_cap = 256.0;
    } sampler;
    struct Confidence {
        int64_t layers = 4, plddt_bins = 50, pde_bins = 64, pae_bins = 64, distogram_bins = 128;
        double min_dist = 2.0, max_dist = 52.0, eps = 1e-6;
    } confidence;
    struct Msa {
        bool enabled = true;
        int64_t hidden = 128, outer = 32, layers = 4, heads = 8, head_dim = 32, intermediate = 512;
    } msa;
    struct Lm {
        int64_t layers = 4;
        double dropout = 0.25;
        bool per_loop = true;
    } lm;
    nlohmann::json esmc;  // the bundled ESM C tower's config (esmc_config)

    // From transformers' config.json; `where` names the file in errors (a missing or mistyped key,
    // widths that do not fit together).
    static Config from_json(const nlohmann::json& j, const std::string& where);
};

}  // namespace bioinfer::esmfold2
