// Rigid transforms (rotation + translation) in fp32 with AlphaFold's conventions (OpenFold's
// rigid_utils): rotations as unit quaternions (w, x, y, z) or 3x3 matrices (row-major), points
// mapped as R.p + t, composition a.compose(b) = a after b. Written out per element like the
// reference, so the same products are summed in the same order. A geometry value type: the
// kernels (backend) and the blocks (nn) both use it.
#pragma once
#include <array>
#include <cmath>

namespace bioinfer::geom {

using Vec3 = std::array<float, 3>;
using Mat3 = std::array<float, 9>;  // row-major
using Quat = std::array<float, 4>;  // (w, x, y, z)

inline Mat3 quat_to_rot(const Quat& q) {
    const float a = q[0], b = q[1], c = q[2], d = q[3];
    return {a * a + b * b - c * c - d * d, 2 * (b * c) - 2 * (a * d), 2 * (b * d) + 2 * (a * c),
            2 * (b * c) + 2 * (a * d), a * a - b * b + c * c - d * d, 2 * (c * d) - 2 * (a * b),
            2 * (b * d) - 2 * (a * c), 2 * (c * d) + 2 * (a * b), a * a - b * b - c * c + d * d};
}

inline Mat3 rot_mul(const Mat3& a, const Mat3& b) {
    Mat3 r;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            r[i * 3 + j] = a[i * 3] * b[j] + a[i * 3 + 1] * b[3 + j] + a[i * 3 + 2] * b[6 + j];
    return r;
}

inline Vec3 rot_apply(const Mat3& r, const Vec3& p) {
    return {r[0] * p[0] + r[1] * p[1] + r[2] * p[2], r[3] * p[0] + r[4] * p[1] + r[5] * p[2],
            r[6] * p[0] + r[7] * p[1] + r[8] * p[2]};
}

inline Vec3 rot_apply_inverse(const Mat3& r, const Vec3& p) {  // R^T p
    return {r[0] * p[0] + r[3] * p[1] + r[6] * p[2], r[1] * p[0] + r[4] * p[1] + r[7] * p[2],
            r[2] * p[0] + r[5] * p[1] + r[8] * p[2]};
}

struct Rigid {
    Mat3 rot{1, 0, 0, 0, 1, 0, 0, 0, 1};
    Vec3 trans{0, 0, 0};
    Vec3 apply(const Vec3& p) const {
        const Vec3 r = rot_apply(rot, p);
        return {r[0] + trans[0], r[1] + trans[1], r[2] + trans[2]};
    }
    Vec3 invert_apply(const Vec3& p) const {
        return rot_apply_inverse(rot, {p[0] - trans[0], p[1] - trans[1], p[2] - trans[2]});
    }
    Rigid compose(const Rigid& b) const {  // this after b
        const Vec3 t = rot_apply(rot, b.trans);
        return {rot_mul(rot, b.rot), {t[0] + trans[0], t[1] + trans[1], t[2] + trans[2]}};
    }
};

// A backbone frame kept as a quaternion, as the structure module iterates it.
struct QuatRigid {
    Quat q{1, 0, 0, 0};
    Vec3 trans{0, 0, 0};
    Rigid rigid() const { return {quat_to_rot(q), trans}; }
    // Composes with an update (x, y, z, tx, ty, tz): q' = normalise(q + q * (0, x, y, z)),
    // t' = t + R(q) (tx, ty, tz).
    QuatRigid compose_update(const float* u) const {
        const float a = q[0], b = q[1], c = q[2], d = q[3], x = u[0], y = u[1], z = u[2];
        Quat n{a - b * x - c * y - d * z, b + a * x + c * z - d * y, c + a * y - b * z + d * x,
               d + a * z + b * y - c * x};
        const float norm = std::sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2] + n[3] * n[3]);
        for (float& e : n) e /= norm;
        const Vec3 t = rot_apply(quat_to_rot(q), {u[3], u[4], u[5]});
        return {n, {trans[0] + t[0], trans[1] + t[1], trans[2] + t[2]}};
    }
};

}  // namespace bioinfer::geom
