// The geometry ops' arithmetic for one unit of work (a residue, an atom's window, a pair), written
// once as glue_units.h's units are: AlphaFold's virtual C-beta, distance bins, Boltz-2's windowed
// atom-pair features, and OpenFold's quaternion frame update, invariant point attention (AF2
// algorithm 22) and torsions to atom14 positions (algorithms 24 and 25), over core/rigid.h's
// transforms. The reference table runs the units in order, the CPU over its threads (built without
// ISA flags, so the results are the same to the bit); IPA also has an independent reference in
// double precision in ref/ref_kernels.cpp.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/kernels.h"
#include "core/rigid.h"

namespace bioinfer::kernels::glue {

// C-beta of one residue from its N, CA, C (AlphaFold's ideal geometry constants).
inline void virtual_cb_1(const float* n, float* out) {
    const float *ca = n + 3, *c = n + 6;
    float b[3], cc[3];
    for (int k = 0; k < 3; ++k) {
        b[k] = ca[k] - n[k];
        cc[k] = c[k] - ca[k];
    }
    const float a[3] = {b[1] * cc[2] - b[2] * cc[1], b[2] * cc[0] - b[0] * cc[2],
                        b[0] * cc[1] - b[1] * cc[0]};
    for (int k = 0; k < 3; ++k)
        out[k] = -0.58273431f * a[k] + 0.56802827f * b[k] - 0.54067466f * cc[k] + ca[k];
}

inline int32_t distance_bin(const float* pi, const float* pj, const float* bounds_sq, int64_t nb) {
    float d = 0;
    for (int k = 0; k < 3; ++k) {
        const float e = pj[k] - pi[k];
        d += e * e;
    }
    int32_t n = 0;
    for (int64_t b = 0; b < nb; ++b) n += d > bounds_sq[b];
    return n;
}

// One query row of the windowed atom-pair geometry (KernelTable::atom_pair_geometry): the H key
// slots of query atom q, keys (H) the window's key atoms, out (H, 5).
inline void atom_pair_geometry_row(const float* pos, const float* valid, const float* uid,
                                   const int32_t* keys, int64_t q, int64_t H, float* out) {
    const float* pq = pos + q * 3;
    for (int64_t h = 0; h < H; ++h) {
        const int32_t k = keys[h];
        const float zero[3] = {0.0f, 0.0f, 0.0f};
        const float* pk = k >= 0 ? pos + int64_t(k) * 3 : zero;
        float* o = out + h * 5;
        float n = 0.0f;
        for (int c = 0; c < 3; ++c) {
            o[c] = pk[c] - pq[c];
            n += o[c] * o[c];
        }
        o[3] = 1.0f / (1.0f + n);
        o[4] = k >= 0 && valid[q] != 0.0f && valid[k] != 0.0f && uid[q] == uid[k] ? 1.0f : 0.0f;
    }
}

inline geom::QuatRigid quat_rigid(const float* f) {
    return {{f[0], f[1], f[2], f[3]}, {f[4], f[5], f[6]}};
}

inline void quat_update_1(float* f, const float* u) {
    const geom::QuatRigid r = quat_rigid(f).compose_update(u);
    for (int k = 0; k < 4; ++k) f[k] = r.q[size_t(k)];
    for (int k = 0; k < 3; ++k) f[4 + k] = r.trans[size_t(k)];
}

// The points of one residue in the global frame: raw (3 * hp) holds x for all hp points, then y,
// then z (the reference's split).
inline void points_to_global(const float* raw, const geom::Rigid& fr, int64_t hp,
                             geom::Vec3* out) {
    for (int64_t k = 0; k < hp; ++k) out[k] = fr.apply({raw[k], raw[hp + k], raw[2 * hp + k]});
}

constexpr int64_t kIpaMaxValuePoints = 64;  // value points per head kept on the stack

// IPA's output features of query residue i; qg / kvg: every residue's points in the global
// frame; a: L floats of scratch.
inline void ipa_row(const IpaArgs& A, const geom::Vec3* qg, const geom::Vec3* kvg, int64_t i,
                    float* a) {
    const int64_t L = A.L, H = A.H, C = A.C, Pq = A.Pq, Pv = A.Pv, Pkv = Pq + Pv, Cz = A.Cz;
    const int64_t F = H * (C + 4 * Pv + Cz);
    const float scalar_scale = std::sqrt(1.0f / (3.0f * float(C))), bias_scale = std::sqrt(1.0f / 3.0f);
    float* f = A.out + i * F;
    std::fill(f, f + F, 0.0f);
    const geom::Rigid fr = quat_rigid(A.frames + i * 7).rigid();
    for (int64_t h = 0; h < H; ++h) {
        const float* qi = A.q + i * H * C + h * C;
        float mx = -INFINITY;
        for (int64_t j = 0; j < L; ++j) {
            const float* kj = A.kv + j * 2 * H * C + h * 2 * C;
            float dot = 0.0f;
            for (int64_t c = 0; c < C; ++c) dot += qi[c] * kj[c];
            float d2 = 0.0f;
            for (int64_t p = 0; p < Pq; ++p) {
                const geom::Vec3& x = qg[i * H * Pq + h * Pq + p];
                const geom::Vec3& y = kvg[j * H * Pkv + h * Pkv + p];
                const float dx = x[0] - y[0], dy = x[1] - y[1], dz = x[2] - y[2];
                d2 += dx * dx + dy * dy + dz * dz;
            }
            a[j] = dot * scalar_scale + bias_scale * A.bias[(i * L + j) * H + h] +
                   d2 * A.head_weights[h] * -0.5f;
            mx = std::max(mx, a[j]);
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < L; ++j) sum += a[j] = std::exp(a[j] - mx);
        const float inv = 1.0f / sum;
        // outputs: scalar values, value points (global), pair features
        float* o = f + h * C;
        float* opair = f + H * (C + 4 * Pv) + h * Cz;
        geom::Vec3 pts[kIpaMaxValuePoints] = {};
        for (int64_t j = 0; j < L; ++j) {
            const float w = a[j] * inv;
            const float* vj = A.kv + j * 2 * H * C + h * 2 * C + C;
            for (int64_t c = 0; c < C; ++c) o[c] += w * vj[c];
            for (int64_t p = 0; p < Pv; ++p) {
                const geom::Vec3& v = kvg[j * H * Pkv + h * Pkv + Pq + p];
                for (int e = 0; e < 3; ++e) pts[p][size_t(e)] += w * v[size_t(e)];
            }
            const float* zij = A.z + (i * L + j) * Cz;
            for (int64_t c = 0; c < Cz; ++c) opair[c] += w * zij[c];
        }
        for (int64_t p = 0; p < Pv; ++p) {
            const geom::Vec3 local = fr.invert_apply(pts[p]);
            const int64_t k = h * Pv + p;
            f[H * C + k] = local[0];
            f[H * C + H * Pv + k] = local[1];
            f[H * C + 2 * H * Pv + k] = local[2];
            f[H * C + 3 * H * Pv + k] =
                std::sqrt(local[0] * local[0] + local[1] * local[1] + local[2] * local[2] + A.eps);
        }
    }
}

// Every residue's query and key/value points in the global frame.
inline void ipa_global_points(const IpaArgs& A, int64_t i, geom::Vec3* qg, geom::Vec3* kvg) {
    const geom::Rigid fr = quat_rigid(A.frames + i * 7).rigid();
    const int64_t hq = A.H * A.Pq, hkv = A.H * (A.Pq + A.Pv);
    points_to_global(A.q_points + i * 3 * hq, fr, hq, qg + i * hq);
    points_to_global(A.kv_points + i * 3 * hkv, fr, hkv, kvg + i * hkv);
}

// Frame of rigid group g of residue type r relative to the backbone (homogeneous 4 x 4 table).
inline geom::Rigid default_frame(const float* frames, int r, int g) {
    const float* m = frames + (r * 8 + g) * 16;
    return {{m[0], m[1], m[2], m[4], m[5], m[6], m[8], m[9], m[10]}, {m[3], m[7], m[11]}};
}

// Residue i of atom_frames: its backbone frame (scaled) and its 14 atom positions.
inline void atom_frames_1(const AtomFrameArgs& A, int64_t i) {
    const geom::QuatRigid q = quat_rigid(A.backbone + i * 7);
    geom::Rigid backbone = q.rigid();
    for (float& t : backbone.trans) t *= A.trans_scale;
    float* fr = A.frames_out + i * 7;
    for (int k = 0; k < 4; ++k) fr[k] = q.q[size_t(k)];
    for (int k = 0; k < 3; ++k) fr[4 + k] = backbone.trans[size_t(k)];
    const int r = A.aatype[i];
    const float* angles = A.angles + i * 14;
    // torsion_angles_to_frames: backbone, omega, phi, psi, then chi1..chi4 chained
    geom::Rigid local[8], groups[8];
    for (int g = 0; g < 8; ++g) {
        const float sn = g == 0 ? 0.0f : angles[(g - 1) * 2], cs = g == 0 ? 1.0f : angles[(g - 1) * 2 + 1];
        const geom::Rigid torsion{{1, 0, 0, 0, cs, -sn, 0, sn, cs}, {0, 0, 0}};
        local[g] = default_frame(A.default_frames, r, g).compose(torsion);
    }
    for (int g = 5; g < 8; ++g) local[g] = local[g - 1].compose(local[g]);  // chi2..4 to backbone
    for (int g = 0; g < 8; ++g) groups[g] = backbone.compose(local[g]);
    float* pos = A.positions + i * 42;
    for (int atom = 0; atom < 14; ++atom) {
        const float* lit = A.lit_positions + (r * 14 + atom) * 3;
        const geom::Vec3 p = groups[A.group_of_atom[r * 14 + atom]].apply({lit[0], lit[1], lit[2]});
        const float mask = A.atom_mask[r * 14 + atom];
        for (int k = 0; k < 3; ++k) pos[atom * 3 + k] = p[size_t(k)] * mask;
    }
}

}  // namespace bioinfer::kernels::glue
