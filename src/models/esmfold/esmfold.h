// ESMFold (Hugging Face EsmForProteinFolding checkpoints, e.g. facebook/esmfold_v1): an ESM-2
// stem whose hidden states are mixed into the sequence state, a folding trunk of triangular
// self-attention blocks with recycling, AlphaFold 2's structure module, and the confidence heads
// (pLDDT, pTM, PAE) and distogram. One target (a chain, or chains joined by a linker) at a time.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "models/esm2.h"
#include "models/esmfold/structure_module.h"
#include "nn/heads.h"
#include "nn/pair_seq.h"
#include "nn/relpos.h"
#include "nn/triangle.h"

namespace bioinfer::esmfold {

struct TrunkConfig {
    int64_t blocks = 48, c_s = 1024, c_z = 128, seq_head_width = 32, pair_head_width = 32;
    int64_t position_bins = 32, max_recycles = 4;
};

// Checkpoint names of one folding-trunk block relative to its prefix ("trunk.blocks.<b>"):
// transformers' EsmFoldTriangularSelfAttentionBlock. Each sub-block: its prefix, then its map.
struct TrunkBlockNames {
    std::string ln_seq = "layernorm_1";
    std::string pair_to_seq = "pair_to_sequence";
    nn::PairToSequenceNames pair_to_seq_names;
    std::string seq_attention = "seq_attention";
    nn::GatedBiasedAttentionNames seq_attention_names;
    std::string mlp_seq = "mlp_seq.mlp", mlp_pair = "mlp_pair.mlp";
    nn::ResidueMlpNames mlp_names;
    std::string seq_to_pair = "sequence_to_pair";
    nn::SequenceToPairNames seq_to_pair_names;
    std::string tri_mul_out = "tri_mul_out", tri_mul_in = "tri_mul_in";
    nn::TriangleMultiplicationNames tri_mul_names;
    std::string tri_att_start = "tri_att_start", tri_att_end = "tri_att_end";
    nn::TriangleAttentionNames tri_att_names;
};

// ESMFold's name map for its blocks (the stem is ESM-2's, under "esm.").
struct EsmFoldNames {
    std::string blocks = "trunk.blocks";  // + "." + index
    TrunkBlockNames block;
    std::string structure_module = "trunk.structure_module";
    StructureModuleNames structure;
};

struct EsmFoldConfig {
    TrunkConfig trunk;
    StructureModuleConfig sm;
    int64_t lddt_hidden = 128;
    bool embed_aa = true;
    bool fp16_esm = true;  // upstream runs the stem in fp16; recorded, bioinfer computes in fp32
    static EsmFoldConfig from_json(const nlohmann::json& cfg, const std::string& where);
};

// One target: AlphaFold residue indices (0..19, 20 = X) and residue numbers (chain offsets
// included), as fair-esm's encode_sequence makes them.
struct Target {
    std::vector<int32_t> aatype;
    std::vector<int64_t> residue_index;
};

struct FoldOptions {
    int num_recycles = -1;  // extra passes through the trunk; -1: the checkpoint's default
    int64_t chunk = 0;      // pair rows per chunk in the trunk; 0: automatic
    // Progress: (stage, step, steps), e.g. ("trunk", pass, passes).
    std::function<void(const std::string&, int, int)> progress;
    // Observer of named intermediates (tests): "esm_s_combined", "trunk.pass<p>.block<b>.s"/".z",
    // "recycle_bins.<p>".
    std::function<void(const std::string&, const Tensor&)> tap;
    // When set, receives the seconds spent in each kind of trunk sub-block, summed over blocks
    // and passes ("tri_mul_out", "tri_att_start", "mlp_pair", ...): the benchmark's breakdown.
    std::map<std::string, double>* trunk_profile = nullptr;
};

struct FoldOutput {
    Tensor s_s, s_z;                       // trunk outputs (L, c_s), (L, L, c_z)
    StructureOutput structure;             // frames, positions, angles, states per block
    Tensor atom37, atom37_exists;          // (L, 37, 3) Angstrom, (L, 37)
    Tensor plddt;                          // (L, 37) in [0, 1]
    Tensor pae;                            // (L, L) Angstrom
    float ptm = 0.0f;
    Tensor distogram_logits;               // (L, L, 64), symmetric
    Tensor lm_logits;                      // (L, 23)
    double seconds_stem = 0, seconds_trunk = 0, seconds_structure = 0, seconds_heads = 0;
};

class EsmFoldModel {
public:
    static std::unique_ptr<EsmFoldModel> load(const io::ModelDir& dir);
    const EsmFoldConfig& config() const { return cfg_; }
    FoldOutput fold(const Target& t, const FoldOptions& opts = {}) const;

private:
    struct Block {
        nn::LayerNorm ln_seq;
        nn::PairToSequence pair_to_seq;
        nn::GatedBiasedAttention seq_attention;
        nn::ResidueMlp mlp_seq, mlp_pair;
        nn::SequenceToPair seq_to_pair;
        nn::TriangleMultiplication tri_mul_out, tri_mul_in;
        nn::TriangleAttention tri_att_start, tri_att_end;
    };
    void trunk_block(const Block& b, Tensor& s, Tensor& z, int64_t chunk,
                     std::map<std::string, double>* profile) const;

    EsmFoldConfig cfg_;
    std::unique_ptr<esm::Esm2Model> esm_;
    std::vector<int32_t> af2_to_esm_;  // AlphaFold index + 1 (0: padding) -> ESM token
    std::vector<float> esm_combine_;   // softmax of esm_s_combine, per stem layer
    nn::LayerNorm esm_ln_;
    nn::Linear esm_mlp1_, esm_mlp2_;
    Tensor aa_embedding_;  // (23, c_s)
    nn::RelativePosition relpos_;
    std::vector<Block> blocks_;
    nn::LayerNorm recycle_s_norm_, recycle_z_norm_;
    Tensor recycle_disto_;  // (15, c_z)
    nn::Linear trunk2sm_s_, trunk2sm_z_;
    StructureModule sm_;
    nn::DistogramHead distogram_head_;
    nn::AlignedErrorHead ptm_head_;
    nn::Linear lm_head_;
    nn::PlddtHead lddt_head_;
};

// fair-esm's multimer encoding: chains separated by ':' joined by 25 glycines, residue numbers
// offset by 512 per chain; linker residues are flagged so outputs can drop them.
struct EncodedTarget {
    Target target;
    std::vector<uint8_t> is_linker;   // per residue
    std::vector<int32_t> chain;       // chain of each residue (linker: the preceding chain)
    int64_t chains = 1;
};
// seq: upper-case one-letter codes, ':' between chains; letters outside the 20 map to X.
EncodedTarget encode_sequence(const std::string& seq, const std::string& record);

}  // namespace bioinfer::esmfold
