// Boltz-2 parity fixtures (tools/reference/make_boltz2_fixtures.py): per input case, the features
// boltz's pipeline made (`feat.*`) and the reference's intermediate tensors, plus the tiny model's
// Lightning checkpoint. The bar every module is held to: PCC >= 0.99999, relative L2 <= 1e-5.
#pragma once
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "io/model_dir.h"
#include "io/safetensors.h"
#include "models/boltz2/config.h"
#include "models/boltz2/embedder.h"
#include "models/boltz2/features.h"
#include "models/boltz2/featurizer.h"
#include "models/boltz2/ligands.h"
#include "models/boltz2/trunk.h"
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
// The tiny model's trunk, loaded once (the trunk and template tests share it).
inline const boltz2::Trunk& boltz2_trunk() {
    static const boltz2::Trunk t = boltz2::Trunk::load(boltz2_weights(), boltz2_config());
    return t;
}
// A fixture case's input file (inputs/NAME/NAME.yaml, as boltz read it).
inline std::string boltz2_case_yaml(const std::string& name) {
    return boltz2_fixture_dir() + "/inputs/" + name + "/" + name + ".yaml";
}
#endif

inline const std::vector<std::string>& boltz2_cases() {
    static const std::vector<std::string> c = {"monomer",        "heterodimer", "protein_rna",
                                               "protein_ligand", "constrained", "template"};
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
        if (k.rfind("feat.", 0) == 0) c.feats.set(k.substr(5), c.get0(k));
        // One-hot tables stored as each row's index (-1: no 1), with their class count.
        const std::string classes = ".classes";
        if (k.rfind("onehot.", 0) != 0 ||
            (k.size() > classes.size() &&
             k.compare(k.size() - classes.size(), classes.size(), classes) == 0))
            continue;
        const Tensor idx = c.get0(k);
        const int64_t n = int64_t(c.get(k + classes).f32()[0]);
        Shape s = idx.shape();
        s.push_back(n);
        std::vector<float> v(static_cast<size_t>(idx.numel() * n), 0.f);
        for (int64_t i = 0; i < idx.numel(); ++i)
            if (idx.f32()[i] >= 0) v[size_t(i * n + int64_t(idx.f32()[i]))] = 1.f;
        c.feats.set(k.substr(7), Tensor::of(v, s));
    }
    return c;
}
// The trunk passes the reference ran (recycling_steps + 1): those the fixture holds a z for.
inline int trunk_passes(const Boltz2Case& c) {
    int p = 0;
    while (c.has("trunk.pass" + std::to_string(p) + ".z")) ++p;
    return p;
}
// The passes whose pairformer blocks the fixture holds (the first and the last).
inline std::vector<int> first_and_last_pass(const Boltz2Case& c) {
    const int last = trunk_passes(c) - 1;
    return last > 0 ? std::vector<int>{0, last} : std::vector<int>{0};
}
// z into pass p's MSA module: the pass's z plus the template module's output (stored only where
// the case has templates).
inline Tensor msa_module_input(const Boltz2Case& c, int p) {
    const std::string pre = "trunk.pass" + std::to_string(p) + ".";
    const Tensor z = c.get0(pre + "z");
    return c.has(pre + "template_out") ? plus(z, c.get0(pre + "template_out")) : z;
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
// `prefix`: where the draws are stored ("run." for the affinity stage's run).
inline std::vector<Tensor> reference_draws(const Boltz2Case& c, int64_t steps,
                                           const std::string& prefix = "diffusion.sample.") {
    std::vector<Tensor> d{c.get(prefix + "x0_randn")};
    const Tensor q = c.get(prefix + "quat_randn"), t = c.get(prefix + "trans_randn"),
                 e = c.get(prefix + "eps_randn");
    for (int64_t i = 0; i < steps; ++i) {
        d.push_back(q.narrow0(i, i + 1).clone());
        d.push_back(t.narrow0(i, i + 1).clone());
        d.push_back(e.narrow0(i, i + 1).clone());
    }
    return d;
}

// The reference's per-residue motions (fixture part `inputs`), as an augmentation source.
// `prefix`: "inputs." for the cases, "affinity." for the affinity stage's.
inline boltz2::AugmentationSource reference_motions(const Boltz2Case& c,
                                                    const std::string& prefix = "inputs.") {
    const Tensor rot = c.get(prefix + "aug_rot"), trans = c.get(prefix + "aug_trans");
    return [rot, trans](int64_t uid) {
        EXPECT_LT(uid, rot.shape()[0]);
        boltz2::RigidTransform t;
        // host-side: reading a (U, 3, 3) fixture table
        const float* r = rot.f32() + uid * 9;
        const float* tr = trans.f32() + uid * 3;
        for (int i = 0; i < 3; ++i) {
            for (int j = 0; j < 3; ++j) t.rot[i][j] = r[i * 3 + j];
            t.trans[i] = tr[i];
        }
        return t;
    };
}

#ifdef BIOINFER_FIXTURES
// The molecules boltz made for a case's SMILES ligands (LIG1, ...): their conformers depend on
// RDKit's version, so the parity comparison gives bioinfer the reference's.
inline boltz2::ConformerLibrary reference_ligands(const std::string& name) {
    boltz2::ConformerLibrary lib;
    const std::filesystem::path dir =
        std::filesystem::path(boltz2_fixture_dir()) / "inputs" / name / "ligand_mols";
    if (!std::filesystem::is_directory(dir)) return lib;
    for (const auto& f : std::filesystem::directory_iterator(dir))
        lib.add(boltz2::read_ligand_mol(f.path().string(), f.path().stem().string()));
    return lib;
}
#endif

// Features the featurizer must make with reference values within `tol` (0: exact). RDKit's
// distance bounds differ between Debian's release (2022.09) and the reference's (2026.09) by up to
// 0.16 A on the fixture ligands (the 1-3 and 1-4 bound rules changed between them).
inline double tolerance(const std::string& name) {
    static const std::set<std::string> floats = {"ref_pos", "deletion_value", "deletion_mean",
                                                 "profile", "deletion_mean_affinity"};
    if (name == "rdkit_upper_bounds" || name == "rdkit_lower_bounds") return 0.2;
    return floats.count(name) ? 1e-5 : 0.0;
}

// Max |got - ref| over a feature; -1 when the shapes differ.
inline double max_diff(const Tensor& got, const Tensor& ref) {
    if (got.shape() != ref.shape()) return -1;
    const Tensor g = got.to_f32(), r = ref.to_f32();
    double m = 0;
    for (int64_t i = 0; i < g.numel(); ++i)
        m = std::max(m, double(std::fabs(g.f32()[i] - r.f32()[i])));
    return m;
}

inline void expect_features_match(const boltz2::Featurized& got, const Boltz2Case& ref) {
    std::set<std::string> ref_keys, got_keys;
    for (const auto& [k, v] : ref.feats.t) ref_keys.insert(k);
    for (const auto& [k, v] : got.feats.t) got_keys.insert(k);
    EXPECT_EQ(got_keys, ref_keys) << ref.name << ": the featurizer's names differ from boltz's";
    for (const auto& k : ref_keys) {
        if (!got.feats.has(k)) continue;
        const Tensor& g = got.feats.at(k);
        const Tensor& r = ref.feats.at(k);
        ASSERT_EQ(shape_str(g.shape()), shape_str(r.shape())) << ref.name << " " << k;
        const double d = max_diff(g, r);
        EXPECT_LE(d, tolerance(k)) << ref.name << " " << k;
    }
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
