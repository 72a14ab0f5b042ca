// ESMFold2 parity: the tiny random-weight EsmFold2Model fixture
// (tools/reference/make_esmfold2_fixtures.py), stage by stage with the reference's random draws
// injected: the atom encoder's base embedding, s_inputs, z_init, the LM shim's pair, every parcae
// loop (LM encoder, injection, state, folding trunk), the decoded trunk pair and the distogram.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "io/model_dir.h"
#include "models/esmfold2/config.h"
#include "models/esmfold2/trunk.h"
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
    expect_close(r.out.distogram, f.get(id + ".trunk.distogram"), id + " distogram");
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

INSTANTIATE_TEST_SUITE_P(Cases, EsmFold2Case, ::testing::Values("mono", "dimer"),
                         [](const auto& info) { return info.param; });

}  // namespace
