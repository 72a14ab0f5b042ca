// Boltz-2's affinity module against the boltz package's (fixture part `affinity`): the tiny
// affinity checkpoint's two modules on the protein-ligand case with chain B as the binder, every
// stage at the parity bar and the value and logit within 1e-4; a wrong binder fails it.
#include <gtest/gtest.h>

#include <algorithm>

#include "boltz2_fixture.h"
#include "io/boltz_inputs.h"
#include "models/boltz2/affinity.h"
#include "models/boltz2/boltz2.h"
#include "models/boltz2/featurizer.h"

namespace bioinfer::test {
namespace {

const io::ModelDir& affinity_weights() {
    static const io::ModelDir m = io::ModelDir::open(boltz2_fixture_dir() + "/boltz2_aff.ckpt");
    return m;
}

struct ModuleRun {
    boltz2::AffinityOutput out;
    std::map<std::string, Tensor> seen;
};

ModuleRun run_module(int k, const boltz2::Features& f, const Boltz2Case& c) {
    const boltz2::AffinityModule m = boltz2::AffinityModule::load(
        affinity_weights(), "affinity_module" + std::to_string(k), boltz2_config().token_s,
        boltz2_config().token_z);
    ModuleRun r;
    r.out = m.forward(c.get("affinity.s_inputs"), c.get("affinity.z"), c.get("affinity.coords"), f,
                      [&](const std::string& n, const Tensor& t) { r.seen[n] = t.clone(); });
    return r;
}

boltz2::Features with_binder(const Boltz2Case& c, const Tensor& mask) {
    boltz2::Features f = c.feats;
    f.set("affinity_token_mask", mask);
    return f;
}

// The affinity stage's case (make_boltz2_affinity_fixture.py): a predicted complex featurised
// again around the binder, as boltz's affinity stage does, with the reference's ligand molecule
// and per-residue motions injected.
boltz2::Featurized featurize_affinity_case(const Boltz2Case& c, const std::string& binder = "B") {
    static const boltz2::ConformerLibrary ligands = reference_ligands("affinity");
    boltz2::AffinityInputs aff;
    aff.binder = binder;
    const Tensor xyz = c.get("structure.coords");
    for (int64_t a = 0; a < xyz.shape()[0]; ++a)
        // host-side: reading the fixture's (A, 3) coordinate table
        aff.coords.push_back({xyz.f32()[a * 3], xyz.f32()[a * 3 + 1], xyz.f32()[a * 3 + 2]});
    boltz2::FeaturizeOptions opt;
    opt.augmentation = reference_motions(c, "affinity.");
    opt.mols_dir = boltz2_fixture_dir() + "/mols";
    opt.extra_mols = &ligands;
    opt.affinity = &aff;
    return boltz2::featurize(
        io::read_boltz_input(boltz2_fixture_dir() + "/inputs/affinity/affinity.yaml"), opt);
}

}  // namespace

// Every feature of boltz's affinity stage: the crop (200 receptor tokens, the binder and a CCD
// ligand; a far chain left out, also from the MSA pairing), method "other", frames and
// distogram centres from the predicted coordinates, the binder mask and the affinity profile.
TEST(Boltz2Affinity, StageFeaturesMatchReference) {
    const Boltz2Case c = load_boltz2_case("affinity");
    const boltz2::Featurized got = featurize_affinity_case(c);
    expect_features_match(got, c);
    EXPECT_EQ(got.feats.num_tokens(), 216);
}

// Another binder gives another crop: the comparison can fail.
TEST(Boltz2Affinity, StageFeaturesFollowTheBinder) {
    const Boltz2Case c = load_boltz2_case("affinity");
    const boltz2::Featurized got = featurize_affinity_case(c, "C");
    const Tensor& mask = got.feats.at("affinity_token_mask");
    EXPECT_NE(max_diff(mask, c.feats.at("affinity_token_mask")), 0.0);
    EXPECT_THROW(featurize_affinity_case(c, "A"), Error);  // a protein is no binder
}

// boltz builds a SMILES binder from its standardised SMILES: the same molecule written in another
// atom order (and as a salt) gives boltz's ligand, atom for atom; not as the binder, it keeps the
// order it was written in.
TEST(Boltz2Affinity, BinderIsBuiltFromTheStandardisedSmiles) {
    const boltz2::ConformerLibrary ref = reference_ligands("affinity");
    const boltz2::ResidueMol& lig1 = ref.at("LIG1");  // boltz's: standardised aspirin
    bio::Target t =
        io::read_boltz_input(boltz2_fixture_dir() + "/inputs/affinity/affinity.yaml");
    for (auto& c : t.chains)
        if (c.id == "B") c.smiles = "OC(=O)c1ccccc1OC(C)=O.[Na+].[Cl-]";
    boltz2::FeaturizeOptions opt;
    opt.mols_dir = boltz2_fixture_dir() + "/mols";
    const auto names = [](const boltz2::Featurized& f) {
        std::vector<std::string> n;
        for (const auto& a : f.meta.atoms)
            if (f.meta.chains[size_t(f.meta.tokens[size_t(a.token)].chain)].id == "B")
                n.push_back(a.name);
        return n;
    };
    std::vector<std::string> want;
    for (const auto& a : lig1.atoms) want.push_back(a.name);
    EXPECT_EQ(names(boltz2::featurize(t, opt)), want);
    t.affinity_binder.clear();
    t.chains.erase(std::remove_if(t.chains.begin(), t.chains.end(),
                                  [](const bio::Chain& c) { return c.id == "B"; }),
                   t.chains.end());
    io::add_boltz_ligand(t, "B", "OC(=O)c1ccccc1OC(C)=O", "test");
    EXPECT_NE(names(boltz2::featurize(t, opt)), want) << "written order, not boltz's";
}

TEST(Boltz2Affinity, ModulesMatchReference) {
    const Boltz2Case c = load_boltz2_case("protein_ligand");
    const boltz2::Features f = with_binder(c, c.get("affinity.token_mask"));
    for (int k : {1, 2}) {
        SCOPED_TRACE(k);
        const ModuleRun r = run_module(k, f, c);
        const std::string p = "affinity.m" + std::to_string(k) + ".";
        for (const char* n : {"z_in", "z_cond", "z_stack", "g"})
            expect_parity(r.seen.at(n), c.get(p + n), p + n);
        EXPECT_NEAR(r.out.value, c.get(p + "value").f32()[0], 1e-4);
        EXPECT_NEAR(r.out.logit, c.get(p + "logit").f32()[0], 1e-4);
    }
}

// The module reads the binder from affinity_token_mask: another ligand as the binder changes
// which pairs are kept, and the stack's output misses the bar.
TEST(Boltz2Affinity, WrongBinderFailsTheBar) {
    const Boltz2Case c = load_boltz2_case("protein_ligand");
    const Tensor asym = c.feats.at("asym_id").to_f32();
    std::vector<float> other(size_t(asym.numel()));
    for (int64_t i = 0; i < asym.numel(); ++i) other[size_t(i)] = asym.f32()[i] == 2.f ? 1.f : 0.f;
    const ModuleRun r = run_module(1, with_binder(c, Tensor::of(other, {asym.numel()})), c);
    EXPECT_FALSE(within_bar(parity_stats(r.seen.at("z_stack"), c.get("affinity.m1.z_stack"))));
}

}  // namespace bioinfer::test

