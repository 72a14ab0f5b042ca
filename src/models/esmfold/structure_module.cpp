// The structure module: IPA blocks with shared weights, backbone frames as quaternions, torsion
// angles to rigid-group frames to atom14 positions (residue-constant tables).
#include "models/esmfold/structure_module.h"

#include <algorithm>
#include <cmath>

#include "bioinfer/error.h"
#include "models/esmfold/residue_constants.h"
#include "ops/ops.h"

namespace bioinfer::esmfold {

namespace {

void relu_copy(const Tensor& x, Tensor& y) {
    const float* s = x.f32();
    float* d = y.f32();
    for (int64_t i = 0; i < x.numel(); ++i) d[i] = s[i] > 0.0f ? s[i] : 0.0f;
}

// Frame of rigid group g of residue type r relative to the backbone (literature geometry).
nn::Rigid default_frame(int r, int g) {
    const float(&m)[4][4] = rc::kDefaultFrames[r][g];
    return {{m[0][0], m[0][1], m[0][2], m[1][0], m[1][1], m[1][2], m[2][0], m[2][1], m[2][2]},
            {m[0][3], m[1][3], m[2][3]}};
}

// The 8 rigid-group frames of one residue in the global frame (AlphaFold's
// torsion_angles_to_frames): backbone, omega, phi, psi, then chi1..chi4 chained.
// angles: 7 (sin, cos) pairs.
void torsions_to_frames(const nn::Rigid& backbone, const float* angles, int aatype,
                        nn::Rigid (&out)[8]) {
    nn::Rigid local[8];
    for (int g = 0; g < 8; ++g) {
        const float sn = g == 0 ? 0.0f : angles[(g - 1) * 2], cs = g == 0 ? 1.0f : angles[(g - 1) * 2 + 1];
        const nn::Rigid torsion{{1, 0, 0, 0, cs, -sn, 0, sn, cs}, {0, 0, 0}};
        local[g] = default_frame(aatype, g).compose(torsion);
    }
    for (int g = 5; g < 8; ++g) local[g] = local[g - 1].compose(local[g]);  // chi2..4 to backbone
    for (int g = 0; g < 8; ++g) out[g] = backbone.compose(local[g]);
}

}  // namespace

StructureModule StructureModule::load(const io::ModelDir& m, const std::string& p,
                                      const StructureModuleConfig& c,
                                      const StructureModuleNames& n) {
    StructureModule sm;
    sm.cfg_ = c;
    const float eps = 1e-5f;
    const std::string d = p + ".";
    sm.ln_s_ = nn::LayerNorm::load(m, d + n.ln_s, c.c_s, eps);
    sm.ln_z_ = nn::LayerNorm::load(m, d + n.ln_z, c.c_z, eps);
    sm.ln_ipa_ = nn::LayerNorm::load(m, d + n.ln_ipa, c.c_s, eps);
    sm.ln_transition_ = nn::LayerNorm::load(m, d + n.transition_ln, c.c_s, eps);
    sm.linear_in_ = nn::Linear::load(m, d + n.linear_in, c.c_s, c.c_s);
    sm.ipa_ = nn::InvariantPointAttention::load(m, d + n.ipa, c.c_s, c.c_z, c.ipa_dim, c.heads,
                                                c.qk_points, c.v_points, c.eps, n.ipa_names);
    for (int64_t l = 0; l < c.transition_layers; ++l)
        for (int k = 1; k <= 3; ++k)
            sm.transition_.push_back(nn::Linear::load(
                m, cat(d, n.transition_layers, ".", l, ".", n.transition_linear, k), c.c_s, c.c_s));
    sm.bb_update_ = nn::Linear::load(m, d + n.bb_update, c.c_s, 6);
    const std::string a = d + n.angle_resnet + ".";
    sm.angle_in_ = nn::Linear::load(m, a + n.angle_in, c.c_s, c.resnet_dim);
    sm.angle_initial_ = nn::Linear::load(m, a + n.angle_initial, c.c_s, c.resnet_dim);
    sm.angle_out_ = nn::Linear::load(m, a + n.angle_out, c.resnet_dim, c.angles * 2);
    for (int64_t l = 0; l < c.resnet_blocks; ++l)
        for (int k = 1; k <= 2; ++k)
            sm.angle_blocks_.push_back(
                nn::Linear::load(m, cat(a, n.angle_layers, ".", l, ".", n.angle_linear, k),
                                 c.resnet_dim, c.resnet_dim));
    BI_CHECK(c.angles == 7, p, "num_angles ", c.angles, " is not AlphaFold's 7 torsions");
    return sm;
}

StructureOutput StructureModule::operator()(const Tensor& s_in, const Tensor& z_in,
                                            const std::vector<int32_t>& aatype) const {
    const StructureModuleConfig& c = cfg_;
    const int64_t L = s_in.size(0), C = c.c_s, R = c.resnet_dim, NB = c.blocks;
    BI_CHECK(int64_t(aatype.size()) == L, "structure_module", "expected ", L,
             " residue types, got ", aatype.size());
    StructureOutput out;
    out.frames = Tensor::empty({NB, L, 7});
    out.positions = Tensor::empty({NB, L, 14, 3});
    out.angles = Tensor::empty({NB, L, 7, 2});
    out.states = Tensor::empty({NB, L, C});

    Tensor s_initial = Tensor::empty({L, C}), z = Tensor::empty({L * L, c.c_z});
    ln_s_(s_in, s_initial);
    ln_z_(z_in.reshape({L * L, c.c_z}), z);
    z = z.reshape({L, L, c.c_z});
    Tensor s = Tensor::empty({L, C}), upd = Tensor::empty({L, C}), t1 = Tensor::empty({L, C}),
           t2 = Tensor::empty({L, C}), bb = Tensor::empty({L, 6});
    linear_in_(s_initial, s);
    // The angle resnet's s_initial branch is the same in every block.
    Tensor a_initial = Tensor::empty({L, R});
    relu_copy(s_initial, t1);
    angle_initial_(t1, a_initial);
    Tensor a = Tensor::empty({L, R}), ta = Tensor::empty({L, R}), tb = Tensor::empty({L, R}),
           raw_angles = Tensor::empty({L, 14});

    std::vector<nn::QuatRigid> rigids(static_cast<size_t>(L));
    std::vector<nn::Rigid> frames(static_cast<size_t>(L));
    for (int64_t blk = 0; blk < NB; ++blk) {
        for (int64_t i = 0; i < L; ++i) frames[size_t(i)] = rigids[size_t(i)].rigid();
        ipa_(s, z, frames, upd);
        ops::add(s, upd, s);
        ln_ipa_(s, t1);
        for (size_t l = 0; l < transition_.size(); l += 3) {  // t1 += l3(relu(l2(relu(l1(t1)))))
            transition_[l](t1, t2, {.act = Act::Relu});
            transition_[l + 1](t2, upd, {.act = Act::Relu});
            transition_[l + 2](upd, t1, {.accumulate = true});
        }
        ln_transition_(t1, s);
        bb_update_(s, bb);
        for (int64_t i = 0; i < L; ++i)
            rigids[size_t(i)] = rigids[size_t(i)].compose_update(bb.f32() + i * 6);

        // angles: resnet over relu(s) plus the initial branch, normalised (sin, cos) pairs
        relu_copy(s, t1);
        angle_in_(t1, a);
        ops::add(a, a_initial, a);
        for (size_t l = 0; l < angle_blocks_.size(); l += 2) {
            relu_copy(a, ta);
            angle_blocks_[l](ta, tb, {.act = Act::Relu});
            angle_blocks_[l + 1](tb, a, {.accumulate = true});
        }
        relu_copy(a, ta);
        angle_out_(ta, raw_angles);
        float* ang = out.angles.f32() + blk * L * 14;
        for (int64_t i = 0; i < L * 7; ++i) {
            const float x = raw_angles.f32()[2 * i], y = raw_angles.f32()[2 * i + 1];
            const float denom = std::sqrt(std::max(x * x + y * y, c.eps));
            ang[2 * i] = x / denom;
            ang[2 * i + 1] = y / denom;
        }

        float* fr = out.frames.f32() + blk * L * 7;
        float* pos = out.positions.f32() + blk * L * 42;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < L; ++i) {
            const nn::QuatRigid& q = rigids[size_t(i)];
            nn::Rigid backbone = q.rigid();
            for (float& t : backbone.trans) t *= c.trans_scale;
            for (int k = 0; k < 4; ++k) fr[i * 7 + k] = q.q[size_t(k)];
            for (int k = 0; k < 3; ++k) fr[i * 7 + 4 + k] = backbone.trans[size_t(k)];
            const int r = aatype[size_t(i)];
            nn::Rigid groups[8];
            torsions_to_frames(backbone, ang + i * 14, r, groups);
            for (int atom = 0; atom < 14; ++atom) {
                const float* lit = rc::kAtom14GroupPositions[r][atom];
                const nn::Vec3 p = groups[rc::kAtom14ToGroup[r][atom]].apply({lit[0], lit[1], lit[2]});
                const float mask = rc::kAtom14Mask[r][atom];
                for (int k = 0; k < 3; ++k) pos[(i * 14 + atom) * 3 + k] = p[size_t(k)] * mask;
            }
        }
        std::copy_n(s.f32(), L * C, out.states.f32() + blk * L * C);
    }
    return out;
}

void atom14_to_atom37(const Tensor& atom14, const std::vector<int32_t>& aatype, Tensor& atom37,
                      Tensor& exists) {
    const int64_t L = int64_t(aatype.size());
    atom37 = Tensor::empty({L, 37, 3});
    exists = Tensor::empty({L, 37});
    for (int64_t i = 0; i < L; ++i) {
        const int r = aatype[size_t(i)];
        for (int a = 0; a < 37; ++a) {
            const float m = rc::kAtom37Mask[r][a];
            const float* src = atom14.f32() + (i * 14 + rc::kAtom37ToAtom14[r][a]) * 3;
            for (int k = 0; k < 3; ++k) atom37.f32()[(i * 37 + a) * 3 + k] = src[k] * m;
            exists.f32()[i * 37 + a] = m;
        }
    }
}

}  // namespace bioinfer::esmfold
