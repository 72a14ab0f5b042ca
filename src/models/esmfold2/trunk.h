// ESMFold2's trunk (transformers' EsmFold2Model.forward): the inputs embedder (s_inputs from the
// atom encoder and the residue features; z_init from s_inputs, the chain-aware relative position
// and the token bonds), the LM shim (ESM C's hidden states to a pair), the MSA encoder, and the
// "parcae" linear recurrence: per loop, z = decay * z + LN(inject) B^T with inject = the MSA
// encoder's pair (or z_init) + the LM encoder on the dropped-out LM pair, then the folding trunk;
// after the loops the readout and coda, and the distogram of z + z^T.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "models/esmc.h"
#include "models/esmfold2/atom_stack.h"
#include "models/esmfold2/config.h"
#include "nn/msa_blocks.h"
#include "nn/pair_seq.h"
#include "nn/pairformer.h"
#include "nn/relpos.h"
#include "nn/triangle.h"

namespace bioinfer::esmfold2 {

using Tap = std::function<void(const std::string& name, const Tensor& t)>;

// The featurised target, as EsmFold2Model.fold takes it (one chain or several; no padding tokens).
struct Inputs {
    int64_t tokens = 0;
    std::vector<int32_t> token_index, residue_index, asym_id, sym_id, entity_id, mol_type;
    std::vector<int32_t> res_type;   // boltz's 33-class residue vocabulary
    std::vector<int32_t> input_ids;  // ESM C tokens of the residues
    std::vector<int32_t> rep_atom;   // each token's representative atom (CB, CA for GLY / UNK)
    AtomFeatures atoms;
    // MSA, rows (query first) x tokens: residue classes, deletion flags and values; deletion_mean
    // per token
    int64_t msa_rows = 0;
    std::vector<int32_t> msa;
    std::vector<float> has_deletion, deletion_value, deletion_mean;
};

// ESM C's hidden states at the residues (L, layers + 1, D) as the reference gathers them: each
// chain (by asym_id, ascending) its own <cls> residues <eos> sequence, attending within itself;
// layer 0 the embedding, the last the final LayerNorm's output.
Tensor lm_hidden_states(esm::EsmcModel& lm, const Inputs& in);

// EsmFold2PairUpdateLayer (z += tri_mul_out(z); z += tri_mul_in(z); z += SwiGLU(LN(z))) is the
// pairformer's pair update without triangle attention: nn::PairformerNoSeqLayer with
// nn::PairformerNames::esmfold2(), in stacks of nn::PairformerNoSeqStack.

// The LM shim: per layer LN + projection to the pair width, mixed by softmax(layer_weights), then
// single-to-pair (downproject; [x_i * x_j, x_i - x_j]; fc1, GELU, fc2) and a LayerNorm.
struct LmShim {
    nn::LayerNorm in_norm;
    nn::Linear proj;
    std::vector<float> weights;  // softmax of layer_weights (layers + 1)
    nn::Linear down, fc1, fc2;
    nn::LayerNorm out_norm;
    static LmShim load(const io::ModelDir& m, const std::string& prefix, int64_t lm_hidden,
                       int64_t lm_layers, int64_t c);
    // hidden (L, layers + 1, D) -> (L, L, C)
    Tensor operator()(const Tensor& hidden) const;
};

// EsmFold2MSAEncoder: m = embed([one-hot(msa), has_deletion, deletion_value]) + project(s_inputs);
// per layer pair += OPM(m) (divided after its projection, bias included); except in the last
// layer m += PWA(m, pair), m += transition(m); then the pair update layer.
struct MsaEncoder {
    nn::Linear embed, project;
    struct Layer {
        nn::OuterProductMean opm;
        bool updates_msa = false;
        nn::PairWeightedAveraging pwa;
        nn::ResidueMlp transition;
        nn::PairformerNoSeqLayer pair;
    };
    std::vector<Layer> layers;
    static MsaEncoder load(const io::ModelDir& m, const std::string& prefix, const Config& cfg);
    // The encoder's pair for z (L, L, C) (consumed), s_inputs (L, c_inputs) and the MSA.
    Tensor operator()(Tensor z, const Tensor& s_inputs, const Inputs& in, int64_t res_types) const;
};

// The random draws of a trunk run: the initial pair state (trunc_normal_, std sqrt(2 / (5 C)),
// clipped at 3 std) and each loop's LM dropout keep mask (1 kept, 0 dropped; kept values are
// scaled by 1 / (1 - p)). Tests inject the reference's.
struct TrunkDraws {
    std::function<Tensor(const Shape& shape)> initial_pair;
    std::function<Tensor(int64_t loop, const Shape& shape, double p)> dropout_keep;
    // Seeded draws with the reference's distributions (not its numbers).
    static TrunkDraws seeded(uint64_t seed);
};

struct TrunkOutput {
    Tensor s_inputs;   // (L, c_inputs)
    Tensor relpos;     // (L, L, C)
    Tensor bonds;      // (L, L, C) the token-bond encoding
    Tensor pair;       // (L, L, C) the decoded trunk output
    Tensor distogram;  // (L, L, bins)
};

class Trunk {
  public:
    static Trunk load(const io::ModelDir& m, const Config& cfg);
    const Config& config() const { return cfg_; }
    const AtomStack& atom_stack() const { return atoms_; }
    // lm_hidden (L, layers + 1, D): ESM C's hidden states at the residues. `num_loops` < 0: the
    // config's. Taps: embed.atom_embeds, embed.single_inputs, embed.z_init, lm.pair, trunk.init,
    // trunk.lm<k>, trunk.inject<k>, trunk.state<k>, trunk.z<k>, trunk.pair, trunk.distogram.
    TrunkOutput run(const Inputs& in, const Tensor& lm_hidden, TrunkDraws& draws,
                    int64_t num_loops = -1, const Tap& tap = {}) const;

  private:
    Config cfg_;
    AtomStack atoms_;
    nn::Linear pair_init_1_, pair_init_2_, token_bonds_;
    nn::ChainRelativePosition relpos_;
    LmShim lm_;
    nn::PairformerNoSeqStack lm_encoder_, folding_trunk_, coda_;
    bool has_msa_ = false;
    MsaEncoder msa_;
    nn::LayerNorm parcae_norm_;
    Tensor decay_;             // (C) exp(-softplus(log_delta) exp(log_state_decay))
    nn::Linear input_matrix_;  // x -> x B^T, B = softplus(log_delta)[:, None] * b_cont
    nn::Linear readout_;
    nn::Linear distogram_;
};

}  // namespace bioinfer::esmfold2
