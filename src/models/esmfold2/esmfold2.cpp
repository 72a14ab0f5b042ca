// ESMFold2's fold and StructureModel: see esmfold2.h.
#include "models/esmfold2/esmfold2.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/msa.h"
#include "models/esmfold2/featurize.h"
#include "nn/edm_sampler.h"
#include "ops/ops.h"

namespace bioinfer::esmfold2 {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<std::string> chains_of(const fold::Input& in) {
    std::vector<std::string> c;
    for (const bio::Chain& x : in.target.chains) c.push_back(x.sequence);
    return c;
}

}  // namespace

std::unique_ptr<EsmFold2Model> EsmFold2Model::load(const io::ModelDir& m) {
    auto model = std::make_unique<EsmFold2Model>();
    const std::string where = m.dir() + "/config.json";
    model->cfg_ = Config::from_json(m.config(), where);
    model->lm_ = esm::EsmcModel::load_embedded(m, model->cfg_.esmc, "esmc.", where);
    model->trunk_ = Trunk::load(m, model->cfg_);
    model->diffusion_ = DiffusionModule::load(m, model->cfg_);
    model->confidence_ = ConfidenceHead::load(m, model->cfg_);
    // every tensor read, but what the tower's layout stores without being read (rotary buffers)
    m.check_consumed(esm::EsmcLayout::hf("esmc.").ignorable, "ESMFold2");
    return model;
}

FoldOutput EsmFold2Model::fold(const Inputs& in, const FoldOptions& o) const {
    FoldOutput out;
    const auto stage = [&](const std::string& s, int step, int steps) {
        if (o.progress) o.progress(s, step, steps);
    };
    auto t0 = std::chrono::steady_clock::now();
    stage("language model", 0, 0);
    Tensor hidden;
    {
        std::lock_guard<std::mutex> lock(lm_mutex_);
        hidden = lm_hidden_states(*lm_, in);
    }
    out.stage_seconds.push_back({"language_model", seconds_since(t0)});

    t0 = std::chrono::steady_clock::now();
    stage("trunk", 0, 0);
    TrunkDraws draws = TrunkDraws::seeded(o.seed);
    out.trunk = trunk_.run(in, hidden, draws, o.num_loops, o.tap);
    hidden = Tensor();  // the LM's activations are not needed past the shim
    out.stage_seconds.push_back({"trunk", seconds_since(t0)});

    t0 = std::chrono::steady_clock::now();
    const int64_t S = std::max<int64_t>(1, o.samples);
    const DiffusionModule::Conditioning k = diffusion_.prepare(in, out.trunk);
    nn::SamplerParams p =
        sampler_params(cfg_, o.steps, S, o.max_parallel_samples > 0 ? o.max_parallel_samples : S);
    if (o.step_scale > 0) p.step_scale = o.step_scale;
    const int64_t steps = int64_t(nn::sample_schedule(p).size()) - 1;
    nn::SeededNormal rng(o.seed ^ 0x9e3779b97f4a7c15ULL);
    std::vector<float> mask(size_t(in.atoms.atoms), 0.f);
    std::fill(mask.begin(), mask.begin() + in.atoms.real_atoms, 1.f);
    out.coords = nn::sample(
        [&](const Tensor& x, float sigma) { return diffusion_.denoise(k, x, sigma); },
        Tensor::of(mask), p, rng,
        [&](const nn::SamplerStep& st) { stage("diffusion step", int(st.index), int(steps)); });
    out.stage_seconds.push_back({"diffusion", seconds_since(t0)});

    t0 = std::chrono::steady_clock::now();
    stage("confidence", 0, 0);
    out.confidence = confidence_.run(in, out.trunk, out.coords, o.tap);
    out.stage_seconds.push_back({"confidence", seconds_since(t0)});
    return out;
}

fold::Input EsmFold2Spec::from_fasta(const io::FastaRecord& rec, const std::string& where) const {
    fold::Input in = fold::protein_chains_from_fasta(rec, where);
    prepare(in);
    return in;
}

std::shared_ptr<const bio::Msa> EsmFold2Spec::read_msa(const std::string& path) const {
    return std::make_shared<const bio::Msa>(io::parse_a3m_esm(io::read_input_file(path), path, 0));
}

