// Boltz-2's atom-level modules (boltz/model/modules/encodersv2.py): the atom windows and per-input
// atom/token tables, the AtomEncoder (atom features and the windowed atom-pair representation p),
// and the AtomAttentionEncoder / AtomAttentionDecoder around the windowed AtomTransformer.
#pragma once
#include <cstdint>
#include <string>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "models/boltz2/config.h"
#include "models/boltz2/features.h"
#include "nn/atom_windows.h"
#include "nn/dit.h"
#include "nn/transformer.h"

namespace bioinfer::boltz2 {

// The atom windows and the atom/token tables every atom module reads, made once per input from
// its features (windows: see nn::AtomWindows).
struct AtomLayout : nn::AtomWindows {
    int64_t tokens = 0;  // N
    Tensor atom_token;   // (A) I32: each atom's token (atom_to_token's one-hot), -1 for padding
    Tensor atom_mask;    // (A) F32: atom_pad_mask
    // (N, A) F32: atom_to_token^T / (atoms of the token + 1e-6), boltz's mean aggregation matrix
    Tensor token_mean;

    // window_q / window_k: the config's window_queries / window_keys.
    static AtomLayout make(const Features& f, int64_t window_q, int64_t window_k);

    // x (S * A, D) += t (S * N, D) at each atom's token (boltz's bmm(atom_to_token, t) added);
    // padded atoms get nothing.
    void add_token_rows(const Tensor& t, Tensor& x) const;
    // x (S * A, D) -> (S, N, D): per token, its atoms' sum / (count + 1e-6) (token_mean . x).
    Tensor token_mean_of(const Tensor& x) const;
};

// AtomEncoder's outputs: q (A, atom_s) = the embedded atom features; c (A, atom_s) = q, plus the
// trunk's single conditioning in structure prediction; p (K, W, H, atom_z) the pair representation.
struct AtomEncoderOut {
    Tensor q, c, p;
};

// boltz's AtomEncoder. Atom features (388) = [ref_pos 3 | ref_charge 1 | ref_element 128 |
// ref_atom_name_chars 4 x 64]; c = Linear(features). Within each window, with d = pos[key] -
// pos[query] (keys minus queries) and v = both atoms real and of one ref_space_uid:
//   p = (W_d d + W_r / (1 + |d|^2) + W_v v) v
//     [+ z_to_p(LN(z))[token(query), token(key)]]          (structure prediction)
//     + c_to_p_q(relu(c[query])) + c_to_p_k(relu(c[key]))  (c with s_to_c added when structure)
//   p += p_mlp(p)  (ReLU, Lin, ReLU, Lin, ReLU, Lin)
// In structure prediction c += s_to_c(LN(s_trunk))[token(atom)] (q stays the features' embedding).
struct AtomEncoder {
    bool structure_prediction = false;
    int64_t atom_s = 0, atom_z = 0;
    nn::Linear embed_atom_features;  // (atom_s, 388) with bias
    nn::Linear embed_pair;           // (atom_z, 5): embed_atompair_ref_pos | ref_dist | mask
    nn::LayerNorm s_to_c_ln, z_to_p_ln;  // structure prediction only
    nn::Linear s_to_c, z_to_p;
    nn::Linear c_to_p_q, c_to_p_k;
    nn::Linear p_mlp[3];

