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

// AlphaFold's residue tables as tensors for ops::atom_frames, made once from the constants.
const ops::ResidueTables& residue_tables() {
    static const ops::ResidueTables t = [] {
        const int R = rc::kNumRestypes;
        ops::ResidueTables r;
        r.default_frames = Tensor::of(std::vector<float>(&rc::kDefaultFrames[0][0][0][0],
                                                         &rc::kDefaultFrames[0][0][0][0] + R * 8 * 16),
                                      {R, 8, 4, 4});
        r.group_of_atom = Tensor::of(std::vector<int32_t>(&rc::kAtom14ToGroup[0][0],
                                                          &rc::kAtom14ToGroup[0][0] + R * 14),
                                     {R, 14});
        r.atom_mask = Tensor::of(std::vector<float>(&rc::kAtom14Mask[0][0], &rc::kAtom14Mask[0][0] + R * 14),
                                 {R, 14});
        r.lit_positions = Tensor::of(std::vector<float>(&rc::kAtom14GroupPositions[0][0][0],
                                                        &rc::kAtom14GroupPositions[0][0][0] + R * 42),
                                     {R, 14, 3});
        return r;
    }();
    return t;
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
    ops::activation(s_initial, Act::Relu, t1);
    angle_initial_(t1, a_initial);
    Tensor a = Tensor::empty({L, R}), ta = Tensor::empty({L, R}), tb = Tensor::empty({L, R}),
           raw_angles = Tensor::empty({L, 14});
    const Tensor types = Tensor::of(aatype);

    // Backbone frames (L, 7): quaternion (w, x, y, z) and translation, from the identity.
    Tensor frames = Tensor::empty({L, 7});
    ops::copy(Tensor::of(std::vector<float>{1, 0, 0, 0, 0, 0, 0}).expand({L, 7}), frames);
    for (int64_t blk = 0; blk < NB; ++blk) {
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
        ops::quat_update(frames, bb);

        // angles: resnet over relu(s) plus the initial branch, normalised (sin, cos) pairs
        ops::activation(s, Act::Relu, t1);
        angle_in_(t1, a);
        ops::add(a, a_initial, a);
        for (size_t l = 0; l < angle_blocks_.size(); l += 2) {
            ops::activation(a, Act::Relu, ta);
            angle_blocks_[l](ta, tb, {.act = Act::Relu});
            angle_blocks_[l + 1](tb, a, {.accumulate = true});
        }
        ops::activation(a, Act::Relu, ta);
        angle_out_(ta, raw_angles);
        Tensor angles = out.angles.narrow0(blk, blk + 1).reshape({L * 7, 2});
        ops::l2_normalize(raw_angles.reshape({L * 7, 2}), c.eps, angles);

        Tensor fr = out.frames.narrow0(blk, blk + 1).reshape({L, 7}),
               pos = out.positions.narrow0(blk, blk + 1).reshape({L, 14, 3}),
               state = out.states.narrow0(blk, blk + 1).reshape({L, C});
        ops::atom_frames(frames, angles, types, residue_tables(), c.trans_scale, fr, pos);
        ops::copy(s, state);
    }
    return out;
}

void atom14_to_atom37(const Tensor& atom14, const std::vector<int32_t>& aatype, Tensor& atom37,
                      Tensor& exists) {
    const int64_t L = int64_t(aatype.size());
    static const Tensor atom37_mask = Tensor::of(
        std::vector<float>(&rc::kAtom37Mask[0][0], &rc::kAtom37Mask[0][0] + rc::kNumRestypes * 37),
        {rc::kNumRestypes, 37});
    // The atom14 row of every (residue, atom37 slot): an index table built on the host from the
    // input's residue types.
    std::vector<int32_t> rows(size_t(L * 37));
    for (int64_t i = 0; i < L; ++i)
        for (int a = 0; a < 37; ++a)
            rows[size_t(i * 37 + a)] = int32_t(i * 14 + rc::kAtom37ToAtom14[aatype[size_t(i)]][a]);
    exists = Tensor::empty({L, 37});
    ops::embedding(aatype, atom37_mask, exists);
    atom37 = Tensor::empty({L, 37, 3});
    Tensor flat = atom37.reshape({L * 37, 3});
    ops::embedding(rows, atom14.reshape({L * 14, 3}), flat);
    ops::scale_rows(flat, exists.reshape({L * 37}), flat);  // atoms the residue lacks at 0
}

}  // namespace bioinfer::esmfold
