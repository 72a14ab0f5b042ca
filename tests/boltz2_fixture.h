// Boltz-2 parity fixtures (tools/reference/make_boltz2_fixtures.py): per input case, the features
// boltz's pipeline made (`feat.*`) and the reference's intermediate tensors, plus the tiny model's
// Lightning checkpoint. The bar every module is held to: PCC >= 0.99999, relative L2 <= 1e-5.
#pragma once
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "io/model_dir.h"
#include "io/safetensors.h"
#include "models/boltz2/config.h"
#include "models/boltz2/embedder.h"
#include "models/boltz2/features.h"
#include "test_util.h"

namespace bioinfer::test {

#ifdef BIOINFER_FIXTURES
inline std::string boltz2_fixture_dir() { return std::string(BIOINFER_FIXTURES) + "/boltz2_tiny"; }
// The tiny model's weights (the Lightning checkpoint in the fixture folder), names as boltz's
// state_dict keys ("pairformer_module.layers.0.tri_mul_out.p_in.weight"); config() holds the
// checkpoint's hyper_parameters.
inline const io::ModelDir& boltz2_weights() {
    static const io::ModelDir m = io::ModelDir::open(boltz2_fixture_dir());
    return m;
}
// The tiny model's config (boltz2::Config of the checkpoint's hyper_parameters).
inline const boltz2::Config& boltz2_config() {
    static const boltz2::Config c = boltz2::Config::load(boltz2_weights());
    return c;
}
#endif

inline const std::vector<std::string>& boltz2_cases() {
    static const std::vector<std::string> c = {"monomer", "heterodimer", "protein_rna",
                                               "protein_ligand", "constrained"};
    return c;
}

struct Boltz2Case {
    std::string name;
    std::shared_ptr<io::SafetensorsFile> file;
    boltz2::Features feats;  // `feat.*` with the batch dimension dropped
    bool has(const std::string& k) const { return file->has(k); }
    // A reference tensor as stored (fp32, shapes as the reference's, batch dimension included).
    Tensor get(const std::string& k) const { return file->get(k).to_f32(); }
    // The same with a leading batch dimension of 1 dropped.
    Tensor get0(const std::string& k) const {
        Tensor t = get(k);
        Shape s = t.shape();
        EXPECT_EQ(s.at(0), 1) << k;
        s.erase(s.begin());
        return t.reshape(s).clone();
    }
};

#ifdef BIOINFER_FIXTURES
inline Boltz2Case load_boltz2_case(const std::string& name) {
    Boltz2Case c;
    c.name = name;
    c.file = io::SafetensorsFile::open(boltz2_fixture_dir() + "/" + name + ".safetensors");
    for (const auto& [k, info] : c.file->tensors()) {
        if (k.rfind("feat.", 0) != 0) continue;
        c.feats.set(k.substr(5), c.get0(k));
    }
    return c;
}
#endif

#ifdef BIOINFER_FIXTURES
// DiffusionConditioning on the reference's trunk outputs (trunk.s, trunk.z, trunk.relpos). The
// fixtures do not store the atom transformers' biases (K, 32, 128, depth * heads), the largest
// tensors of a case: tests take them from here, and the atom transformer outputs they feed are
// checked against the reference (its other outputs are checked directly in test_boltz2_atoms).
inline boltz2::DiffusionConditioningOut reference_conditioning(const Boltz2Case& c) {
    static const boltz2::DiffusionConditioning d =
        boltz2::DiffusionConditioning::load(boltz2_weights(), boltz2_config());
    return d.forward(c.get0("trunk.s"), c.get0("trunk.z"), c.get0("trunk.relpos"), c.feats);
}
#endif

// The reference sampler's random draws (the `diffusion` part), in the order it took them: x0, then
// per step the augmentation quaternions and translation and the noise.
inline std::vector<Tensor> reference_draws(const Boltz2Case& c, int64_t steps) {
    std::vector<Tensor> d{c.get("diffusion.sample.x0_randn")};
    const Tensor q = c.get("diffusion.sample.quat_randn"), t = c.get("diffusion.sample.trans_randn"),
                 e = c.get("diffusion.sample.eps_randn");
    for (int64_t i = 0; i < steps; ++i) {
        d.push_back(q.narrow0(i, i + 1).clone());
        d.push_back(t.narrow0(i, i + 1).clone());
        d.push_back(e.narrow0(i, i + 1).clone());
    }
    return d;
}

// Agreement of got with ref (fp32 both sides).
inline Stats parity_stats(const Tensor& got, const Tensor& ref) {
    const Tensor g = got.to_f32(), r = ref.to_f32();
    return stats(g.f32(), r.f32(), g.numel());
}

// The module bar: PCC >= 0.99999 and relative L2 <= 1e-5.
inline bool within_bar(const Stats& s, double min_pcc = 0.99999, double max_rel_l2 = 1e-5) {
    return s.pcc >= min_pcc && s.rel_l2 <= max_rel_l2;
}

// True when got is outside the bar against ref.
inline bool fails_bar(const Tensor& got, const Tensor& ref) {
    return !within_bar(parity_stats(got, ref));
}

inline void expect_parity(const Tensor& got, const Tensor& ref, const std::string& what,
                          double min_pcc = 0.99999, double max_rel_l2 = 1e-5) {
    ASSERT_EQ(got.numel(), ref.numel()) << what;
    const Stats s = parity_stats(got, ref);
    EXPECT_GE(s.pcc, min_pcc) << what << " (rel L2 " << s.rel_l2 << ", max-abs " << s.max_abs << ")";
    EXPECT_LE(s.rel_l2, max_rel_l2) << what << " (PCC " << s.pcc << ", max-abs " << s.max_abs << ")";
}

// A deliberately wrong computation must fall outside the bar (numbers printed for the record).
inline void expect_fails_bar(const Tensor& got, const Tensor& ref, const std::string& what) {
    const Stats s = parity_stats(got, ref);
    std::printf("[ off bar  ] %s: PCC %.9f, rel L2 %.3g\n", what.c_str(), s.pcc, s.rel_l2);
    EXPECT_FALSE(within_bar(s)) << what << " passes the bar (PCC " << s.pcc << ", rel L2 "
                                << s.rel_l2 << ")";
}

}  // namespace bioinfer::test