    // prefix: the module, e.g. "input_embedder.atom_encoder" or
    // "diffusion_conditioning.atom_encoder".
    static AtomEncoder load(const io::ModelDir& m, const std::string& prefix, const Config& cfg,
                            bool structure_prediction);
    // The per-atom features (A, 388).
    static Tensor atom_features(const Features& f);
    // The windowed geometry (K, W, H, 5) = [d (3), 1 / (1 + |d|^2), v] (ops::atom_pair_geometry).
    static Tensor pair_geometry(const Features& f, const AtomLayout& lay);
    // s_trunk (N, token_s) and z (N, N, token_z) in structure prediction, else null.
    AtomEncoderOut forward(const Features& f, const AtomLayout& lay,
                           const Tensor* s_trunk = nullptr, const Tensor* z = nullptr) const;
    // The same from features and geometry made by the two functions above (tests perturb them).
    AtomEncoderOut forward(const Tensor& atom_feats, const Tensor& geometry,
                           const AtomLayout& lay, const Tensor* s_trunk, const Tensor* z) const;
};

// The per-layer pair biases (K, W, H, layers * heads) of p (K, W, H, atom_z): layer l's
// LN_l -> Linear_l (atom_z -> heads) in channels [l * heads, (l + 1) * heads), as boltz
// concatenates them (one LayerNorm and Linear to layers * heads in the input embedder).
struct PairBiasProjection {
    std::vector<nn::LayerNorm> ln;
    std::vector<nn::Linear> proj;
    // prefix.<l>.0 / prefix.<l>.1 for l < layers (DiffusionConditioning's ModuleLists), or, with
    // layers == 0, one prefix.0 / prefix.1 whose Linear gives every channel (InputEmbedder).
    static PairBiasProjection load(const io::ModelDir& m, const std::string& prefix, int64_t dim,
                                   int64_t layers, int64_t heads);
    // x (..., dim) -> (..., channels)
    Tensor operator()(const Tensor& x) const;
    int64_t channels() const;
};

// The AtomAttentionEncoder's diffusion-mode outputs (boltz's a, q, c): a (S, N, 2 token_s);
// q_skip (S, A, atom_s) the atom transformer's output; c_skip (A, atom_s) the conditioning c,
// shared by the samples (boltz repeats it per sample; values equal).
struct AtomAttentionOut {
    Tensor a, q_skip, c_skip;
};

// boltz's AtomAttentionEncoder: [q += r_to_q(r) per sample (structure prediction)];
// q = AtomTransformer(q, c, bias, atom mask); a = token_mean . relu(atom_to_token_trans(q)).
struct AtomAttentionEncoder {
    bool structure_prediction = false;
    nn::Linear r_to_q;  // (atom_s, 3), structure prediction only
    nn::AtomTransformer transformer;
    nn::Linear to_token;  // (token_s or 2 token_s, atom_s), then ReLU

    // prefix: "input_embedder.atom_attention_encoder" (depth/heads: the embedder's) or
    // "structure_module.score_model.atom_attention_encoder" (the score model's).
    static AtomAttentionEncoder load(const io::ModelDir& m, const std::string& prefix,
                                     const Config& cfg, bool structure_prediction, int64_t depth,
                                     int64_t heads);
    // bias (K, W, H, depth * heads) with the layout's key mask, rearranged once per input.
    nn::DitBias prepare(const Tensor& bias, const AtomLayout& lay) const;
    // Input embedder: q, c (A, atom_s) -> a (N, token_s).
    Tensor forward(const AtomLayout& lay, const Tensor& q, const Tensor& c,
                   const nn::DitBias& bias) const;
    // Diffusion: q, c (A, atom_s) from DiffusionConditioning, r_noisy (S, A, 3) = c_in(sigma) *
    // x_noisy of each of S samples.
    AtomAttentionOut forward(const AtomLayout& lay, const Tensor& q, const Tensor& c,
                             const nn::DitBias& bias, const Tensor& r_noisy) const;
};

// boltz's AtomAttentionDecoder: q = q_skip + a_to_q(a)[token(atom)];
// q = AtomTransformer(q, c_skip, bias); r_update = Linear(LN(q)) (atom_s -> 3).
struct AtomAttentionDecoder {
    nn::Linear a_to_q;  // (atom_s, 2 token_s)
    nn::AtomTransformer transformer;
    nn::LayerNorm out_ln;
    nn::Linear out;  // (3, atom_s)

    // prefix: "structure_module.score_model.atom_attention_decoder".
    static AtomAttentionDecoder load(const io::ModelDir& m, const std::string& prefix,
                                     const Config& cfg);
    nn::DitBias prepare(const Tensor& bias, const AtomLayout& lay) const;
    // a (S, N, 2 token_s) the token transformer's normed output, q_skip (S, A, atom_s), c_skip
    // (A, atom_s) or (S, A, atom_s) -> r_update (S, A, 3).
    Tensor forward(const AtomLayout& lay, const Tensor& a, const Tensor& q_skip,
                   const Tensor& c_skip, const nn::DitBias& bias) const;
};

}  // namespace bioinfer::boltz2
