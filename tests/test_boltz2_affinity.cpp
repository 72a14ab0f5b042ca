// Boltz-2's affinity module against the boltz package's (fixture part `affinity`): the tiny
// affinity checkpoint's two modules on the protein-ligand case with chain B as the binder, every
// stage at the parity bar and the value and logit within 1e-4; a wrong binder fails it.
#include <gtest/gtest.h>

#include "boltz2_fixture.h"
#include "models/boltz2/affinity.h"

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

}  // namespace

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
