// ESMFold2's sliding-window atom transformer (transformers' EsmFold2AtomEncoder /
// EsmFold2AtomDecoder): per-atom features embedded (LayerNorm(Linear(389 -> c))), layers of
// adaLN-Zero-modulated attention and SwiGLU, each atom attending the atoms within half the window
// of it in index order, queries and keys RMS-normalised per head and rotated by a 3D rotary
// embedding of the reference conformer (x, y, z) and the residue uid; the encoder then averages
// ReLU(Linear(q)) over each token's atoms.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "models/esmfold2/config.h"
#include "nn/atom_windows.h"
#include "nn/pair_seq.h"
#include "nn/transformer.h"

namespace bioinfer::esmfold2 {

// The per-atom reference features of a target, as EsmFold2AtomInputs holds them (atoms padded to
// a multiple of 32; padding atoms last, zero everywhere, invalid).
struct AtomFeatures {
    int64_t atoms = 0, real_atoms = 0, tokens = 0;
    std::vector<float> ref_pos;          // (A, 3)
    std::vector<float> ref_charge;       // (A)
    std::vector<int32_t> ref_element;    // (A) atomic number
    std::vector<int32_t> name_chars;     // (A, 4) ord(c) - 32
    std::vector<int32_t> space_uid;      // (A) the residue counter
    std::vector<int32_t> atom_to_token;  // (A)
};

struct AtomLayer {
    nn::Linear adaln;  // c -> 6c: shift, scale, gate (attention), shift, scale, gate (MLP)
    nn::Linear q, k, v, o, gate;            // c -> c, no biases
    nn::Linear mlp_gate, mlp_up, mlp_down;  // SwiGLU
};

struct AtomStack {
    AtomStackConfig cfg;
    int64_t half_window = 64;  // keys within this many atoms of the query (inclusive)
    nn::Linear embed;          // features -> c (encoders only)
    nn::LayerNorm embed_norm;
    std::vector<AtomLayer> layers;
    nn::Linear to_token;  // c -> output_dim (encoders only)
    // prefix e.g. "input_embedder.atom_encoder"; an encoder has the embedding and the token
    // projection, a decoder neither.
    static AtomStack load(const io::ModelDir& m, const std::string& prefix,
                          const AtomStackConfig& cfg, int64_t window, int64_t atom_features,
                          bool encoder);
};

// What a stack's layers need for one target, computed once: the conditioning's per-layer
// modulation (from `cond`, the base embedding), rotary tables, the window table and mask.
struct AtomContext {
    int64_t atoms = 0, real_atoms = 0, tokens = 0;
    Tensor cond;                  // (A, c) the base embedding
    Tensor cos, sin;              // (A, head_dim / 2)
    nn::AtomWindows windows;      // 32-query blocks, 32 + 2 * half_window keys
    Tensor bias;                  // (NW, heads, 32, keys): 0 attended, lowest float masked
    struct Mod {                  // per layer, (A, c) each
        Tensor shift_a, scale_a, gate_a, shift_f, scale_f, gate_f;  // scale_*: 1 + scale
    };
    std::vector<Mod> mods;
    Tensor token_sum;  // (N, A) 1 where a valid atom belongs to the token
    Tensor inv_count;  // (N) 1 / the token's valid atoms (0 for none)
};

// The base embedding LN(embed(features)) of an encoder stack.
Tensor embed_atoms(const AtomStack& s, const AtomFeatures& f, int64_t elements, int64_t char_vocab);
// The context of `s` for conditioning `cond` (A, c).
AtomContext atom_context(const AtomStack& s, const AtomFeatures& f, const Tensor& cond);
// Runs the layers on q (S * A, c) in place: S samples share the context.
void run_atom_layers(const AtomStack& s, const AtomContext& ctx, Tensor& q);
// The encoder's token output: mean over each token's valid atoms of ReLU(to_token(q)),
// q (S * A, c) -> (S * N, output_dim).
Tensor atoms_to_tokens(const AtomStack& s, const AtomContext& ctx, const Tensor& q);

}  // namespace bioinfer::esmfold2
