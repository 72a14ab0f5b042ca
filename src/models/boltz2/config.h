// Boltz-2's hyper-parameters, read from a checkpoint's `hyper_parameters` (Boltz2.__init__'s
// arguments) with the inference overrides boltz applies at load time, and block counts and optional
// modules taken from the tensors present (the released hyper-parameters are silent or wrong on some).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "io/model_dir.h"

namespace bioinfer::boltz2 {

struct Config {
    int64_t atom_s = 128, atom_z = 16, token_s = 384, token_z = 128;
    int64_t num_bins = 64;            // distogram bins
    int64_t atom_feature_dim = 388;   // ref_pos 3 + charge 1 + element 128 + name chars 256
    int64_t window_queries = 32, window_keys = 128;
    // input embedder
    int64_t embedder_atom_depth = 3, embedder_atom_heads = 4;
    bool add_method_conditioning = true, add_modified_flag = true, add_cyclic_flag = true,
         add_mol_type_feat = true;
    // MSA module
    int64_t msa_s = 64, msa_blocks = 4;
    int64_t pairwise_head_width = 32, pairwise_num_heads = 4;  // triangle attention (all stacks)
    bool msa_use_paired_feature = true;
    // pairformer (trunk)
    int64_t pairformer_blocks = 64, pairformer_heads = 16;
    // score model
    double sigma_data = 16.0;
    int64_t dim_fourier = 256;
    int64_t atom_encoder_depth = 3, atom_encoder_heads = 4;
    int64_t token_transformer_depth = 24, token_transformer_heads = 16;
    int64_t atom_decoder_depth = 3, atom_decoder_heads = 4;
    int64_t conditioning_transition_layers = 2;
    // sampler (boltz 2.2's Boltz2DiffusionParams)
    double gamma_0 = 0.8, gamma_min = 1.0, noise_scale = 1.003, rho = 7.0, step_scale = 1.5;
    double sigma_min = 1e-4, sigma_max = 160.0;
    bool alignment_reverse_diff = true, synchronize_sigmas = true;
    // confidence module
    bool confidence_prediction = true;
    int64_t confidence_blocks = 8, confidence_heads = 16;
    int64_t confidence_dist_bins = 64;
    double confidence_max_dist = 22.0;
    bool add_s_to_z_prod = true, add_s_input_to_s = true, add_z_input_to_z = true;
    int64_t num_plddt_bins = 50, num_pde_bins = 64, num_pae_bins = 64;
    bool use_separate_heads = true, token_level_confidence = true;
    double alpha_pae = 1.0;
    // trunk switches
    bool fix_sym_check = true, cyclic_pos_enc = true, bond_type_feature = true;
    bool predict_bfactor = true, use_templates = true;
    double min_dist = 2.0, max_dist = 22.0;  // distogram range
    // template module (template_args): v2 is Boltz-2's TemplateV2Module
    bool use_templates_v2 = true;
    int64_t template_dim = 64, template_blocks = 2;
    int64_t template_head_width = 32, template_num_heads = 4;
    double template_min_dist = 3.25, template_max_dist = 50.75;
    int64_t template_num_bins = 38;
    double conditioning_cutoff_min = 4.0, conditioning_cutoff_max = 20.0;

    // From a checkpoint's hyper_parameters (m.config()) and its tensors; `where` names the file.
    static Config load(const io::ModelDir& m);
};

// Layers present under `prefix` ("pairformer_module.layers."): the count of distinct indices.
int64_t count_layers(const io::ModelDir& m, const std::string& prefix);

}  // namespace bioinfer::boltz2
