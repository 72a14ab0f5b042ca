// Boltz-2 as a fold::StructureModel: see boltz2_structure.h.
#include "models/boltz2/boltz2_structure.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <numeric>

#include "bio/residues.h"
#include "io/boltz_inputs.h"
#include "models/boltz2/constraint_refs.h"
#include "models/boltz2/featurizer.h"
#include "models/boltz2/ligands.h"
#include "models/boltz2/names.h"
#include "models/boltz2/standardize.h"
#include "models/boltz2/templates.h"

namespace bioinfer::boltz2 {
namespace {

// A featurizer chain's type from its name (bio::molecule_type_name).
bio::MoleculeType molecule_type(const std::string& type) {
    if (type == "dna") return bio::MoleculeType::Dna;
    if (type == "rna") return bio::MoleculeType::Rna;
    if (type == "protein") return bio::MoleculeType::Protein;
    return bio::MoleculeType::Ligand;
}

// The seeds of a run (the per-residue conformer motions, the sampler, the MSA subsampling)
// from the user's one.
uint64_t sampler_seed(uint64_t seed) { return seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull; }
uint64_t msa_seed(uint64_t seed) { return seed * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull; }

// A --method name as boltz's table keys it (lower case).
std::string method_key(const std::string& name) {
    std::string k = name;
    for (char& ch : k) ch = char(std::tolower((unsigned char)ch));
    return k;
}

}  // namespace

std::string mols_dir_of(const io::ModelDir& dir) {
    namespace fs = std::filesystem;
    const fs::path ckpt = dir.torch_file().empty() ? fs::path(dir.dir()) : fs::path(dir.torch_file());
    const fs::path mols = ckpt.parent_path() / "mols";
    return fs::is_directory(mols) ? mols.string() : std::string();
}

std::vector<bio::MoleculeType> Boltz2Spec::molecule_types() const {
    return {bio::MoleculeType::Protein, bio::MoleculeType::Dna, bio::MoleculeType::Rna,
            bio::MoleculeType::Ligand};
}

fold::Input Boltz2Spec::from_fasta(const io::FastaRecord&, const std::string& where) const {
    fail(where, "Boltz-2 reads whole input files (boltz's YAML, or FASTA with one record per chain)");
}

fold::Input Boltz2Spec::input_of(bio::Target t) const {
    const std::string path = t.source;
    fold::Input in;
    in.id = t.name;
    in.where = path;
    for (const bio::Chain& c : t.chains) {
        in.sequence += (in.sequence.empty() ? "" : ":") + c.sequence;
        const int64_t before = in.tokens;
        if (c.type != bio::MoleculeType::Ligand) {
            in.tokens += int64_t(c.residues.size());
            in.residues += int64_t(c.residues.size());
            // a modified residue's CCD code must name a molecule, found before any work
            for (const std::string& res : c.residues)
                if (!vocab().ref_atoms.count(res))
                    ccd_molecule(res, ConformerLibrary::builtin(), mols_dir_,
                                 cat(c.where.empty() ? path : c.where, ": chain ", c.id));
        } else if (!c.smiles.empty()) {
            const std::string where = cat(c.where.empty() ? path : c.where, ": chain ", c.id);
            // the affinity binder is built from its standardised SMILES, as boltz builds it
            in.tokens += smiles_heavy_atoms(
                c.id == t.affinity_binder ? standardize_smiles(c.smiles, where) : c.smiles, where);
        } else {
            for (const std::string& code : c.ccd)
                in.tokens += int64_t(ccd_molecule(code, ConformerLibrary::builtin(), mols_dir_,
                                                  cat(c.where.empty() ? path : c.where,
                                                      ": chain ", c.id))
                                         .atoms.size());
        }
        // boltz's affinity module takes ligands of at most 128 heavy atoms
        if (c.id == t.affinity_binder)
            BI_CHECK(in.tokens - before <= 128, t.affinity_where.empty() ? path : t.affinity_where,
                     "affinity: the binder ", c.id, " has ", in.tokens - before,
                     " heavy atoms; the affinity module takes at most 128");
    }
    // every template file readable and its chains resolvable, and every constraint's chain,
    // residue and atom there, before any work
    for (const bio::Template& e : t.templates)
        template_records(e, t, read_template(e, ConformerLibrary::builtin(), mols_dir_));
    check_constraint_references(t, ConformerLibrary::builtin(), mols_dir_);
    in.ligand_atoms = in.tokens - in.residues;  // a ligand's tokens are its heavy atoms
    in.affinity_binder = t.affinity_binder;
    // What input_key's chain fields do not say: modified residues, cyclic chains, constraints.
    std::string v;
    const auto ref = [](const bio::ConstraintRef& r) {
        return cat(r.chain, '/', r.residue, '/', r.atom);
    };
    for (const bio::Chain& c : t.chains) {
        v += cat(c.id, c.cyclic ? " cyclic" : "", ':');
        for (const std::string& r : c.residues) v += cat(r, ' ');
        v += '\n';
    }
    for (const auto& b : t.bonds) v += cat("bond ", ref(b.atom1), ' ', ref(b.atom2), '\n');
    for (const auto& p : t.pockets) {
        v += cat("pocket ", p.binder, ' ', p.max_distance, ' ', p.force);
        for (const auto& r : p.contacts) v += cat(' ', ref(r));
        v += '\n';
    }
    for (const auto& k : t.contacts)
        v += cat("contact ", ref(k.token1), ' ', ref(k.token2), ' ', k.max_distance, ' ', k.force,
                 '\n');
    const auto list = [](const std::vector<std::string>& ids) {
        std::string x;
        for (const std::string& id : ids) x += cat(id, ',');
        return x;
    };
    for (const auto& e : t.templates)
        v += cat("template ", e.path, ' ', e.name, ' ', list(e.chain_ids), ' ', list(e.template_ids),
                 ' ', e.force, ' ', e.threshold, '\n');
    in.variant = v;
    in.target = std::move(t);
    return in;
}

fold::Input Boltz2Spec::from_file(const std::string& path, const fold::ReadOptions& opts) const {
    bio::Target t = io::read_boltz_input(path, bool(opts.msa_fetch));
    // every MSA readable and headed by its query, before any work (the MSA server's fetched
    // first); read here once, with the run's row limit (boltz's --max_msa_seqs)
    io::load_boltz_msas(t, opts.max_msa_seqs > 0 ? opts.max_msa_seqs : 8192, opts.msa_fetch);
    fold::Input in = input_of(std::move(t));
    check_chains(in);
    return in;
}

void Boltz2Spec::prepare(fold::Input& in) const {
    BI_CHECK(!in.target.source.empty(), in.where, "Boltz-2 inputs are files");
    // the input file's target (from_file) with the input's extra chains (screening ligands)
    bio::Target t = in.target;
    for (const bio::Chain& e : in.extra) {
        BI_CHECK(e.type == bio::MoleculeType::Ligand && !e.smiles.empty(), in.where, "chain ",
                 e.id, ": only SMILES ligands can be added to an input file");
        io::add_boltz_ligand(t, e.id, e.smiles, in.where);
    }
    // a screening job's ligand as the affinity binder
    if (!in.affinity_binder.empty() && t.affinity_binder != in.affinity_binder) {
        BI_CHECK(t.affinity_binder.empty(), in.where, "the input file names affinity binder ",
                 t.affinity_binder, " and the job ", in.affinity_binder, ": only one is supported");
        t.affinity_binder = in.affinity_binder;
        t.affinity_where = in.where;
        io::check_affinity_binder(t);
    }
    const std::string id = in.id, where = in.where;
    std::vector<bio::Chain> extra = std::move(in.extra);
    in = input_of(std::move(t));  // the binder: the file's, or the job's
    in.id = id;
    in.where = where;
    in.extra = std::move(extra);
    check_chains(in);
}

void Boltz2Spec::check_options(const fold::Options& opts) const {
    if (opts.method.empty() || vocab().method_types.count(method_key(opts.method))) return;
    std::string names;
    for (const auto& [name, id] : vocab().method_types) names += (names.empty() ? "" : ", ") + name;
    fail("--method", cat("unknown method '", opts.method, "' (boltz's: ", names, ")"));
}

int64_t Boltz2Spec::memory_bytes(const fold::Input& in) const {
    const Config& c = cfg_;
    const int64_t L = in.tokens;
    const int64_t A = ((L * 24 + 31) / 32) * 32;  // at most ~23 heavy atoms per residue (nucleotides)
    const int64_t pair = L * L;
    // trunk: z, z_init, the recycled z, chunk temporaries and the conditioned z (~8 copies of
    // token_z); the token transformer's per-layer biases; confidence z and PAE/PDE logits.
    int64_t floats = pair * (8 * c.token_z + c.token_transformer_depth * c.token_transformer_heads +
                             2 * c.num_pae_bins + 2 * c.confidence_dist_bins);
    // dense atom <-> token maps (atom_to_token and three token_to_* maps) and atom features
    floats += 4 * A * L + A * (c.atom_feature_dim + 8 * c.atom_s);
    // atom windows: keys (128 per 32 queries) x (encoder + decoder biases and pair features)
    floats += (A / c.window_queries) * c.window_queries * c.window_keys *
              (c.atom_encoder_depth * c.atom_encoder_heads + c.atom_decoder_depth * c.atom_decoder_heads +
               2 * c.atom_z);
    return floats * 4 + (int64_t(512) << 20);
}

int64_t Boltz2Spec::bytes_per_parallel_sample(int64_t tokens) const {
    const Config& c = cfg_;
    const int64_t N = tokens, A = ((N * 24 + 31) / 32) * 32;
    const int64_t width = 2 * c.token_s;
    // token transformer: a, s, their norms and the transition's 2x hidden (~12 widths), scores
    int64_t floats = N * width * 12 + N * N * c.token_transformer_heads;
    // atom transformer: q, c, keys and values per window, scores over 32 x 128 per window
    floats += A * c.atom_s * 12 + (A / c.window_queries) * c.window_queries * c.window_keys *
                                      std::max(c.atom_encoder_heads, c.atom_decoder_heads);
    return floats * 4;
}

std::unique_ptr<Boltz2StructureModel> Boltz2StructureModel::load(const io::ModelDir& dir) {
    auto m = std::make_unique<Boltz2StructureModel>();
    m->model_ = Boltz2Model::load(dir);
    namespace fs = std::filesystem;
    const fs::path ckpt = dir.torch_file().empty() ? fs::path(dir.dir()) : fs::path(dir.torch_file());
    m->conformers_ = load_cache_conformers(ckpt.parent_path().string());
    m->spec_ = std::make_unique<Boltz2Spec>(m->model_->config(), mols_dir_of(dir));
    const fs::path aff = ckpt.parent_path() / kAffinityCheckpoint;
    if (fs::is_regular_file(aff)) m->affinity_path_ = aff.string();
    return m;
}

void Boltz2StructureModel::load_run_needs(const std::vector<const fold::Input*>& targets,
                                          const RunNeeds& needs) {
    if (auto it = needs.given.find("affinity-checkpoint"); it != needs.given.end())
        set_affinity_checkpoint(it->second);
    const bool wanted = std::any_of(targets.begin(), targets.end(), [](const fold::Input* in) {
        return !in->affinity_binder.empty();
    });
    if (!wanted) return;
    if (affinity_path_.empty() && needs.fetch)
        affinity_path_ =
            (std::filesystem::path(needs.fetch(kAffinityModelName)) / kAffinityCheckpoint).string();
    // loaded with the structure model: a missing one fails before any target runs
    if (needs.stage) needs.stage("loading the affinity model");
    affinity_model();
}

const Boltz2Model& Boltz2StructureModel::affinity_model() const {
    std::call_once(affinity_once_, [&] {
        BI_CHECK(!affinity_path_.empty(), "affinity",
                 "no affinity model: boltz2_aff.ckpt is not beside the structure checkpoint "
                 "(give it with --affinity_checkpoint)");
        const io::ModelDir dir = io::ModelDir::open(affinity_path_);
        auto m = Boltz2Model::load(dir);
        BI_CHECK(m->has_affinity(), affinity_path_, "holds no affinity module (affinity_module1, ",
                 "affinity_module2 or affinity_module): not boltz's affinity checkpoint");
        affinity_model_ = std::move(m);
    });
    BI_CHECK(affinity_model_, "affinity", "the affinity model failed to load");
    return *affinity_model_;
}

bio::Prediction Boltz2StructureModel::predict(const fold::Input& in, const fold::Options& opts) const {
    using clock = std::chrono::steady_clock;
    bio::Prediction p;
    auto t_stage = clock::now();
    std::string stage = "featurize";
    const auto next_stage = [&](const std::string& name) {
        const auto now = clock::now();
        p.stage_seconds.emplace_back(stage, std::chrono::duration<double>(now - t_stage).count());
        stage = name;
        t_stage = now;
    };
    if (opts.progress) opts.progress("featurize", 0, 0);
    const bio::Target& target = in.target;  // as read (its MSAs with it) and prepared
    FeaturizeOptions fo;
    fo.seed = opts.seed;
    if (!opts.method.empty()) fo.method = method_key(opts.method);
    fo.conformers = &conformers_.library;
    fo.mols_dir = spec_->mols_dir();
    // a SMILES ligand's conformer search can take long: its attempts show as the stage
    const ConformerProgress conformer_progress([&](const std::string& s) {
        if (opts.progress) opts.progress(s, 0, 0);
    });
    const Featurized fz = featurize(target, fo);

    RunOptions ro;
    ro.recycling_steps = opts.num_recycles < 0 ? spec_->default_num_recycles() : opts.num_recycles;
    ro.sampling_steps = opts.sampling_steps > 0 ? opts.sampling_steps : 200;
    ro.diffusion_samples = std::max(1, opts.num_samples);
    ro.max_parallel_samples = opts.max_parallel_samples > 0 ? opts.max_parallel_samples : 5;
    if (opts.memory_budget > 0) {
        // fewer samples per denoiser batch when the requested number would not fit (the results
        // are the same: samples are independent)
        const int64_t spare = opts.memory_budget - spec_->memory_bytes(in);
        const int64_t fit = spare / std::max<int64_t>(1, spec_->bytes_per_parallel_sample(in.tokens));
        ro.max_parallel_samples = int(std::clamp<int64_t>(fit, 1, ro.max_parallel_samples));
    }
    ro.step_scale = opts.step_scale > 0 ? opts.step_scale : model_->config().step_scale;
    ro.seed = sampler_seed(opts.seed);
    ro.use_potentials = opts.use_potentials;
    ro.msa_subsample = {opts.msa_subsample, msa_seed(opts.seed)};
    // stage times: the trunk (embedder, passes), the sampler (conditioning, steps), confidence
    ro.progress = [&](const std::string& what, int step, int steps) {
        const std::string group = what == "input embedder" || what == "trunk pass" ? "trunk"
                                  : what == "confidence"                          ? "confidence"
                                                                                  : "diffusion";
        if (group != stage) next_stage(group);
        if (opts.progress) opts.progress(what, step, steps);
    };
    if (opts.tap) ro.tap = opts.tap;
    RunOutput r = model_->run(fz.feats, ro);
    next_stage("outputs");
    p.num_recycles = ro.recycling_steps;
    if (opts.write_embeddings) {  // as boltz's predict_step returns them: batch dimension first
        const Tensor& s = r.trunk.s;
        const Tensor& z = r.trunk.z;
        p.embeddings["s"] = s.reshape({1, s.size(0), s.size(1)});
        p.embeddings["z"] = z.reshape({1, z.size(0), z.size(1), z.size(2)});
    }

    // host-side: topology from the featurizer's metadata
    const StructureMeta& meta = fz.meta;
    for (const ChainMeta& c : meta.chains)
        p.chains.push_back(
            {c.id, molecule_type(c.type), c.token_begin, c.token_count, c.entity_id});
    for (const TokenMeta& t : meta.tokens) {
        bio::Token tok;
        tok.chain = t.chain;
        tok.residue = t.res_idx + 1;
        tok.name = t.res_name;
        tok.letter = bio::residue_letter(t.res_name);
        tok.first_atom = t.atom_begin;
        tok.atoms = t.atom_count;
        tok.rep_atom = t.center_atom;
        p.tokens.push_back(std::move(tok));
    }
    for (const AtomMeta& a : meta.atoms) p.atoms.push_back({a.token, a.name, a.symbol});
    for (const auto& [a1, a2, type] : meta.bonds) p.bonds.emplace_back(a1, a2);

    const int64_t S = r.coords.size(0), A = int64_t(meta.atoms.size()), N = int64_t(meta.tokens.size());
    std::vector<int64_t> order(static_cast<size_t>(S));
    std::iota(order.begin(), order.end(), 0);
    if (r.has_confidence)  // boltz ranks by confidence score, highest first
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
            return r.confidence_score[size_t(a)] > r.confidence_score[size_t(b)];
        });
    for (int64_t s : order) {
        bio::Sample out;
        // the real atoms come first; the featurizer pads at the end
        out.coords = r.coords.narrow0(s, s + 1).reshape({r.coords.size(1), 3}).narrow0(0, A).clone();
        out.token_plddt = Tensor::zeros({N});
        out.plddt = Tensor::zeros({A});
        if (r.has_confidence) {
            const ConfidenceOutput& k = r.confidence;
            out.token_plddt = k.plddt.narrow0(s, s + 1).reshape({N}).clone();
            for (int64_t a = 0; a < A; ++a)  // host-side: each atom carries its token's pLDDT
                out.plddt.f32()[a] = out.token_plddt.f32()[meta.atoms[size_t(a)].token];
            if (k.pae.defined()) out.pae = k.pae.narrow0(s, s + 1).reshape({N, N}).clone();
            if (k.pde.defined()) out.pde = k.pde.narrow0(s, s + 1).reshape({N, N}).clone();
            // host-side: sample s's scalars
            const auto at = [&](const Tensor& t) { return double(t.f32()[s]); };
            out.scores = {{"confidence_score", r.confidence_score[size_t(s)]},
                          {"ptm", at(k.ptm)},
                          {"iptm", at(k.iptm)},
                          {"ligand_iptm", at(k.ligand_iptm)},
                          {"protein_iptm", at(k.protein_iptm)},
                          {"complex_plddt", at(k.complex_plddt)},
                          {"complex_iplddt", at(k.complex_iplddt)},
                          {"complex_pde", at(k.complex_pde)},
                          {"complex_ipde", at(k.complex_ipde)}};
            const int64_t C = k.pair_chains_iptm.size(0);
            Tensor pci = Tensor::empty({C, C});
            for (int64_t i = 0; i < C * C; ++i)  // host-side: (C, C, S) -> sample s's (C, C)
                pci.f32()[i] = k.pair_chains_iptm.f32()[i * S + s];
            out.chain_pair_scores["pair_chains_iptm"] = pci;
        }
        p.samples.push_back(std::move(out));
    }
    if (!target.affinity_binder.empty()) {
        // boltz's affinity stage on the top-ranked sample: cropped around the binder, featurised
        // again, and run through the affinity model's own trunk, sampler and confidence.
        next_stage("affinity");
        if (opts.progress) opts.progress("affinity featurize", 0, 0);
        const Boltz2Model& am = affinity_model();
        AffinityInputs ai;
        ai.binder = target.affinity_binder;
        const Tensor& best = p.samples.front().coords;
        for (int64_t a = 0; a < A; ++a)  // host-side: the (A, 3) coordinate table
            ai.coords.push_back({best.f32()[a * 3], best.f32()[a * 3 + 1], best.f32()[a * 3 + 2]});
        FeaturizeOptions fa = fo;
        fa.affinity = &ai;
        fa.extra_mols = &fz.ligands;  // stage 1's molecules: embedded and standardised once
        const Featurized fz_aff = featurize(target, fa);
        RunOptions ra = affinity_run_options();
        if (opts.affinity_sampling_steps > 0) ra.sampling_steps = opts.affinity_sampling_steps;
        if (opts.affinity_samples > 0) ra.diffusion_samples = opts.affinity_samples;
        ra.max_parallel_samples = std::min(ra.diffusion_samples, ro.max_parallel_samples);
        ra.step_scale = ro.step_scale;
        ra.seed = sampler_seed(opts.seed + 1);
        ra.msa_subsample = {opts.msa_subsample, msa_seed(opts.seed + 1)};  // boltz's msa_args too
        ra.progress = [&](const std::string& what, int step, int steps) {
            if (opts.progress)
                opts.progress(what.rfind("affinity", 0) == 0 ? what : "affinity " + what, step,
                              steps);
        };
        double mw = 0;
        if (opts.affinity_mw_correction) {
            const bio::Chain* binder = nullptr;
            for (const bio::Chain& c : target.chains)
                if (c.id == target.affinity_binder) binder = &c;
            mw = binder->smiles.empty()
                     ? ccd_molecular_weight(binder->residues.front(), spec_->mols_dir(), in.where)
                     : molecular_weight(fz.ligands.at(binder->residues.front()));
        }
        const AffinityResult ar =
            am.predict_affinity(fz_aff.feats, ra, opts.affinity_mw_correction ? &mw : nullptr);
        p.properties = {{"affinity_pred_value", ar.value},
                        {"affinity_probability_binary", ar.probability}};
        if (ar.module_values.size() > 1)
            for (size_t k = 0; k < ar.module_values.size(); ++k) {
                p.properties.emplace_back(cat("affinity_pred_value", k + 1), ar.module_values[k]);
                p.properties.emplace_back(cat("affinity_probability_binary", k + 1),
                                          ar.module_probabilities[k]);
            }
        next_stage("outputs");
    }
    return p;
}

}  // namespace bioinfer::boltz2
