// ESMFold2 parity: the tiny random-weight EsmFold2Model fixture
// (tools/reference/make_esmfold2_fixtures.py), stage by stage with the reference's random draws
// injected: the atom encoder's base embedding, s_inputs, z_init, the LM shim's pair, every parcae
// loop (LM encoder, injection, state, folding trunk), the decoded trunk pair and the distogram.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "io/model_dir.h"
#include "io/msa.h"
#include "models/esmfold2/confidence.h"
#include "models/esmfold2/config.h"
#include "models/esmfold2/diffusion.h"
#include "models/esmfold2/esmfold2.h"
#include "models/esmfold2/featurize.h"
#include "models/esmfold2/legacy.h"
#include "models/esmfold2/trunk.h"
#include "models/structure_model.h"
#include "nn/edm_sampler.h"
#include "ops/ops.h"
#include "test_util.h"

using namespace bioinfer;

namespace {

using Fixture = test::ParityFixture;

const Fixture& fixture() {
    static const Fixture f = test::load_parity_fixture("esmfold2_tiny");
    return f;
}
const io::ModelDir& model_dir() {
    static const io::ModelDir m = io::ModelDir::open(fixture().dir);
    return m;
}
const esmfold2::Config& config() {
    static const esmfold2::Config c =
        esmfold2::Config::from_json(model_dir().config(), fixture().dir + "/config.json");
    return c;
}
const esmfold2::Trunk& trunk() {
    static const esmfold2::Trunk t = esmfold2::Trunk::load(model_dir(), config());
    return t;
}

std::vector<int32_t> ints(const Tensor& t) {
    std::vector<int32_t> v(size_t(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = int32_t(std::lrint(t.f32()[i]));
    return v;
}
std::vector<float> floats(const Tensor& t) {
    return {t.f32(), t.f32() + t.numel()};
}

// The reference's featurised inputs (feat.*) as esmfold2::Inputs.
esmfold2::Inputs inputs_of(const std::string& id) {
    const Fixture& f = fixture();
    const auto g = [&](const std::string& k) { return f.get(id + ".feat." + k); };
    esmfold2::Inputs in;
    in.token_index = ints(g("token_index"));
    in.tokens = int64_t(in.token_index.size());
    in.residue_index = ints(g("residue_index"));
    in.asym_id = ints(g("asym_id"));
    in.sym_id = ints(g("sym_id"));
    in.entity_id = ints(g("entity_id"));
    in.mol_type = ints(g("mol_type"));
    in.res_type = ints(g("res_type"));
    in.input_ids = ints(g("input_ids"));
    in.rep_atom = ints(g("distogram_atom_idx"));
    esmfold2::AtomFeatures& a = in.atoms;
    const std::vector<int32_t> mask = ints(g("atom_attention_mask"));
    a.atoms = int64_t(mask.size());
    for (int32_t v : mask) a.real_atoms += v;
    a.tokens = in.tokens;
    a.ref_pos = floats(g("ref_pos"));
    a.ref_charge = floats(g("ref_charge"));
    a.ref_element = ints(g("ref_element"));
    a.name_chars = ints(g("ref_atom_name_chars"));
    a.space_uid = ints(g("ref_space_uid"));
    a.atom_to_token = ints(g("atom_to_token"));
    const Tensor msa = g("msa");
    in.msa_rows = msa.size(0);
    in.msa = ints(msa);
    in.has_deletion = floats(g("has_deletion"));
    in.deletion_value = floats(g("deletion_value"));
    in.deletion_mean = floats(g("deletion_mean"));
    return in;
}

// The reference's draws: its initial pair state and per-loop dropout masks.
esmfold2::TrunkDraws reference_draws(const std::string& id) {
    esmfold2::TrunkDraws d;
    d.initial_pair = [id](const Shape&) { return fixture().get(id + ".trunk.init"); };
    d.dropout_keep = [id](int64_t loop, const Shape&, double) {
        return fixture().get(id + ".trunk.dropout" + std::to_string(loop));
    };
    return d;
}

void expect_close(const Tensor& got, const Tensor& ref, const std::string& what) {
    ASSERT_EQ(got.numel(), ref.numel()) << what;
    const Tensor g = got.to_f32();
    const auto s = test::stats(g.f32(), ref.f32(), g.numel());
    EXPECT_GE(s.pcc, 0.99999) << what << " (max-abs " << s.max_abs << ", rel L2 " << s.rel_l2
                              << ")";
    EXPECT_LE(s.rel_l2, 1e-5) << what << " (PCC " << s.pcc << ", max-abs " << s.max_abs << ")";
}

struct TrunkRun {
    esmfold2::TrunkOutput out;
    std::map<std::string, Tensor> taps;
};

TrunkRun run_trunk(const std::string& id, esmfold2::TrunkDraws draws) {
    TrunkRun r;
    r.out = trunk().run(inputs_of(id), fixture().get(id + ".lm.hidden"), draws, -1,
                        [&](const std::string& k, const Tensor& t) { r.taps[k] = t.clone(); });
    return r;
}

class EsmFold2Case : public ::testing::TestWithParam<std::string> {};

TEST_P(EsmFold2Case, TrunkMatchesReferenceStageByStage) {
    const std::string id = GetParam();
    const TrunkRun r = run_trunk(id, reference_draws(id));
    const Fixture& f = fixture();
    for (const std::string k :
         {"embed.atom_embeds", "embed.single_inputs", "embed.z_init", "lm.pair"})
        expect_close(r.taps.at(k), f.get(id + "." + k), id + " " + k);
    expect_close(r.out.relpos, f.get(id + ".embed.relpos"), id + " relpos");
    for (int64_t loop = 0; loop <= config().num_loops; ++loop)
        for (const std::string k : {"lm", "inject", "state", "z"}) {
            const std::string name = "trunk." + k + std::to_string(loop);
            expect_close(r.taps.at(name), f.get(id + "." + name), id + " " + name);
        }
    expect_close(r.out.pair, f.get(id + ".trunk.pair"), id + " trunk pair");
    const Tensor ref_pair = f.get(id + ".trunk.pair");
    const auto st = test::stats(r.out.pair.f32(), ref_pair.f32(), ref_pair.numel());
    std::printf("%s decoded trunk pair: PCC %.9f, relative L2 %.2g\n", id.c_str(), st.pcc,
                st.rel_l2);
    expect_close(r.out.distogram, f.get(id + ".trunk.distogram"), id + " distogram");
}

// bioinfer's featurizer gives the reference's inputs: tokens, atoms (order, reference positions,
// elements, charges, names, uids), representative atoms; the MSA for the single-sequence case.
TEST_P(EsmFold2Case, FeaturizerMatchesReference) {
    const std::string id = GetParam();
    std::vector<std::string> chains;
    const std::string seq = fixture().cases[id == "mono" ? 0 : 1].sequence;
    for (size_t s = 0, e; s <= seq.size(); s = e + 1) {
        e = seq.find(':', s);
        if (e == std::string::npos) e = seq.size();
        chains.push_back(seq.substr(s, e - s));
    }
    const esmfold2::Inputs got = esmfold2::featurize(chains, id);
    const esmfold2::Inputs ref = inputs_of(id);
    EXPECT_EQ(got.token_index, ref.token_index);
    EXPECT_EQ(got.residue_index, ref.residue_index);
    EXPECT_EQ(got.asym_id, ref.asym_id);
    EXPECT_EQ(got.sym_id, ref.sym_id);
    EXPECT_EQ(got.entity_id, ref.entity_id);
    EXPECT_EQ(got.mol_type, ref.mol_type);
    EXPECT_EQ(got.res_type, ref.res_type);
    EXPECT_EQ(got.input_ids, ref.input_ids);
    EXPECT_EQ(got.rep_atom, ref.rep_atom);
    EXPECT_EQ(got.atoms.atoms, ref.atoms.atoms);
    EXPECT_EQ(got.atoms.real_atoms, ref.atoms.real_atoms);
    EXPECT_EQ(got.atoms.ref_pos, ref.atoms.ref_pos);  // bit for bit: the reference's float32 table
    EXPECT_EQ(got.atoms.ref_charge, ref.atoms.ref_charge);
    EXPECT_EQ(got.atoms.ref_element, ref.atoms.ref_element);
    EXPECT_EQ(got.atoms.name_chars, ref.atoms.name_chars);
    EXPECT_EQ(got.atoms.space_uid, ref.atoms.space_uid);
    EXPECT_EQ(got.atoms.atom_to_token, ref.atoms.atom_to_token);
    if (ref.msa_rows == 1) {
        EXPECT_EQ(got.msa, ref.msa);
        EXPECT_EQ(got.deletion_mean, ref.deletion_mean);
    }
}

// The bundled ESM C tower's hidden states at the residues, every layer (the last after the final
// LayerNorm), each chain run on its own as the reference's chain-aware attention does.
TEST_P(EsmFold2Case, LanguageModelHiddenStatesMatchReference) {
    const std::string id = GetParam();
    auto lm = esm::EsmcModel::load_embedded(model_dir(), config().esmc, "esmc.",
                                            fixture().dir + "/config.json");
    const Tensor got = esmfold2::lm_hidden_states(*lm, inputs_of(id));
    const Tensor ref = fixture().get(id + ".lm.hidden");
    ASSERT_EQ(got.shape(), ref.shape());
    const int64_t L = ref.size(0), K = ref.size(1), D = ref.size(2);
    for (int64_t k = 0; k < K; ++k) {
        Tensor g = Tensor::empty({L, D}), r = Tensor::empty({L, D});
        ops::copy(got.reshape({L, K * D}).slice(1, k * D, (k + 1) * D), g);
        ops::copy(ref.reshape({L, K * D}).slice(1, k * D, (k + 1) * D), r);
        expect_close(g, r, id + " LM layer " + std::to_string(k));
    }
}

// The LM dropout masks are part of the reference's run: other masks miss its trunk.
TEST_P(EsmFold2Case, OtherDropoutMasksMissTheTrunk) {
    const std::string id = GetParam();
    esmfold2::TrunkDraws d = reference_draws(id);
    d.dropout_keep = [id](int64_t loop, const Shape&, double) {
        return fixture().get(id + ".trunk.dropout" + std::to_string((loop + 1) % 3));
    };
    const TrunkRun r = run_trunk(id, d);
    const Tensor ref = fixture().get(id + ".trunk.pair");
    const auto s = test::stats(r.out.pair.f32(), ref.f32(), ref.numel());
    EXPECT_LT(s.pcc, 0.9999) << id;
}

const esmfold2::DiffusionModule& diffusion() {
    static const esmfold2::DiffusionModule d =
        esmfold2::DiffusionModule::load(model_dir(), config());
    return d;
}
const esmfold2::ConfidenceHead& confidence() {
    static const esmfold2::ConfidenceHead h = esmfold2::ConfidenceHead::load(model_dir(), config());
    return h;
}

// The reference's trunk outputs, as the heads take them.
esmfold2::TrunkOutput reference_trunk(const std::string& id) {
    const Fixture& f = fixture();
    esmfold2::TrunkOutput t;
    t.s_inputs = f.get(id + ".embed.single_inputs");
    t.relpos = f.get(id + ".embed.relpos");
    t.bonds = f.get(id + ".embed.bonds");
    t.pair = f.get(id + ".trunk.pair");
    t.distogram = f.get(id + ".trunk.distogram");
    return t;
}

// Coordinates: every value within 1e-3 of the reference's spread (standard deviation).
void expect_coords(const Tensor& got, const Tensor& ref, const std::string& what) {
    ASSERT_EQ(got.numel(), ref.numel()) << what;
    const Tensor g = got.to_f32();
    double mean = 0, var = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) mean += ref.f32()[i];
    mean /= double(ref.numel());
    for (int64_t i = 0; i < ref.numel(); ++i) var += std::pow(ref.f32()[i] - mean, 2);
    const double spread = std::sqrt(var / double(ref.numel()));
    const auto s = test::stats(g.f32(), ref.f32(), g.numel());
    EXPECT_LE(s.max_abs, 1e-3 * spread) << what << ": spread " << spread;
}

// The first `real` atoms of per-sample atom rows t (S, A, ...) -> (S, real, ...).
Tensor real_atoms(const Tensor& t, int64_t real) {
    Shape sh = t.shape();
    const int64_t S = sh[0], A = sh[1], inner = t.numel() / (S * A);
    Tensor out = Tensor::empty({S, real * inner});
    ops::copy(t.to_f32().reshape({S, A * inner}).slice(1, 0, real * inner), out);
    sh[1] = real;
    return out.reshape(sh);
}

// The step-invariant conditioning and one denoiser call (the sampler's first), stage by stage.
TEST_P(EsmFold2Case, DenoiserMatchesReference) {
    const std::string id = GetParam();
    const Fixture& f = fixture();
    const esmfold2::Inputs in = inputs_of(id);
    const auto k = diffusion().prepare(in, reference_trunk(id));
    expect_close(k.pair, f.get(id + ".diff.pair_cond"), id + " pair conditioning");
    for (size_t l = 0; l < k.bias.layers.size(); ++l)
        expect_close(k.bias.layers[l], f.get(id + ".diff.bias" + std::to_string(l)),
                     id + " token bias " + std::to_string(l));
    expect_close(k.single_proj, f.get(id + ".diff.single_proj"), id + " single projection");
    std::map<std::string, Tensor> taps;
    const Tensor den = diffusion().denoise(
        k, f.get(id + ".diff.call.noisy"), f.get(id + ".diff.call.sigma").f32()[0],
        [&](const std::string& n, const Tensor& t) { taps[n] = t.clone(); });
    for (const std::string n : {"single", "atom_tokens", "tokens"})
        expect_close(taps.at("diff.call." + n), f.get(id + ".diff.call." + n), id + " call " + n);
    // atoms: the real ones (padding atoms carry meaningless values on both sides)
    const int64_t R = in.atoms.real_atoms;
    expect_close(real_atoms(taps.at("diff.call.update"), R),
                 real_atoms(f.get(id + ".diff.call.update"), R), id + " call update");
    expect_close(real_atoms(den, R), real_atoms(f.get(id + ".diff.call.denoised"), R),
                 id + " denoised");
}

// The reference sampler's draws in the order nn::sample asks for them: the initial noise, then
// per step the quaternion, translation and churn draws.
std::vector<Tensor> sampler_draws(const std::string& id) {
    const Fixture& f = fixture();
    const Tensor quat = f.get(id + ".sample.quat_randn"), trans = f.get(id + ".sample.trans_randn"),
                 eps = f.get(id + ".sample.eps_randn");
    std::vector<Tensor> draws{f.get(id + ".sample.x0_randn")};
    for (int64_t i = 0; i < quat.size(0); ++i)
        for (const Tensor* t : {&quat, &trans, &eps}) draws.push_back(t->narrow0(i, i + 1).clone());
    return draws;
}

// 1 for the real atoms, 0 for the padding.
std::vector<float> atom_mask(const esmfold2::Inputs& in) {
    std::vector<float> mask(size_t(in.atoms.atoms), 0.f);
    for (int64_t a = 0; a < in.atoms.real_atoms; ++a) mask[size_t(a)] = 1.f;
    return mask;
}

// The whole sampler on the reference's draws (capped schedule, churn, masked centering, Kabsch):
// every step's denoised coordinates and the final ones.
TEST_P(EsmFold2Case, SamplerReplayMatchesReference) {
    const std::string id = GetParam();
    const Fixture& f = fixture();
    const esmfold2::Inputs in = inputs_of(id);
    const auto k = diffusion().prepare(in, reference_trunk(id));
    const Tensor den = f.get(id + ".sample.denoised");
    const int64_t steps = den.size(0), S = den.size(1);
    const std::vector<Tensor> draws = sampler_draws(id);
    nn::ReplayNormal rng(draws);
    const auto p = esmfold2::sampler_params(config(), f.meta["steps"].get<int64_t>(), S, S);
    const std::vector<float> mask = atom_mask(in);
    int64_t seen = 0;
    const Tensor coords = nn::sample(
        [&](const Tensor& x, float sigma) { return diffusion().denoise(k, x, sigma); },
        Tensor::of(mask), p, rng,
        [&](const nn::SamplerStep& st) {
            expect_coords(
                real_atoms(st.denoised, in.atoms.real_atoms),
                real_atoms(den.narrow0(st.index, st.index + 1).reshape(st.denoised.shape()),
                           in.atoms.real_atoms),
                id + " step " + std::to_string(st.index) + " denoised");
            EXPECT_FLOAT_EQ(st.t_hat, f.get(id + ".sample.sigma").f32()[st.index]);
            ++seen;
        });
    EXPECT_EQ(seen, steps);
    EXPECT_EQ(rng.used(), draws.size());
    expect_coords(real_atoms(coords, in.atoms.real_atoms),
                  real_atoms(f.get(id + ".sample.coords"), in.atoms.real_atoms),
                  id + " sampled coordinates");
}

// ESMFold2 centres on the real atoms only: centring on every atom, padding included (Boltz-2's
// rule), misses the reference's run.
TEST(EsmFold2Sampler, UnmaskedCenteringMissesReference) {
    const std::string id = "mono";
    const Fixture& f = fixture();
    const esmfold2::Inputs in = inputs_of(id);
    ASSERT_LT(in.atoms.real_atoms, in.atoms.atoms);  // the case has padding atoms
    const auto k = diffusion().prepare(in, reference_trunk(id));
    const int64_t S = f.get(id + ".sample.denoised").size(1);
    nn::ReplayNormal rng(sampler_draws(id));
    auto p = esmfold2::sampler_params(config(), f.meta["steps"].get<int64_t>(), S, S);
    p.masked_centering = false;
    const std::vector<float> mask = atom_mask(in);
    const Tensor coords = nn::sample(
        [&](const Tensor& x, float sigma) { return diffusion().denoise(k, x, sigma); },
        Tensor::of(mask), p, rng);
    const Tensor got = real_atoms(coords, in.atoms.real_atoms),
                 ref = real_atoms(f.get(id + ".sample.coords"), in.atoms.real_atoms);
    const auto s = test::stats(got.f32(), ref.f32(), ref.numel());
    EXPECT_GT(s.max_abs, 0.1) << "unmasked centring reproduced the reference";
}

// The confidence head on the reference's sampled coordinates: pair and single per sample, every
// logit and score.
TEST_P(EsmFold2Case, ConfidenceMatchesReference) {
    const std::string id = GetParam();
    const Fixture& f = fixture();
    const esmfold2::Inputs in = inputs_of(id);
    std::map<std::string, Tensor> taps;
    const auto c =
        confidence().run(in, reference_trunk(id), f.get(id + ".sample.coords"),
                         [&](const std::string& n, const Tensor& t) { taps[n] = t.clone(); });
    const Tensor pair = f.get(id + ".conf.pair"), single = f.get(id + ".conf.single");
    for (int64_t s = 0; s < pair.size(0); ++s) {
        expect_close(taps.at("conf.pair." + std::to_string(s)), pair.narrow0(s, s + 1),
                     id + " pair " + std::to_string(s));
        expect_close(taps.at("conf.single." + std::to_string(s)), single.narrow0(s, s + 1),
                     id + " single " + std::to_string(s));
    }
    const std::map<std::string, const Tensor*> tensors = {{"plddt_logits", &c.plddt_logits},
                                                          {"plddt_per_atom", &c.plddt_per_atom},
                                                          {"plddt", &c.plddt},
                                                          {"plddt_ca", &c.plddt_ca},
                                                          {"resolved_logits", &c.resolved_logits},
                                                          {"pae_logits", &c.pae_logits},
                                                          {"pde_logits", &c.pde_logits}};
    for (const auto& [n, t] : tensors) expect_close(*t, f.get(id + ".conf." + n), id + " " + n);
    for (const std::string n : {"pae", "pde"}) {
        const Tensor& t = n == "pae" ? c.pae : c.pde;
        const Tensor ref = f.get(id + ".conf." + n);
        const auto st = test::stats(t.f32(), ref.f32(), ref.numel());
        EXPECT_LE(st.max_abs, 1e-4 * 32) << id << " " << n;
    }
    const std::map<std::string, const std::vector<float>*> scores = {
        {"complex_plddt", &c.complex_plddt},
        {"complex_iplddt", &c.complex_iplddt},
        {"ptm", &c.ptm},
        {"iptm", &c.iptm}};
    for (const auto& [n, v] : scores) {
        const Tensor ref = f.get(id + ".conf." + n);
        ASSERT_EQ(int64_t(v->size()), ref.numel()) << n;
        for (int64_t s = 0; s < ref.numel(); ++s)
            EXPECT_NEAR((*v)[size_t(s)], ref.f32()[s], 1e-4) << id << " " << n << " " << s;
    }
    const Tensor ref = f.get(id + ".conf.pair_chains_iptm");
    ASSERT_EQ(c.pair_chains_iptm.numel(), ref.numel());
    for (int64_t i = 0; i < ref.numel(); ++i)
        EXPECT_NEAR(c.pair_chains_iptm.f32()[i], ref.f32()[i], 1e-4) << id << " chain-pair ipTM";
}

// The research layout (tools/reference/make_esmfold2_legacy_fixture.py: the fixture's weights
// in the old trunk names with the tower apart in TransformerEngine names, laid out from Biohub's
// own transformers-to-research table) is detected and folds exactly as the transformers layout.
TEST(EsmFold2Legacy, ResearchLayoutFoldsAsTheTransformersLayout) {
    const std::string legacy_dir = std::string(BIOINFER_FIXTURES) + "/esmfold2_tiny_legacy";
    const io::ModelDir legacy = io::ModelDir::open(legacy_dir);
    EXPECT_TRUE(esmfold2::is_legacy_layout(legacy));
    EXPECT_FALSE(esmfold2::is_legacy_layout(model_dir()));
    EXPECT_EQ(fold::detect_architecture(legacy), "esmfold2");
    const auto a = esmfold2::EsmFold2Model::load(model_dir());
    const auto b = esmfold2::EsmFold2Model::load(esmfold2::from_legacy(legacy));
    for (const std::string id : {"mono", "dimer"}) {
        esmfold2::FoldOptions o;
        o.samples = 2;
        o.steps = 6;
        o.seed = 7;
        const esmfold2::FoldOutput x = a->fold(inputs_of(id), o), y = b->fold(inputs_of(id), o);
        const auto st = test::stats(y.coords.f32(), x.coords.f32(), x.coords.numel());
        EXPECT_LE(st.max_abs, 1e-5) << id << " coordinates";
        const auto pl = test::stats(y.confidence.plddt.f32(), x.confidence.plddt.f32(),
                                    x.confidence.plddt.numel());
        EXPECT_LE(pl.max_abs, 1e-6) << id << " pLDDT";
        ASSERT_EQ(x.confidence.ptm.size(), y.confidence.ptm.size());
        for (size_t s = 0; s < x.confidence.ptm.size(); ++s)
            EXPECT_NEAR(x.confidence.ptm[s], y.confidence.ptm[s], 1e-6) << id << " pTM";
    }
}

// Without its tower folder the research layout is refused with the folder it looked for.
TEST(EsmFold2Legacy, MissingTowerIsNamed) {
    namespace fs = std::filesystem;
    const fs::path dir =
        fs::temp_directory_path() / ("bioinfer_esmfold2_legacy_" + std::to_string(getpid()));
    fs::create_directories(dir);
    for (const char* f : {"config.json", "model.safetensors"})
        fs::copy_file(std::string(BIOINFER_FIXTURES) + "/esmfold2_tiny_legacy/" + f, dir / f,
                      fs::copy_options::overwrite_existing);
    const std::string err =
        test::error_of([&] { esmfold2::from_legacy(io::ModelDir::open(dir.string())); });
    EXPECT_NE(err.find((dir / "esmc").string()), std::string::npos) << err;
    fs::remove_all(dir);
}

// The esm package's a3m rules: a record's lines joined, every row kept (duplicates too),
// lower-case letters and '.' as insertions counted before the next column, key=N from the header.
TEST(EsmFold2Msa, A3mReadAsTheEsmPackageReadsIt) {
    const bio::Msa m = io::parse_a3m_esm(
        "#hhblits\n>query\nMKT\nAY\n>s1 key=7\nMa.KT-Y\n>s2 monkey=-3\nMKTAY\n>s3\nMKTAY\n"
        ">s4\nMKTAY\n",
        "t.a3m", 0);
    ASSERT_EQ(m.rows.size(), 5u);  // s3 and s4 repeat s2: kept
    EXPECT_EQ(m.rows[0].residues, "MKTAY");
    EXPECT_EQ(m.rows[1].residues, "MKT-Y");
    ASSERT_EQ(m.rows[1].deletions.size(), 1u);
    EXPECT_EQ(m.rows[1].deletions[0], std::make_pair(1, 2));  // "a." before K
    EXPECT_EQ(m.rows[1].taxonomy, 7);
    EXPECT_EQ(m.rows[2].taxonomy, -3);  // a substring match, as the esm package's search
    EXPECT_EQ(m.rows[3].taxonomy, -1);
    // max_seqs rows read, the rest never parsed (the ragged third row)
    EXPECT_EQ(io::parse_a3m_esm(">q\nMKTAY\n>a\nMKTAY\n>b\nMK\n", "t.a3m", 2).rows.size(), 2u);
    EXPECT_NE(test::error_of([] {
                  io::parse_a3m_esm(">q\nMKTAY\n>a\nMKT\n", "t.a3m", 0);
              }).find("t.a3m:3"),
              std::string::npos);
    EXPECT_NE(test::error_of([] { io::parse_a3m_esm("MKTAY\n", "t.a3m", 0); }).find("header"),
              std::string::npos);
}

// Rows paired by key across chains as the esm package's construct_paired_msa lays them out (the
// worked example of its layout, checked against the package: keys seen twice or more grouped,
// the group touching more chains first, a shorter group cycled, unpaired rows side by side), and
// its deletion transform pi/2 atan(d/3) (0.50540, 0.92363, 1.83140 at 1, 2, 7 deletions).
TEST(EsmFold2Msa, ChainsPairByKeyAndDeletionsTransform) {
    esmfold2::Inputs in = esmfold2::featurize({"MKTA", "GSW"}, "test");
    const bio::Msa a = io::parse_a3m_esm(
        ">q\nMKTA\n>a1 key=7\nMKTV\n>a2\nMaKTL\n>a3 key=9\nMKTI\n>a4 key=7\nMbbKTF\n", "a.a3m", 0);
    const bio::Msa b =
        io::parse_a3m_esm(">q\nGSW\n>b1 key=9\nGSY\n>b2 key=7\nGSF\n>b3\nGccccccSH\n", "b.a3m", 0);
    esmfold2::attach_msas(in, {&a, &b}, "test");  // 5 rows: under the default limit
    ASSERT_EQ(in.msa_rows, 5);
    const int64_t T = in.tokens;
    // the last column's class of each chain per row: A, V, F, I, L | W, F, F, Y, H
    const auto cls = [&](int64_t row, int64_t t) { return in.msa[size_t(row * T + t)]; };
    const std::vector<char> last_a = {'A', 'V', 'F', 'I', 'L'}, last_b = {'W', 'F', 'F', 'Y', 'H'};
    std::map<char, int32_t> letter;
    for (const auto& r : esmfold2::protein_residues()) letter[r.letter] = r.res_type;
    for (int64_t r = 0; r < 5; ++r) {
        EXPECT_EQ(cls(r, 3), letter[last_a[size_t(r)]]) << "row " << r << " chain A";
        EXPECT_EQ(cls(r, 6), letter[last_b[size_t(r)]]) << "row " << r << " chain B";
    }
    const auto dv = [&](int64_t row, int64_t t) { return in.deletion_value[size_t(row * T + t)]; };
    EXPECT_NEAR(dv(4, 1), 0.50540f, 1e-5);  // a2: one insertion before K
    EXPECT_NEAR(dv(2, 1), 0.92363f, 1e-5);  // a4: two
    EXPECT_EQ(in.has_deletion[size_t(2 * T + 1)], 1.f);
    EXPECT_EQ(in.has_deletion[size_t(2 * T + 0)], 0.f);
    float sum = 0;
    for (int64_t r = 0; r < 5; ++r) sum += dv(r, 5);  // b3's six insertions before S
    EXPECT_NEAR(dv(4, 5), float(M_PI / 2) * std::atan(2.f), 1e-6);
    EXPECT_NEAR(in.deletion_mean[5], sum / 5, 1e-6);
    // a row limit keeps the first rows of that layout
    esmfold2::Inputs capped = esmfold2::featurize({"MKTA", "GSW"}, "test");
    esmfold2::attach_msas(capped, {&a, &b}, "test", 3);
    ASSERT_EQ(capped.msa_rows, 3);
    EXPECT_TRUE(std::equal(capped.msa.begin(), capped.msa.end(), in.msa.begin()));
    // a chain without an MSA keeps its own sequence in row 0 and gaps (class 1) below
    esmfold2::Inputs solo = esmfold2::featurize({"MKTA", "GSW"}, "test");
    esmfold2::attach_msas(solo, {&a, nullptr}, "test");
    EXPECT_EQ(solo.msa[size_t(4)], letter['G']);
    EXPECT_EQ(solo.msa[size_t(solo.tokens + 4)], 1);
}

// The MSA features bioinfer built equal the reference's.
static void expect_msa_features(const esmfold2::Inputs& in, const esmfold2::Inputs& ref) {
    ASSERT_EQ(in.msa_rows, ref.msa_rows);
    EXPECT_EQ(in.msa, ref.msa);
    EXPECT_EQ(in.has_deletion, ref.has_deletion);
    ASSERT_EQ(in.deletion_value.size(), ref.deletion_value.size());
    for (size_t i = 0; i < ref.deletion_value.size(); ++i)
        EXPECT_NEAR(in.deletion_value[i], ref.deletion_value[i], 1e-6) << i;
    for (size_t t = 0; t < ref.deletion_mean.size(); ++t)
        EXPECT_NEAR(in.deletion_mean[t], ref.deletion_mean[t], 1e-6) << t;
}

// Each case's MSA as the generator wrote it (cases.json "msa": an a3m, its rows' deletions as
// lower-case insertions) gives the fixture's MSA features through bioinfer's parser and layout:
// classes, deletion flags, values and their mean over the rows.
TEST(EsmFold2Msa, A3mGivesTheFixturesMsaFeatures) {
    const auto cases = nlohmann::json::parse(io::read_file(fixture().dir + "/cases.json"))["cases"];
    int with_msa = 0;
    for (const auto& c : cases) {
        if (!c.contains("msa")) continue;
        ++with_msa;
        const std::string id = c["id"], file = c["msa"];
        SCOPED_TRACE(id);
        const bio::Msa msa = io::parse_a3m_esm(io::read_file(fixture().dir + "/" + file), file, 0);
        esmfold2::Inputs in = esmfold2::featurize({c["sequence"].get<std::string>()}, "test");
        esmfold2::attach_msas(in, {&msa}, "test");
        expect_msa_features(in, inputs_of(id));
    }
    EXPECT_GT(with_msa, 0) << "no case of the fixture has an MSA";
}


INSTANTIATE_TEST_SUITE_P(Cases, EsmFold2Case, ::testing::Values("mono", "dimer"),
                         [](const auto& info) { return info.param; });

}  // namespace