void EsmFold2Spec::prepare(fold::Input& in) const {
    check_chains(in);
    in.tokens = 0;
    for (const bio::Chain& c : in.target.chains) {
        BI_CHECK(!c.sequence.empty(), in.where, "chain ", c.id, " is empty");
        for (size_t i = 0; i < c.sequence.size(); ++i)
            BI_CHECK(c.sequence[i] >= 'A' && c.sequence[i] <= 'Z', in.where, "chain ", c.id,
                     ": character '", c.sequence[i], "' at position ", i + 1,
                     " is not an upper-case amino-acid letter");
        in.tokens += int64_t(c.sequence.size());
    }
    in.residues = in.tokens;
}

int64_t EsmFold2Spec::memory_bytes(const fold::Input& in) const {
    const Config& c = cfg_;
    const int64_t L = in.tokens, A = 15 * L, C = c.c_z;
    const int64_t pair = L * L * C * 4;
    const int64_t lm_hidden = io::config_get_or<int64_t>(c.esmc, "hidden_size", 0, "esmc_config");
    const int64_t lm_layers =
        io::config_get_or<int64_t>(c.esmc, "num_hidden_layers", 0, "esmc_config");
    // the LM: every layer's hidden states at the residues, the tower's own activations
    const int64_t lm = L * (lm_layers + 1) * lm_hidden * 4 + L * lm_hidden * 4 * 16;
    // the loop: z_init, the LM pair, its dropped copy, the injection, z, the MSA encoder's pair,
    // a pair stack's triangle temporaries and chunk buffers, the allocator's and GEMM's pools:
    // fitted to the peak RSS measured at 64 and 128 residues (bench/results/esmfold2_cpu.json:
    // 0.79 and 0.99 GB above the weights, about 15 pairs plus 0.73 GB at pair width 256; the
    // constant taken in proportion to the pair width for other shapes)
    int64_t trunk = pair * 16 + (int64_t(768) << 20) * C / 256;
    // diffusion: the conditioning pair and per-layer biases; per sample the atom stacks' windows
    const int64_t diff = pair + L * L * c.diffusion.heads * c.diffusion.layers * 4 +
                         c.sampler.samples * A * (c.diff_atom.hidden * 16 + 160 * 4 * 4);
    // the MSA encoder (once, before the loops): its rows' activations (the MSA, its normalised
    // copy, the pair-weighted average's values, gate and output, a transition chunk) and the outer
    // product's pair; rows as the chains' MSAs hold them, up to the default row limit
    if (c.msa.enabled) {
        int64_t rows = 1;
        for (const bio::Chain& x : in.target.chains)
            if (x.msa) rows += std::max<int64_t>(int64_t(x.msa->rows.size()) - 1, 0);
        rows = std::min(rows, kMsaMaxRows);
        trunk += rows * L * c.msa.hidden * 4 * 6 + pair * 2;
    }
    // confidence: the base pair, a sample's pair, its stack's temporaries, the PAE/PDE logits
    const int64_t conf = pair * 7 + L * L * (c.confidence.pae_bins + c.confidence.pde_bins) * 4;
    return std::max(lm, int64_t(0)) + std::max({trunk, diff + pair, conf + pair});
}

std::unique_ptr<EsmFold2StructureModel> EsmFold2StructureModel::load(const io::ModelDir& dir) {
    return std::make_unique<EsmFold2StructureModel>(EsmFold2Model::load(dir));
}

EsmFold2StructureModel::EsmFold2StructureModel(std::unique_ptr<EsmFold2Model> model)
    : model_(std::move(model)), spec_(model_->config()) {}

