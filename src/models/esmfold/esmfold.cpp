// ESMFold forward, following transformers' EsmForProteinFolding: stem features, trunk passes with
// recycling, structure module, heads.
#include "models/esmfold/esmfold.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "bioinfer/error.h"
#include "models/esm_alphabet.h"
#include "models/esmfold/residue_constants.h"
#include "ops/ops.h"

namespace bioinfer::esmfold {

using io::config_get_or;

namespace {

constexpr int64_t kDistogramBins = 64, kLddtBins = 50, kRecycleBins = 15;
constexpr int kLinkerLength = 25;
constexpr int64_t kChainOffset = 512;

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

const nlohmann::json& sub(const nlohmann::json& j, const char* key) {
    static const nlohmann::json empty = nlohmann::json::object();
    auto it = j.find(key);
    return it != j.end() && it->is_object() ? *it : empty;
}

// Recycled distogram bins (L, L) I32 of the C-beta positions implied by N, CA, C (atom14 slots
// 0..2): 15 bins with edges from 3.375 to 21.375 A.
Tensor recycle_bins(const Tensor& atom14) {
    const int64_t L = atom14.size(0);
    static const Tensor bounds = [] {  // squared edges: host-side constants, made once
        std::vector<float> b(kRecycleBins - 1);
        for (int64_t k = 0; k < kRecycleBins - 1; ++k) {
            const float v = 3.375f + (21.375f - 3.375f) * float(k) / float(kRecycleBins - 2);
            b[size_t(k)] = v * v;
        }
        return Tensor::of(b);
    }();
    Tensor cb = Tensor::empty({L, 3}), bins = Tensor::empty({L, L}, DType::I32);
    ops::virtual_cb(atom14, cb);
    ops::distance_bins(cb, bounds, bins);
    return bins;
}

}  // namespace

EsmFoldConfig EsmFoldConfig::from_json(const nlohmann::json& j, const std::string& where) {
    BI_CHECK(config_get_or<bool>(j, "is_folding_model", false, where), where,
             "not an ESMFold checkpoint (is_folding_model is not true)");
    const nlohmann::json& f = sub(j, "esmfold_config");
    const nlohmann::json& t = sub(f, "trunk");
    const nlohmann::json& s = sub(t, "structure_module");
    EsmFoldConfig c;
    BI_CHECK(!config_get_or<bool>(f, "bypass_lm", false, where) &&
                 !config_get_or<bool>(f, "esm_ablate_sequence", false, where) &&
                 !config_get_or<bool>(f, "use_esm_attn_map", false, where),
             where, "bypass_lm, esm_ablate_sequence and use_esm_attn_map are not supported");
    c.embed_aa = config_get_or<bool>(f, "embed_aa", true, where);
    c.fp16_esm = config_get_or<bool>(f, "fp16_esm", true, where);
    c.lddt_hidden = config_get_or<int64_t>(f, "lddt_head_hid_dim", 128, where);
    TrunkConfig& tr = c.trunk;
    tr.blocks = config_get_or<int64_t>(t, "num_blocks", 48, where);
    tr.c_s = config_get_or<int64_t>(t, "sequence_state_dim", 1024, where);
    tr.c_z = config_get_or<int64_t>(t, "pairwise_state_dim", 128, where);
    tr.seq_head_width = config_get_or<int64_t>(t, "sequence_head_width", 32, where);
    tr.pair_head_width = config_get_or<int64_t>(t, "pairwise_head_width", 32, where);
    tr.position_bins = config_get_or<int64_t>(t, "position_bins", 32, where);
    tr.max_recycles = config_get_or<int64_t>(t, "max_recycles", 4, where);
    StructureModuleConfig& m = c.sm;
    m.c_s = config_get_or<int64_t>(s, "sequence_dim", 384, where);
    m.c_z = config_get_or<int64_t>(s, "pairwise_dim", 128, where);
    m.ipa_dim = config_get_or<int64_t>(s, "ipa_dim", 16, where);
    m.resnet_dim = config_get_or<int64_t>(s, "resnet_dim", 128, where);
    m.heads = config_get_or<int64_t>(s, "num_heads_ipa", 12, where);
    m.qk_points = config_get_or<int64_t>(s, "num_qk_points", 4, where);
    m.v_points = config_get_or<int64_t>(s, "num_v_points", 8, where);
    m.blocks = config_get_or<int64_t>(s, "num_blocks", 8, where);
    m.transition_layers = config_get_or<int64_t>(s, "num_transition_layers", 1, where);
    m.resnet_blocks = config_get_or<int64_t>(s, "num_resnet_blocks", 2, where);
    m.angles = config_get_or<int64_t>(s, "num_angles", 7, where);
    m.trans_scale = float(config_get_or<double>(s, "trans_scale_factor", 10.0, where));
    m.eps = float(config_get_or<double>(s, "epsilon", 1e-8, where));
    for (const int64_t v :
         {c.lddt_hidden, tr.blocks, tr.c_s, tr.c_z, tr.seq_head_width, tr.pair_head_width,
          tr.position_bins, tr.max_recycles, m.c_s, m.c_z, m.ipa_dim, m.resnet_dim, m.heads,
          m.qk_points, m.v_points, m.blocks, m.transition_layers, m.resnet_blocks, m.angles})
        BI_CHECK(v > 0, where, "esmfold_config: every size, count and head width must be positive");
    BI_CHECK(tr.c_s % tr.seq_head_width == 0 && tr.c_z % tr.pair_head_width == 0 && tr.c_z % 2 == 0,
             where, "sequence_state_dim / pairwise_state_dim are not multiples of their head widths");
    return c;
}

std::unique_ptr<EsmFoldModel> EsmFoldModel::load(const io::ModelDir& m) {
    auto model = std::make_unique<EsmFoldModel>();
    EsmFoldConfig& c = model->cfg_;
    c = EsmFoldConfig::from_json(m.config(), m.dir() + "/config.json");
    model->esm_ = esm::Esm2Model::load(m, /*folding_stem=*/true);
    const int64_t D = model->esm_->hidden_size(), NL = model->esm_->num_layers();
    const int64_t cs = c.trunk.c_s, cz = c.trunk.c_z;

    // AlphaFold residue order (+1, 0 = padding) to ESM tokens.
    model->af2_to_esm_.push_back(esm::kPad);
    for (int r = 0; r < rc::kNumRestypes; ++r)
        model->af2_to_esm_.push_back(esm::tokenize(std::string(1, bio::kAminoAcidLetters[r] ? bio::kAminoAcidLetters[r] : 'X'), "af2_to_esm")[0]);
    const Tensor combine = m.get_f32("esm_s_combine", {NL + 1});
    // host-side: the softmax of NL + 1 layer weights, once at load
    float mx = -INFINITY, sum = 0;
    for (int64_t l = 0; l <= NL; ++l) mx = std::max(mx, combine.f32()[l]);
    for (int64_t l = 0; l <= NL; ++l) sum += model->esm_combine_.emplace_back(std::exp(combine.f32()[l] - mx));
    for (float& w : model->esm_combine_) w /= sum;
    model->esm_ln_ = nn::LayerNorm::load(m, "esm_s_mlp.0", D, 1e-5f);
    model->esm_mlp1_ = nn::Linear::load(m, "esm_s_mlp.1", D, cs);
    model->esm_mlp2_ = nn::Linear::load(m, "esm_s_mlp.3", cs, cs);
    if (c.embed_aa) model->aa_embedding_ = m.get_f32("embedding.weight", {rc::kNumRestypes + 2, cs});

    const TrunkConfig& t = c.trunk;
    model->relpos_ = nn::RelativePosition::load(m, "trunk.pairwise_positional_embedding", t.position_bins, cz);
    const EsmFoldNames names;
    const TrunkBlockNames& n = names.block;
    const int64_t pair_heads = cz / t.pair_head_width;
    for (int64_t b = 0; b < t.blocks; ++b) {
        const std::string p = cat(names.blocks, ".", b, ".");
        Block blk;
        blk.ln_seq = nn::LayerNorm::load(m, p + n.ln_seq, cs, 1e-5f);
        blk.pair_to_seq = nn::PairToSequence::load(m, p + n.pair_to_seq, cz, cs / t.seq_head_width,
                                                   n.pair_to_seq_names);
        blk.seq_attention = nn::GatedBiasedAttention::load(m, p + n.seq_attention, cs,
                                                           t.seq_head_width, n.seq_attention_names);
        blk.mlp_seq = nn::ResidueMlp::load(m, p + n.mlp_seq, cs, 4 * cs, n.mlp_names);
        blk.mlp_pair = nn::ResidueMlp::load(m, p + n.mlp_pair, cz, 4 * cz, n.mlp_names);
        blk.seq_to_pair =
            nn::SequenceToPair::load(m, p + n.seq_to_pair, cs, cz / 2, cz, n.seq_to_pair_names);
        blk.tri_mul_out =
            nn::TriangleMultiplication::load(m, p + n.tri_mul_out, cz, true, n.tri_mul_names);
        blk.tri_mul_in =
            nn::TriangleMultiplication::load(m, p + n.tri_mul_in, cz, false, n.tri_mul_names);
        blk.tri_att_start = nn::TriangleAttention::load(
            m, p + n.tri_att_start, cz, t.pair_head_width, pair_heads, true, n.tri_att_names);
        blk.tri_att_end = nn::TriangleAttention::load(m, p + n.tri_att_end, cz, t.pair_head_width,
                                                      pair_heads, false, n.tri_att_names);
        model->blocks_.push_back(std::move(blk));
    }
    model->recycle_s_norm_ = nn::LayerNorm::load(m, "trunk.recycle_s_norm", cs, 1e-5f);
    model->recycle_z_norm_ = nn::LayerNorm::load(m, "trunk.recycle_z_norm", cz, 1e-5f);
    model->recycle_disto_ = m.get_f32("trunk.recycle_disto.weight", {kRecycleBins, cz});
    model->trunk2sm_s_ = nn::Linear::load(m, "trunk.trunk2sm_s", cs, c.sm.c_s);
    model->trunk2sm_z_ = nn::Linear::load(m, "trunk.trunk2sm_z", cz, c.sm.c_z);
    model->sm_ = StructureModule::load(m, names.structure_module, c.sm, names.structure);
    model->distogram_head_ = nn::DistogramHead::load(m, "distogram_head", cz, kDistogramBins);
    model->ptm_head_ = nn::AlignedErrorHead::load(m, "ptm_head", cz);
    model->lm_head_ = nn::Linear::load(m, "lm_head", cs, rc::kNumRestypes + 2);
    model->lddt_head_ = nn::PlddtHead::load(m, "lddt_head", c.sm.c_s, c.lddt_hidden, 37, kLddtBins);

    std::vector<std::string> ignorable = esm::esm2_ignorable_tensors("esm.");  // the stem's
    // EsmForProteinFolding's af2_to_esm buffer (AlphaFold residue index -> ESM token), which
    // bioinfer derives from its own alphabet.
    ignorable.push_back("af2_to_esm");
    m.check_consumed(ignorable, "ESMFold");
    return model;
}

void EsmFoldModel::trunk_block(const Block& b, Tensor& s, Tensor& z, int64_t chunk,
                               std::map<std::string, double>* profile) const {
    const int64_t L = s.size(0), cs = s.size(1), cz = z.size(2);
    auto t = std::chrono::steady_clock::now();
    const auto lap = [&](const char* name) {
        if (!profile) return;
        (*profile)[name] += seconds_since(t);
        t = std::chrono::steady_clock::now();
    };
    {
        const Tensor bias = b.pair_to_seq(z, chunk);  // (H, L, L)
        Tensor y = Tensor::empty({L, cs});
        b.ln_seq(s, y);
        b.seq_attention.add_to(y, bias, s);
    }
    b.mlp_seq.add_to(s);
    lap("sequence");
    b.seq_to_pair.add_to(s, z, chunk);
    lap("seq_to_pair");
    b.tri_mul_out.add_to(z, chunk);
    lap("tri_mul_out");
    b.tri_mul_in.add_to(z, chunk);
    lap("tri_mul_in");
    b.tri_att_start.add_to(z, chunk);
    lap("tri_att_start");
    b.tri_att_end.add_to(z, chunk);
    lap("tri_att_end");
    Tensor zf = z.reshape({L * L, cz});
    b.mlp_pair.add_to(zf, nn::pair_chunk("pair_mlp", L, cz, chunk) * L);
    lap("mlp_pair");
}

FoldOutput EsmFoldModel::fold(const Target& target, const FoldOptions& opts) const {
    const EsmFoldConfig& c = cfg_;
    const int64_t L = int64_t(target.aatype.size()), cs = c.trunk.c_s, cz = c.trunk.c_z;
    BI_CHECK(L > 0 && int64_t(target.residue_index.size()) == L, "esmfold",
             "expected residue numbers for each of the ", L, " residues");
    for (int32_t a : target.aatype)
        BI_CHECK(a >= 0 && a < rc::kNumRestypes, "esmfold", "residue type ", a, " outside [0, 20]");
    const auto tap = [&](const std::string& n, const Tensor& t) {
        if (opts.tap) opts.tap(n, t);
    };
    FoldOutput out;
    auto t0 = std::chrono::steady_clock::now();

    // === Stem: every hidden state of the ESM-2 run, softmax-weighted, through esm_s_mlp. ===
    std::vector<int32_t> tokens{esm::kCls};
    for (int32_t a : target.aatype) tokens.push_back(af2_to_esm_[size_t(a + 1)]);
    tokens.push_back(esm::kEos);
    lm::Request req;
    for (int l = 0; l <= esm_->num_layers(); ++l) req.layers.push_back(l);
    const lm::Output lm = esm_->forward({tokens}, req);
    const int64_t D = esm_->hidden_size();
    Tensor esm_s = Tensor::zeros({L, D});
    for (int l = 0; l <= esm_->num_layers(); ++l)  // residues only: past <cls>, before <eos>
        ops::axpy(esm_combine_[size_t(l)], lm.hidden.at(l).narrow0(1, L + 1), esm_s);
    tap("esm_s_combined", esm_s);
    Tensor s0 = Tensor::empty({L, cs}), t_cs = Tensor::empty({L, cs}), t_d = Tensor::empty({L, D});
    esm_ln_(esm_s, t_d);
    esm_mlp1_(t_d, t_cs, {.act = Act::Relu});
    esm_mlp2_(t_cs, s0);
    if (c.embed_aa) ops::embedding(target.aatype, aa_embedding_, s0, /*accumulate=*/true);
    out.seconds_stem = seconds_since(t0);

    // === Trunk with recycling ===
    const int passes = opts.num_recycles < 0 ? int(c.trunk.max_recycles) : opts.num_recycles + 1;
    const Tensor relpos = relpos_.classes(target.residue_index);  // (L, L) I32
    Tensor s = Tensor::zeros({L, cs}), z = Tensor::zeros({L, L, cz});
    Tensor disto = Tensor::zeros({L, L}, DType::I32);  // recycled distogram bins
    for (int pass = 0; pass < passes; ++pass) {
        if (opts.progress) opts.progress("trunk", pass, passes);
        auto tp = std::chrono::steady_clock::now();
        // recycled inputs: s = s0 + LN(s_prev); z = LN(z_prev) + disto[bins] + relpos
        recycle_s_norm_(s, t_cs);
        ops::add(s0, t_cs, s);
        const int64_t rows = std::max<int64_t>(1, (int64_t(64) << 20) / (L * cz * 4));
        for (int64_t r0 = 0; r0 < L; r0 += rows) {
            const int64_t r1 = std::min(L, r0 + rows), n = (r1 - r0) * L;
            Tensor zr = z.narrow0(r0, r1).reshape({n, cz}), tmp = Tensor::empty({n, cz});
            recycle_z_norm_(zr, tmp);
            ops::copy(tmp, zr);
            ops::embedding(disto.narrow0(r0, r1).reshape({n}), recycle_disto_, zr, /*accumulate=*/true);
            ops::embedding(relpos.narrow0(r0, r1).reshape({n}), relpos_.table, zr, /*accumulate=*/true);
        }
        for (size_t b = 0; b < blocks_.size(); ++b) {
            trunk_block(blocks_[b], s, z, opts.chunk, opts.trunk_profile);
            if (opts.tap) {
                const std::string p = "trunk.pass" + std::to_string(pass) + ".block" + std::to_string(b);
                tap(p + ".s", s);
                tap(p + ".z", z);
            }
        }
        out.seconds_trunk += seconds_since(tp);
        // === Structure module ===
        tp = std::chrono::steady_clock::now();
        Tensor sm_s = Tensor::empty({L, c.sm.c_s}), sm_z = Tensor::empty({L, L, c.sm.c_z});
        trunk2sm_s_(s, sm_s);
        Tensor smz2 = sm_z.reshape({L * L, c.sm.c_z});
        trunk2sm_z_(z.reshape({L * L, cz}), smz2);
        out.structure = sm_(sm_s, sm_z, target.aatype);
        disto = recycle_bins(out.structure.positions.narrow0(c.sm.blocks - 1, c.sm.blocks).reshape({L, 14, 3}));
        if (opts.tap) tap("recycle_bins." + std::to_string(pass), disto.to_f32());
        out.seconds_structure += seconds_since(tp);
    }
    if (opts.progress) opts.progress("trunk", passes, passes);
    out.s_s = s;
    out.s_z = z;

    // === Heads ===
    t0 = std::chrono::steady_clock::now();
    const int64_t NB = c.sm.blocks;
    atom14_to_atom37(Tensor(out.structure.positions).narrow0(NB - 1, NB).reshape({L, 14, 3}),
                     target.aatype, out.atom37, out.atom37_exists);
    out.lm_logits = Tensor::empty({L, rc::kNumRestypes + 2});
    lm_head_(s, out.lm_logits);
    out.distogram_logits = distogram_head_(z);
    // pLDDT: expected bin centre of the last block's states
    out.plddt = lddt_head_(out.structure.states.narrow0(NB - 1, NB).reshape({L, c.sm.c_s}));
    {  // PAE and pTM from the pTM head's aligned-error bins
        nn::AlignedError ae = ptm_head_(z);
        out.pae = ae.pae;
        out.ptm = ae.ptm;
    }
    out.seconds_heads = seconds_since(t0);
    return out;
}

EncodedTarget encode_sequence(const std::string& seq, const std::string& record) {
    EncodedTarget e;
    int32_t chain = 0;
    int64_t number = 0;  // residue number within the joined sequence, before chain offsets
    bool chain_empty = true;
    for (size_t i = 0; i <= seq.size(); ++i) {
        const bool end = i == seq.size();
        if (end || seq[i] == ':') {
            BI_CHECK(!chain_empty, record, "chain ", chain + 1, " is empty (at position ", i + 1, ")");
            if (end) break;
            for (int k = 0; k < kLinkerLength; ++k) {  // the linker numbers with the chain before it
                e.target.aatype.push_back(bio::amino_acid_index('G'));
                e.target.residue_index.push_back(number++ + chain * kChainOffset);
                e.is_linker.push_back(1);
                e.chain.push_back(chain);
            }
            ++chain;
            chain_empty = true;
            continue;
        }
        e.target.aatype.push_back(bio::amino_acid_index(seq[i]));
        e.target.residue_index.push_back(number++ + chain * kChainOffset);
        e.is_linker.push_back(0);
        e.chain.push_back(chain);
        chain_empty = false;
    }
    e.chains = chain + 1;
    return e;
}

}  // namespace bioinfer::esmfold
