// Boltz-2's InputEmbedder (boltz/model/modules/trunkv2.py: s_inputs from the atom encoder and the
// token features) and DiffusionConditioning (boltz/model/modules/diffusion_conditioning.py: the
// score model's conditioning, computed once per trunk output and reused by every sampling step).
#pragma once
#include <cstdint>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "models/boltz2/atom_attention.h"
#include "models/boltz2/config.h"
#include "models/boltz2/features.h"
#include "nn/pair_seq.h"
#include "nn/transformer.h"

namespace bioinfer::boltz2 {

// s_inputs (N, token_s) = AtomAttentionEncoder(AtomEncoder(feats)) + res_type_encoding(res_type)
//   + msa_profile_encoding([profile | deletion_mean]) + method, modified, cyclic
//   (Linear(min(cyclic_period, 1))) and mol_type conditionings (each when the checkpoint has it).
struct InputEmbedder {
    AtomEncoder atom_encoder;            // input_embedder.atom_encoder (no structure prediction)
    PairBiasProjection atom_enc_proj_z;  // one LN -> Linear(atom_z -> depth * heads)
    AtomAttentionEncoder atom_attention; // input_embedder.atom_attention_encoder
    nn::Linear res_type, msa_profile;    // (token_s, 33), (token_s, 34), no bias
    Tensor method, modified, mol_type;   // embedding tables (rows, token_s); undefined: off
    nn::Linear cyclic;                   // (token_s, 1); undefined: off
    int64_t window_q = 0, window_k = 0;  // the config's window_queries / window_keys

    // Intermediates a test compares with the reference.
    struct Trace {
        AtomEncoderOut atoms;  // q, c (A, atom_s), p (K, W, H, atom_z)
        Tensor a;              // (N, token_s) the atom attention encoder's output
    };

    static InputEmbedder load(const io::ModelDir& m, const Config& cfg);
    // -> s_inputs (N, token_s)
    Tensor forward(const Features& f, Trace* trace = nullptr) const;
};

// What DiffusionConditioning hands the score model (boltz's q, c, to_keys, atom_enc_bias,
// atom_dec_bias, token_trans_bias, batch dim dropped), plus the layout its atom modules read.
struct DiffusionConditioningOut {
    AtomLayout layout;       // the windows (boltz's to_keys) and atom/token tables
    Tensor z;                // (N, N, token_z) the pairwise conditioner's output
    Tensor q, c;             // (A, atom_s): q the embedded atom features, c + s_trunk conditioning
    Tensor atom_enc_bias;    // (K, W, H, atom_encoder_depth * atom_encoder_heads)
    Tensor atom_dec_bias;    // (K, W, H, atom_decoder_depth * atom_decoder_heads)
    Tensor token_trans_bias; // (N, N, token_transformer_depth * token_transformer_heads), or
                             // undefined when forward was asked not to make it
};

// boltz's PairwiseConditioning (Algorithm 21): z = Linear(LN(cat(a, b))) over two pair tensors,
// then z += Transition(z) per transition (LN, silu(fc1) * fc2, fc3, no biases).
struct PairwiseConditioner {
    nn::LayerNorm init_ln;  // over 2 token_z
    nn::Linear init;        // (token_z, 2 token_z), no bias
    std::vector<nn::ResidueMlp> transitions;
    // <prefix>.dim_pairwise_init_proj.{0,1}, <prefix>.transitions.<k>
    static PairwiseConditioner load(const io::ModelDir& m, const std::string& prefix,
                                    int64_t token_z, int64_t num_transitions);
    // a, b (N, N, token_z) -> (N, N, token_z), a block of pair rows at a time (no (N * N,
    // 2 token_z) temporary)
    Tensor operator()(const Tensor& a, const Tensor& b) const;
};

// z = PairwiseConditioning(cat(z_trunk, relpos)) = Linear(LN(cat)) then z += Transition(z) x2;
// q, c, p = AtomEncoder(structure prediction: s_trunk, z); per-layer biases from p (atom
// encoder / decoder) and z (token transformer), each layer's LN -> Linear, concatenated.
struct DiffusionConditioning {
    PairwiseConditioner pairwise;
    AtomEncoder atom_encoder;
    PairBiasProjection atom_enc_proj_z, atom_dec_proj_z, token_trans_proj_z;
    int64_t window_q = 0, window_k = 0;  // the config's window_queries / window_keys

    static DiffusionConditioning load(const io::ModelDir& m, const Config& cfg);
    // s_trunk (N, token_s), z_trunk (N, N, token_z), relpos (N, N, token_z) (the trunk's relative
    // position encoding). token_bias = false leaves token_trans_bias undefined (a caller that
    // takes the per-layer biases from token_bias_layers(out.z) instead).
    DiffusionConditioningOut forward(const Tensor& s_trunk, const Tensor& z_trunk,
                                     const Tensor& relpos, const Features& f,
                                     bool token_bias = true) const;
    // The token transformer's pair bias per layer, head-major: layer l's (heads, N, N) equals
    // channels [l * heads, (l + 1) * heads) of token_trans_bias permuted, made from z (N, N,
    // token_z) a block of pair rows at a time, so neither (N, N, depth * heads) nor a second copy
    // of it exists (DiffusionTransformer::prepare_layers takes them).
    std::vector<Tensor> token_bias_layers(const Tensor& z) const;
};

}  // namespace bioinfer::boltz2