namespace bioinfer::test {

// boltz's AffinityCropper on a synthetic table (a 300-residue protein, a 20-atom binder, an ion,
// a second protein): the same tokens kept; a tighter receptor limit keeps fewer.
TEST(Boltz2Affinity, CropKeepsBoltzsTokens) {
    const Boltz2Case c = load_boltz2_case("protein_ligand");
    const Tensor asym = c.get("affinity.crop.asym_id"), mol = c.get("affinity.crop.mol_type"),
                 res = c.get("affinity.crop.res_idx"), atoms = c.get("affinity.crop.atom_num"),
                 aff = c.get("affinity.crop.affinity"), center = c.get("affinity.crop.center"),
                 kept = c.get("affinity.crop.kept");
    std::vector<boltz2::CropToken> tokens(size_t(asym.numel()));
    for (size_t i = 0; i < tokens.size(); ++i) {
        auto& t = tokens[i];
        t.asym_id = int(asym.f32()[i]);
        t.mol_type = int(mol.f32()[i]);
        t.res_idx = int(res.f32()[i]);
        t.atoms = int64_t(atoms.f32()[i]);
        t.binder = aff.f32()[i] > 0.5f;
        for (int k = 0; k < 3; ++k) t.center[size_t(k)] = center.f32()[i * 3 + size_t(k)];
    }
    const std::vector<int64_t> got = boltz2::affinity_crop(tokens);
    std::vector<int64_t> want;
    for (int64_t i = 0; i < kept.numel(); ++i) want.push_back(int64_t(kept.f32()[i]));
    EXPECT_EQ(got, want);
    boltz2::CropLimits tight;
    tight.max_receptor = 100;
    EXPECT_LT(boltz2::affinity_crop(tokens, tight).size(), want.size());
}

// The affinity stage's whole forward on boltz's features (the reference's draws replayed):
// the affinity model's own trunk (5 recycling steps), 5 samples, confidence on each, the sample
// with the highest ipTM (four tie here: the lowest index wins), the affinity input embedding,
// and both modules with their ensemble, within 1e-4 of boltz's outputs.
TEST(Boltz2Affinity, StageRunMatchesReference) {
    const Boltz2Case c = load_boltz2_case("affinity");
    const auto model = boltz2::Boltz2Model::load(affinity_weights());
    ASSERT_TRUE(model->has_affinity());
    boltz2::RunOptions o = boltz2::affinity_run_options();
    o.sampling_steps = 3;
    nn::ReplayNormal rng(reference_draws(c, 3, "run."));
    o.rng = &rng;
    std::map<std::string, Tensor> seen;
    o.tap = [&](const std::string& n, const Tensor& t) {
        if (n == "affinity.s_inputs") seen[n] = t.clone();
    };
    const boltz2::AffinityResult r = model->predict_affinity(c.feats, o);
    EXPECT_EQ(rng.used(), 1u + 3u * 3u);

    const Tensor ref = c.get("run.sample_atom_coords");
    ASSERT_EQ(r.run.coords.shape(), ref.shape());
    const Stats d = parity_stats(r.run.coords, ref);
    EXPECT_GE(d.pcc, 0.99999) << "coordinates, max-abs " << d.max_abs;
    const Tensor iptm = c.get("run.iptm");
    for (int64_t s = 0; s < iptm.numel(); ++s)
        EXPECT_NEAR(r.run.confidence.iptm.f32()[s], iptm.f32()[s], 1e-4) << "ipTM of sample " << s;
    EXPECT_EQ(r.best_sample, int64_t(c.get("run.best_idx").f32()[0]));
    expect_parity(seen.at("affinity.s_inputs"), c.get("run.s_inputs_affinity"), "s_inputs");

    EXPECT_NEAR(r.value, c.get("run.affinity_pred_value").f32()[0], 1e-4);
    EXPECT_NEAR(r.probability, c.get("run.affinity_probability_binary").f32()[0], 1e-4);
    ASSERT_EQ(r.module_values.size(), 2u);
    for (int k : {1, 2}) {
        const std::string n = std::to_string(k);
        EXPECT_NEAR(r.module_values[size_t(k - 1)], c.get("run.affinity_pred_value" + n).f32()[0],
                    1e-4);
        EXPECT_NEAR(r.module_probabilities[size_t(k - 1)],
                    c.get("run.affinity_probability_binary" + n).f32()[0], 1e-4);
    }
    // boltz's molecular-weight correction, on the ensemble value only
    const double mw = c.get("affinity.mw").f32()[0];
    const boltz2::AffinityResult corrected = [&] {
        nn::ReplayNormal again(reference_draws(c, 3, "run."));
        o.rng = &again;
        return model->predict_affinity(c.feats, o, &mw);
    }();
    EXPECT_NEAR(corrected.value, c.get("run.affinity_pred_value_mw_corrected").f32()[0], 1e-4);
    EXPECT_EQ(corrected.module_values, r.module_values);
}

}  // namespace bioinfer::test
