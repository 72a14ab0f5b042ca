// CPU geometry kernels: the per-residue and per-pair units of backend/geometry_units.h (virtual
// C-beta, distance bins, atom-pair features, the quaternion update, IPA, atoms from torsions) over
// the threads. Built without ISA flags, as the glue kernels (glue_kernels.h).
#include "backend/cpu/geometry_kernels.h"

#include <omp.h>

#include <vector>

#include "backend/geometry_units.h"

namespace bioinfer::cpu::glue {

void virtual_cb(const Context&, const float* atoms, int64_t L, int64_t stride, float* out) {
    for (int64_t i = 0; i < L; ++i) kernels::glue::virtual_cb_1(atoms + i * stride * 3, out + i * 3);
}

void distance_bins(const Context&, const float* points, int64_t L, const float* bounds_sq,
                   int64_t nb, int32_t* out) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j)
            out[i * L + j] = kernels::glue::distance_bin(points + i * 3, points + j * 3, bounds_sq, nb);
}

void atom_pair_geometry(const Context&, const float* pos, const float* valid, const float* uid,
                        const int32_t* keys, int64_t K, int64_t W, int64_t H, float* out) {
#pragma omp parallel for collapse(2) schedule(static) if (K * W > 64)
    for (int64_t k = 0; k < K; ++k)
        for (int64_t w = 0; w < W; ++w)
            kernels::glue::atom_pair_geometry_row(pos, valid, uid, keys + k * H, k * W + w, H,
                                                  out + (k * W + w) * H * 5);
}

void quat_update(const Context&, float* frames, const float* update, int64_t L) {
    for (int64_t i = 0; i < L; ++i) kernels::glue::quat_update_1(frames + i * 7, update + i * 6);
}

void ipa(const Context&, const kernels::IpaArgs& A) {
    const int64_t L = A.L;
    std::vector<geom::Vec3> qg(size_t(L * A.H * A.Pq)), kvg(size_t(L * A.H * (A.Pq + A.Pv)));
    for (int64_t i = 0; i < L; ++i) kernels::glue::ipa_global_points(A, i, qg.data(), kvg.data());
#pragma omp parallel
    {
        std::vector<float> a(static_cast<size_t>(L));
#pragma omp for schedule(dynamic, 4)
        for (int64_t i = 0; i < L; ++i) kernels::glue::ipa_row(A, qg.data(), kvg.data(), i, a.data());
    }
}

void atom_frames(const Context&, const kernels::AtomFrameArgs& A) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < A.L; ++i) kernels::glue::atom_frames_1(A, i);
}

void fill_geometry(kernels::KernelTable& t) {
    t.virtual_cb = virtual_cb;
    t.distance_bins = distance_bins;
    t.atom_pair_geometry = atom_pair_geometry;
    t.quat_update = quat_update;
    t.ipa = ipa;
    t.atom_frames = atom_frames;
}

}  // namespace bioinfer::cpu::glue