bio::Prediction EsmFold2StructureModel::predict(const fold::Input& in,
                                                 const fold::Options& opts) const {
    Inputs feats = featurize(chains_of(in), in.where);
    // MSAs: the chains' a3m files, read as records are collected (predict's --msa-dir)
    std::vector<const bio::Msa*> per_chain(in.target.chains.size(), nullptr);
    bool any = false;
    for (size_t c = 0; c < in.target.chains.size(); ++c) {
        const bio::Chain& x = in.target.chains[c];
        BI_CHECK(x.msa || x.msa_path.empty(), in.where, "chain ", x.id, ": the MSA ", x.msa_path,
                 " was not read");
        per_chain[c] = x.msa.get();
        any |= x.msa != nullptr;
    }
    if (any)
        attach_msas(feats, per_chain, in.where,
                    opts.max_msa_seqs > 0 ? opts.max_msa_seqs : kMsaMaxRows);
    FoldOptions fo;
    fo.num_loops = opts.num_recycles;
    fo.samples = std::max(1, opts.num_samples);
    fo.steps = opts.sampling_steps;
    fo.max_parallel_samples = opts.max_parallel_samples;
    fo.seed = opts.seed;
    fo.step_scale = opts.step_scale;
    fo.tap = opts.tap;
    fo.progress = opts.progress;
    const FoldOutput out = model_->fold(feats, fo);
    const ConfidenceOutput& cf = out.confidence;

    bio::Prediction p;
    p.num_recycles = int(opts.num_recycles < 0 ? model_->config().num_loops : opts.num_recycles);
    p.stage_seconds = out.stage_seconds;
    const std::vector<ProteinResidue>& table = protein_residues();
    const AtomFeatures& af = feats.atoms;
    // tokens and atoms: each residue's heavy atoms in the featurizer's order
    for (int64_t t = 0; t < feats.tokens; ++t) {
        const int32_t c = feats.asym_id[size_t(t)];
        if (p.chains.empty() || c != int32_t(p.chains.size()) - 1)
            p.chains.push_back({in.target.chains[size_t(c)].id, bio::MoleculeType::Protein, t, 0,
                                feats.entity_id[size_t(t)]});
        ++p.chains.back().tokens;
        const ProteinResidue* r = nullptr;
        for (const ProteinResidue& x : table)
            if (x.res_type == feats.res_type[size_t(t)]) r = &x;
        BI_CHECK(r != nullptr, in.where, "token ", t, ": no residue of type ",
                 feats.res_type[size_t(t)]);
        bio::Token tok;
        tok.chain = c;
        tok.residue = feats.residue_index[size_t(t)] + 1;
        tok.name = r->name;
        tok.letter = r->letter;
        tok.first_atom = int64_t(p.atoms.size());
        for (const ProteinAtom& a : r->atoms) {
            if (std::string(a.name) == "CA") tok.rep_atom = int64_t(p.atoms.size());
            p.atoms.push_back({t, a.name, std::string(1, a.element)});
        }
        tok.atoms = int64_t(p.atoms.size()) - tok.first_atom;
        p.tokens.push_back(std::move(tok));
    }
    const int64_t A = af.real_atoms, N = feats.tokens, S = out.coords.size(0);
    BI_CHECK(int64_t(p.atoms.size()) == A, in.where, "atom table mismatch");
    // samples ranked by pTM, best first (transformers' ranking)
    std::vector<int64_t> order(static_cast<size_t>(S));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return cf.ptm[size_t(a)] > cf.ptm[size_t(b)]; });
    const Tensor coords = out.coords.to(kHost);
    const int64_t Af = af.atoms, C = cf.pair_chains_iptm.size(1);
    for (int64_t s : order) {
        bio::Sample smp;
        // host-side: one sample's real atoms and per-token tables copied out for the writers
        smp.coords = Tensor::of(
            std::vector<float>(coords.f32() + s * Af * 3, coords.f32() + s * Af * 3 + A * 3),
            {A, 3});
        const float* pa = cf.plddt_per_atom.f32() + s * Af;
        smp.plddt = Tensor::of(std::vector<float>(pa, pa + A), {A});
        const float* pt = cf.plddt.f32() + s * N;
        smp.token_plddt = Tensor::of(std::vector<float>(pt, pt + N), {N});
        smp.pae = cf.pae.narrow0(s, s + 1).reshape({N, N}).clone();
        smp.pde = cf.pde.narrow0(s, s + 1).reshape({N, N}).clone();
        smp.scores["ptm"] = cf.ptm[size_t(s)];
        if (p.chains.size() > 1) smp.scores["iptm"] = cf.iptm[size_t(s)];
        smp.scores["complex_plddt"] = cf.complex_plddt[size_t(s)];
        smp.scores["complex_iplddt"] = cf.complex_iplddt[size_t(s)];
        smp.chain_pair_scores["pair_chains_iptm"] =
            cf.pair_chains_iptm.narrow0(s, s + 1).reshape({C, C}).clone();
        p.samples.push_back(std::move(smp));
    }
    return p;
}

}  // namespace bioinfer::esmfold2
