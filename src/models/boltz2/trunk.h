// Boltz-2's trunk (boltz 2.2.1, inference): s_init / z_init from the input embedding s_inputs and
// the pair features, the recycling passes (the template module runs only where a template is
// given: without one its output is exactly 0), the MSA module, the pairformer, and the distogram
// and b-factor heads. Every piece loads on its own from boltz's state_dict names and runs on one
// target (no token padding).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "models/boltz2/config.h"
#include "models/boltz2/features.h"
#include "nn/heads.h"
#include "nn/msa_blocks.h"
#include "nn/pair_seq.h"
#include "nn/pairformer.h"
#include "nn/relpos.h"
#include "nn/transformer.h"
#include "nn/triangle.h"

namespace bioinfer::boltz2 {

// Observer of named intermediates (tests compare them with the reference's).
using Tap = std::function<void(const std::string& name, const Tensor& t)>;

// The token features the relative position encoding reads (asym_id, residue_index, entity_id,
// token_index, sym_id, cyclic_period).
nn::ChainRelativePosition::Tokens relpos_tokens(const Features& f);

// ContactConditioning: per pair, the learned vector of its class when the pair is UNSPECIFIED
// (class 0) or UNSELECTED (class 1), else encoder([one-hot classes 2..4, t, cos(2 pi (w t + b))])
// with t = (contact_threshold - cutoff_min) / (cutoff_max - cutoff_min).
struct ContactConditioning {
    Tensor fourier_w, fourier_b;  // (C) each: the Fourier embedding's fixed 1 -> C projection
    nn::Linear encoder;  // C + 4 -> C with bias
    Tensor special;      // (2, C): encoding_unspecified, encoding_unselected
    float cutoff_min = 4.0f, cutoff_max = 20.0f;
    // <prefix>.fourier_embedding.proj, .encoder, .encoding_unspecified, .encoding_unselected
    static ContactConditioning load(const io::ModelDir& m, const std::string& prefix, int64_t c,
                                    const Config& cfg);
    // contact_conditioning (L, L, 5) one-hot, contact_threshold (L, L) -> (L, L, C)
    Tensor operator()(const Features& f) const;
};

// The pair terms that depend on the input only, shared by z_init and the confidence module's
// re-embedding: relative positions, token bonds, bond types, contact conditioning.
struct PairInputEmbedding {
    nn::ChainRelativePosition rel_pos;
    nn::Linear token_bonds;   // 1 -> C, no bias
    Tensor token_bonds_type;  // (bond types + 1, C) or undefined (no bond_type_feature)
    ContactConditioning contact;
    // prefix "" (trunk) or "confidence_module."
    static PairInputEmbedding load(const io::ModelDir& m, const std::string& prefix,
                                   const Config& cfg);
    Tensor relpos(const Features& f) const;  // (L, L, C)
    // z (L, L, C) += relpos, then token_bonds, then token_bonds_type, then contact conditioning,
    // in the reference's order; relpos, when given, is relpos(f) already computed.
    void add_to(const Features& f, Tensor& z, const Tensor* relpos = nullptr) const;
};

// One MSA layer: m += PWA(m, z); m += transition(m); z += OPM(m); z = nn::PairformerNoSeqLayer(z).
struct MsaLayer {
    nn::PairWeightedAveraging pair_weighted_averaging;
    nn::ResidueMlp msa_transition;  // SwiGLU, 4 msa_s
    nn::OuterProductMean outer_product_mean;
    nn::PairformerNoSeqLayer pairformer_layer;
    void run(Tensor& z, Tensor& m) const;
};

// boltz's --subsample_msa / --num_subsampled_msa: each time the MSA module runs (every
// recycling pass) it keeps `rows` of the MSA's rows, drawn at random. boltz draws
// torch.randperm(rows in the MSA)[:num_subsampled_msa] from torch's global generator, whose
// stream depends on every draw since seeding (module initialisation included) and cannot be
// reproduced here: the rows are drawn from a generator seeded with `seed` and the pass instead
// (msa_subsample_rows). The module is invariant to row order up to summation order, so with no
// more rows than `rows` subsampling changes the result only by rounding.
struct MsaSubsample {
    int64_t rows = 0;  // rows kept per pass; 0: off (every row, in order)
    uint64_t seed = 0;
};
// The MSA rows pass `pass` keeps, in the order kept: the first min(keep, rows) of a random
// permutation of 0..rows-1 (Fisher-Yates over numpy's Generator.integers, seeded by seed and
// pass), as boltz's randperm(rows)[:keep]. Deterministic for (rows, keep, seed, pass).
std::vector<int64_t> msa_subsample_rows(int64_t rows, int64_t keep, uint64_t seed, int pass);

// MSAModule. Its result is the updated z (the trunk adds it to its input: z + MSAModule(z)).
struct MsaModule {
    int64_t msa_s = 64;
    bool use_paired_feature = true;
    Tensor msa_table;  // (33, msa_s): msa_proj's one-hot columns as rows
    nn::Linear msa_extra;  // [has_deletion, deletion_value (, msa_paired)] -> msa_s
    nn::Linear s_proj;     // token_s -> msa_s
    std::vector<MsaLayer> layers;
    static MsaModule load(const io::ModelDir& m, const Config& cfg);
    // m0 (S, L, msa_s) = msa_proj([one-hot msa, has_deletion, deletion_value, msa_paired])
    //                   + s_proj(s_inputs); with `rows`, only those MSA rows, in that order
    //                   (S = rows->size()).
    Tensor embed(const Features& f, const Tensor& s_inputs,
                 const std::vector<int64_t>* rows = nullptr) const;
    // z (L, L, C) in place: the module's output, on the MSA's `rows` when given (subsampling).
    // The tap sees "msa.layer<k>.z" / ".m".
    void run(Tensor& z, const Tensor& s_inputs, const Features& f, const Tap& tap = {},
             const std::vector<int64_t>* rows = nullptr) const;
};

// TemplateV2Module: per template t, v_t = z_proj(LN(z)) + a_proj(a_t) with a_t[i, j] the
// template's pair features [CB distogram (num_bins), CB mask pair, the vector from frame j to
// CA i in frame j's axes (the reference's "unit vector" is its componentwise sign: it divides by
// the norm over a trailing dimension of size 1), frame mask pair] masked to token pairs of one
// visibility group, then [restype_i, restype_j]; v_t += PairformerNoSeq(v_t) (the stack returns v_t
// plus its updates, so v_t is counted twice), LN; the result is u_proj(relu(mean over present
// templates of v_t)).
struct TemplateModule {
    int64_t dim = 64;
    int64_t num_bins = 38;
    float min_dist = 3.25f, max_dist = 50.75f;
    nn::LayerNorm z_norm, v_norm;
    nn::Linear z_proj, a_proj, u_proj;  // no biases
    std::vector<nn::PairformerNoSeqLayer> layers;
    bool defined() const { return z_proj.w.defined(); }
    static TemplateModule load(const io::ModelDir& m, const Config& cfg);
    // Whether f holds a template (template_mask has an entry); without one the output is 0.
    static bool any_template(const Features& f);
    // The module's output (L, L, token_z) for z (L, L, token_z) and f's template_* features
    // (T templates) and visibility_ids. The tap sees "template.v<t>" (template t after v_norm).
    Tensor run(const Tensor& z, const Features& f, const Tap& tap = {}) const;
};

struct TrunkOutput {
    Tensor s;           // (L, token_s)
    Tensor z;           // (L, L, token_z)
    Tensor relpos;      // (L, L, token_z): the relative position encoding (diffusion conditioning)
    Tensor pdistogram;  // (L, L, num_bins)
    Tensor pbfactor;    // (L, num_bins) or undefined (no b-factor head)
};

struct Trunk {
    Config cfg;
    nn::Linear s_init, z_init_1, z_init_2;  // no biases
    PairInputEmbedding pair_inputs;
    nn::LayerNorm s_norm, z_norm;
    nn::Linear s_recycle, z_recycle;        // no biases
    TemplateModule templates;               // undefined without template weights
    MsaModule msa;
    nn::PairformerStack pairformer;
    nn::DistogramHead distogram;            // W (z + z^T) + b
    nn::Linear bfactor;                     // token_s -> num_bins, or undefined

    static Trunk load(const io::ModelDir& m, const Config& cfg);
    Tensor relpos(const Features& f) const { return pair_inputs.relpos(f); }
    // z_init (L, L, C) = z_init_1(s_i) + z_init_2(s_j) + relpos + bonds + bond types + contacts;
    // relpos, when given, is relpos(f) already computed.
    Tensor z_init(const Features& f, const Tensor& s_inputs, const Tensor* relpos = nullptr) const;
    // recycling_steps + 1 passes from s_inputs (L, token_s). The tap sees "s_init", "z_init",
    // "pass<p>.s" / ".z" (after recycling), "pass<p>.template_out" (with templates),
    // "pass<p>.msa_out", "pass<p>.msa.layer<k>.z/.m",
    // "pass<p>.pf.block<k>.s/.z". on_pass, when set, is called as each pass starts. With
    // subsample.rows > 0, pass p's MSA module runs on msa_subsample_rows(S, rows, seed, p).
    TrunkOutput run(const Features& f, const Tensor& s_inputs, int recycling_steps, const Tap& tap = {},
                    const std::function<void(int pass, int passes)>& on_pass = {},
                    const MsaSubsample& subsample = {}) const;
};

}  // namespace bioinfer::boltz2
