// The model-specific ops composed from core ops, for a backend whose table leaves their entries
// null (backend/kernels.h, kernels::core_only): each follows the upstream formula the kernel
// implements (OpenFold's invariant point attention, quaternion update and
// torsion_angles_to_frames / frames_and_literature_positions_to_atom14_pos; ESM-2's token
// dropout and contact APC; Boltz-2's atom-pair features) as GEMMs, gathers, strided copies and
// elementwise ops on the backend's device. Only small host-side tables (constant coefficient
// matrices, per-row factors from the caller's host ids, the residue types' atom groups) are
// made on the host. Results agree with the kernels to rounding, not to the bit.
#include "ops/fallback.h"

#include <cmath>
#include <initializer_list>
#include <vector>

namespace bioinfer::ops::fallback {
namespace {

Device device() { return current_backend().device; }

Tensor empty(const Shape& s, DType dt = DType::F32) { return Tensor::empty(s, dt, device()); }

// A host-side constant on the backend's device.
Tensor constant(std::vector<float> v, const Shape& s) { return Tensor::of(v, s).to(device()); }

// A tensor of `shape` whose every element is v.
Tensor filled(const Shape& shape, float v) {
    Tensor out = empty(shape);
    copy(constant({v}, Shape(shape.size(), 1)).expand(shape), out);
    return out;
}

// Row-major (rows, cols) coefficients from {row, col, value} triples, the rest zero.
struct Coef {
    int64_t r, c;
    float v;
};
Tensor coefficients(int64_t rows, int64_t cols, std::initializer_list<Coef> cs) {
    std::vector<float> w(size_t(rows * cols), 0.0f);
    for (const Coef& e : cs) w[size_t(e.r * cols + e.c)] = e.v;
    return constant(std::move(w), {rows, cols});
}

// Rotation matrices (L, 3, 3) of quaternions quat (L, 4) (w, x, y, z), unnormalised as
// geom::quat_to_rot: the outer products q q^T (L, 16) times the fixed coefficients of each entry.
Tensor rotations(const Tensor& quat) {
    const int64_t L = quat.size(0);
    Tensor qq = empty({L, 4, 4});
    bmm(quat.reshape({L, 4, 1}), quat.reshape({L, 1, 4}), qq);
    // entry (r, c) of R = sum of w * q_a q_b over the terms of quat_to_rot; q_a q_b sits at 4a + b
    static const std::vector<Coef> terms = {
        {0, 0, 1}, {0, 5, 1}, {0, 10, -1}, {0, 15, -1},  // a^2 + b^2 - c^2 - d^2
        {1, 6, 2}, {1, 3, -2},                           // 2bc - 2ad
        {2, 7, 2}, {2, 2, 2},                            // 2bd + 2ac
        {3, 6, 2}, {3, 3, 2},                            // 2bc + 2ad
        {4, 0, 1}, {4, 5, -1}, {4, 10, 1}, {4, 15, -1},  // a^2 - b^2 + c^2 - d^2
        {5, 11, 2}, {5, 1, -2},                          // 2cd - 2ab
        {6, 7, 2}, {6, 2, -2},                           // 2bd - 2ac
        {7, 11, 2}, {7, 1, 2},                           // 2cd + 2ab
        {8, 0, 1}, {8, 5, -1}, {8, 10, -1}, {8, 15, 1},  // a^2 - b^2 - c^2 + d^2
    };
    std::vector<float> w(9 * 16, 0.0f);
    for (const Coef& e : terms) w[size_t(e.r * 16 + e.c)] = e.v;
    Tensor rot = empty({L, 9});
    linear(qq.reshape({L, 16}), constant(std::move(w), {9, 16}), nullptr, rot);
    return rot.reshape({L, 3, 3});
}

// Sums over the last dim of x (rows, d): (rows, 1), times `scale`.
Tensor row_sums(const Tensor& x, float scale = 1.0f) {
    const int64_t d = x.size(-1), rows = x.numel() / d;
    Tensor out = empty({rows, 1});
    linear(x.reshape({rows, d}), filled({1, d}, 1.0f), nullptr, out, {.scale = scale});
    return out;
}

Tensor negated(const Tensor& x) {
    Tensor out = empty(x.shape());
    scale(x, -1.0f, out);
    return out;
}

}  // namespace

void rms_norm(const Tensor& x, float eps, Tensor& out) {
    // layer_norm over [x | -x]: its mean is zero and its variance the mean square of x
    const int64_t d = x.size(-1), rows = d ? x.numel() / d : 0;
    if (rows == 0) return;
    Tensor z = empty({rows, 2 * d}), zn = empty({rows, 2 * d});
    const Tensor x2 = x.reshape({rows, d});
    Tensor lo = z.slice(1, 0, d), hi = z.slice(1, d, 2 * d);
    copy(x2, lo);
    copy(negated(x2), hi);
    layer_norm(z, filled({2 * d}, 1.0f), filled({2 * d}, 0.0f), eps, zn);
    Tensor o = out.reshape({rows, d});
    copy(zn.slice(1, 0, d), o);
}

void l2_normalize(const Tensor& x, float eps, Tensor& out) {
    // x / sqrt(sum x^2 + eps) = rms_norm(x, eps / d) / sqrt(d): the kernels' max(sum x^2, eps)
    // where the sum is well above eps, which is what eps is there for
    const int64_t d = x.size(-1);
    if (d == 0) return;
    ops::rms_norm(x, eps / float(d), out);
    scale(out, 1.0f / std::sqrt(float(d)), out);
}

void token_dropout(Tensor& x, const std::vector<int32_t>& ids, const std::vector<int64_t>& cu,
                   int32_t mask_id, float keep) {
    // host-side: one factor per row from the caller's host ids: 0 for <mask>, else
    // keep / (1 - the sequence's masked fraction)
    std::vector<float> f(ids.size());
    for (size_t b = 0; b + 1 < cu.size(); ++b) {
        const int64_t n = cu[b + 1] - cu[b];
        int64_t n_mask = 0;
        for (int64_t t = cu[b]; t < cu[b + 1]; ++t) n_mask += ids[size_t(t)] == mask_id;
        const float denom = 1.0f - float(n_mask) / float(n);
        for (int64_t t = cu[b]; t < cu[b + 1]; ++t)
            f[size_t(t)] = ids[size_t(t)] == mask_id ? 0.0f : keep / denom;
    }
    scale_rows(x, Tensor::of(f).to(device()), x);
}

void contact_apc(const Tensor& probs, const Tensor& weights, Tensor& acc) {
    // per head: S = A + A^T over positions 1..L, minus APC = r r^T / total (r: S's row sums), then
    // acc += w_h of that, heads in order
    const int64_t H = probs.size(0), L = acc.size(0);
    const Tensor A = probs.slice(1, 1, L + 1).slice(2, 1, L + 1);
    Tensor S = contiguous(A);
    add_into(A.permute({0, 2, 1}), S);
    const Tensor r = row_sums(S);                       // (H * L, 1)
    const Tensor total = row_sums(r.reshape({H, L}));  // (H, 1)
    Tensor apc = empty({H, L, L});
    bmm(r.reshape({H, L, 1}), r.reshape({H, 1, L}), apc);
    // host-side: H totals and weights read back, one factor each
    const Tensor tot = total.to(kHost), w = weights.to(kHost);
    for (int64_t h = 0; h < H; ++h) {
        Tensor sh = S.narrow0(h, h + 1).reshape({L, L});
        const float t = tot.f32()[h];
        if (t != 0.0f) axpy(-1.0f / t, apc.narrow0(h, h + 1).reshape({L, L}), sh);
        axpy(w.f32()[h], sh, acc);
    }
}

void virtual_cb(const Tensor& atoms, Tensor& out) {
    // b = CA - N, c = C - CA, a = b x c; C-beta = -0.58273431 a + 0.56802827 b - 0.54067466 c + CA
    const int64_t L = atoms.size(0);
    const Tensor x = contiguous(atoms.slice(1, 0, 3)).reshape({L, 9});  // N, CA, C
    Tensor bc = empty({L, 6});
    const Tensor w_bc = coefficients(6, 9, {{0, 3, 1}, {0, 0, -1}, {1, 4, 1}, {1, 1, -1},
                                            {2, 5, 1}, {2, 2, -1}, {3, 6, 1}, {3, 3, -1},
                                            {4, 7, 1}, {4, 4, -1}, {5, 8, 1}, {5, 5, -1}});
    linear(x, w_bc, nullptr, bc);
    // b's cross-product matrix [[0, -b2, b1], [b2, 0, -b0], [-b1, b0, 0]] times c
    Tensor cross = empty({L, 9}), a = empty({L, 3, 1});
    const Tensor w_cross =
        coefficients(9, 6, {{1, 2, -1}, {2, 1, 1}, {3, 2, 1}, {5, 0, -1}, {6, 1, -1}, {7, 0, 1}});
    linear(bc, w_cross, nullptr, cross);
    bmm(cross.reshape({L, 3, 3}), contiguous(bc.slice(1, 3, 6)).reshape({L, 3, 1}), a);
    Tensor y = empty({L, 12});  // [a | b | c | CA]
    Tensor ya = y.slice(1, 0, 3), ybc = y.slice(1, 3, 9), yca = y.slice(1, 9, 12);
    copy(a.reshape({L, 3}), ya);
    copy(bc, ybc);
    copy(x.slice(1, 3, 6), yca);
    std::vector<float> w(3 * 12, 0.0f);
    for (int k = 0; k < 3; ++k) {
        w[size_t(k * 12 + k)] = -0.58273431f;
        w[size_t(k * 12 + 3 + k)] = 0.56802827f;
        w[size_t(k * 12 + 6 + k)] = -0.54067466f;
        w[size_t(k * 12 + 9 + k)] = 1.0f;
    }
    linear(y, constant(std::move(w), {3, 12}), nullptr, out);
}

void atom_pair_geometry(const Tensor& pos, const Tensor& valid, const Tensor& uid,
                        const Tensor& keys, Tensor& out) {
    const int64_t A = pos.size(0), K = keys.size(0), H = keys.size(1), W = A / K, n = K * W * H;
    const Tensor key_ids = keys.reshape({K * H});  // -1 (no key): a zero row in every gather
    // d = pos[key] - pos[query]
    Tensor pk = empty({K * H, 3}), d = empty({K, W, H, 3});
    embedding(key_ids, pos, pk);
    copy(pk.reshape({K, 1, H, 3}).expand({K, W, H, 3}), d);
    add_into(negated(pos).reshape({K, W, 1, 3}).expand({K, W, H, 3}), d);
    // 1 / (1 + |d|^2) = rms_norm([d | 1])[3]^2 / 4: the row's mean square is (|d|^2 + 1) / 4
    Tensor r = empty({n, 4}), rn = empty({n, 4});
    Tensor rd = r.slice(1, 0, 3), r1 = r.slice(1, 3, 4);
    copy(d.reshape({n, 3}), rd);
    copy(constant({1.0f}, {1, 1}).expand({n, 1}), r1);
    ops::rms_norm(r, 0.0f, rn);
    Tensor inv = contiguous(rn.slice(1, 3, 4));
    mul(inv, inv, inv);
    scale(inv, 0.25f, inv);
    // v = valid[query] * valid[key] * [uid[query] == uid[key]] (valid 0 or 1, uids whole numbers:
    // the match is relu(1 - |uid[key] - uid[query]|))
    const auto per_key = [&](const Tensor& t) {
        Tensor g = empty({K * H, 1}), e = empty({K, W, H});
        embedding(key_ids, t.reshape({A, 1}), g);
        copy(g.reshape({K, 1, H}).expand({K, W, H}), e);
        return e;
    };
    Tensor v = per_key(valid), diff = per_key(uid), vq = empty({K, W, H});
    copy(valid.reshape({K, W, 1}).expand({K, W, H}), vq);
    mul(v, vq, v);
    add_into(negated(uid).reshape({K, W, 1}).expand({K, W, H}), diff);
    Tensor pos_part = empty({K, W, H}), neg_part = negated(diff);
    activation(diff, Act::Relu, pos_part);
    activation(neg_part, Act::Relu, neg_part);
    add(pos_part, neg_part, pos_part);  // |uid[key] - uid[query]|
    scale(pos_part, -1.0f, pos_part);
    activation(pos_part, Act::Relu, pos_part, 1.0f);
    mul(v, pos_part, v);
    Tensor od = out.slice(3, 0, 3), oi = out.slice(3, 3, 4), ov = out.slice(3, 4, 5);
    copy(d, od);
    copy(inv.reshape({K, W, H, 1}), oi);
    copy(v.reshape({K, W, H, 1}), ov);
}

void quat_update(Tensor& frames, const Tensor& update) {
    // q' = normalise(q + q * (0, u)) with q * (0, u) = M(q) u, M's entries linear in q;
    // t' = t + R(q) u_t, R from the old q
    const int64_t L = frames.numel() / 7;
    const Tensor f = frames.reshape({L, 7}), u = update.reshape({L, 6});
    const Tensor q = contiguous(f.slice(1, 0, 4));
    const Tensor rot = rotations(q);
    // M = [[-b, -c, -d], [a, -d, c], [d, a, -b], [-c, b, a]], entry 3r + col over (a, b, c, d)
    Tensor m = empty({L, 12}), n = empty({L, 4, 1}), tr = empty({L, 3, 1}), qn = empty({L, 4});
    linear(q, coefficients(12, 4, {{0, 1, -1}, {1, 2, -1}, {2, 3, -1}, {3, 0, 1}, {4, 3, -1},
                                   {5, 2, 1}, {6, 3, 1}, {7, 0, 1}, {8, 1, -1}, {9, 2, -1},
                                   {10, 1, 1}, {11, 0, 1}}),
           nullptr, m);
    bmm(m.reshape({L, 4, 3}), contiguous(u.slice(1, 0, 3)).reshape({L, 3, 1}), n);
    add(n, q, n);
    ops::l2_normalize(n.reshape({L, 4}), 0.0f, qn);
    bmm(rot, contiguous(u.slice(1, 3, 6)).reshape({L, 3, 1}), tr);
    Tensor fq = f.slice(1, 0, 4), ft = f.slice(1, 4, 7);
    copy(qn, fq);
    add_into(tr.reshape({L, 3}), ft);
}

void ipa(const IpaInputs& in, Tensor& out) {
    const int64_t L = in.q->size(0), H = in.heads, C = in.q->size(1) / H, Pq = in.qk_points,
                  Pv = in.v_points, Pkv = Pq + Pv, Cz = in.z->size(-1), Dqk = C + 3 * Pq;
    const Tensor f = in.frames->reshape({L, 7});
    const Tensor rot = rotations(contiguous(f.slice(1, 0, 4)));
    const Tensor t = contiguous(f.slice(1, 4, 7));
    // points (L, 3 * n) in each residue's frame (x, y, z blocks) to the global frame, (L, 3, n)
    const auto to_global = [&](const Tensor& pts, int64_t n) {
        Tensor g = empty({L, 3, n});
        bmm(rot, pts.reshape({L, 3, n}), g);
        add_into(t.reshape({L, 3, 1}).expand({L, 3, n}), g);
        return g.reshape({L, 3, H, n / H});
    };
    const Tensor gq = to_global(*in.q_points, H * Pq), gkv = to_global(*in.kv_points, H * Pkv);
    // per head, queries [q sqrt(1/(3C)) | w_h x] against keys [k | y] (H, L, C + 3 Pq): the scalar
    // term and w_h x.y of the distance term
    Tensor qk = empty({H, L, Dqk}), kk = empty({H, L, Dqk});
    Tensor qs = empty({L, H * C});
    scale(*in.q, std::sqrt(1.0f / (3.0f * float(C))), qs);
    Tensor qk_s = qk.slice(2, 0, C), qk_p = qk.slice(2, C, Dqk);
    Tensor kk_s = kk.slice(2, 0, C), kk_p = kk.slice(2, C, Dqk);
    copy(qs.reshape({L, H, C}).permute({1, 0, 2}), qk_s);
    Tensor xq = empty({H, L, 3, Pq}), yk = empty({H, L, 3, Pq});
    copy(gq.permute({2, 0, 1, 3}), xq);
    Tensor xq_rows = xq.reshape({H, L * 3 * Pq});
    scale_rows(xq_rows, *in.head_weights, xq_rows);
    copy(xq.reshape({H, L, 3 * Pq}), qk_p);
    const Tensor kv = in.kv->reshape({L, H, 2 * C});
    copy(kv.slice(2, 0, C).permute({1, 0, 2}), kk_s);
    copy(gkv.slice(3, 0, Pq).permute({2, 0, 1, 3}), yk);
    copy(yk.reshape({H, L, 3 * Pq}), kk_p);
    // logits (H, L, L) = that - w_h |y|^2 / 2 + sqrt(1/3) bias; the distance term's -w_h |x|^2 / 2
    // is the same for every key of a row, so the softmax drops it
    Tensor s = empty({H, L, L});
    bmm(qk, kk, s, false, true);
    Tensor ysq = empty({H, L * 3 * Pq});
    mul(yk.reshape({H, L * 3 * Pq}), yk.reshape({H, L * 3 * Pq}), ysq);
    Tensor key_term = row_sums(ysq.reshape({H * L, 3 * Pq}), -0.5f).reshape({H, L});
    scale_rows(key_term, *in.head_weights, key_term);
    add_into(key_term.reshape({H, 1, L}).expand({H, L, L}), s);
    Tensor bias = empty({L * L, H});
    scale(*in.bias, std::sqrt(1.0f / 3.0f), bias);
    add_into(bias.reshape({L, L, H}).permute({2, 0, 1}), s);
    Tensor rows = s.reshape({H * L, L});
    softmax(rows, nullptr, nullptr);
    // scalar values and value points (global) per head
    Tensor v = empty({H, L, C}), yv = empty({H, L, 3, Pv}), os = empty({H, L, C}),
           op = empty({H, L, 3 * Pv});
    copy(kv.slice(2, C, 2 * C).permute({1, 0, 2}), v);
    copy(gkv.slice(3, Pq, Pkv).permute({2, 0, 1, 3}), yv);
    bmm(s, v, os);
    bmm(s, yv.reshape({H, L, 3 * Pv}), op);
    const int64_t F = H * (C + 4 * Pv + Cz), HPv = H * Pv;
    Tensor scalar = empty({L, H, C});
    copy(os.permute({1, 0, 2}), scalar);
    Tensor out2 = out.reshape({L, F});
    Tensor o_scalar = out2.slice(1, 0, H * C), o_points = out2.slice(1, H * C, H * C + 3 * HPv),
           o_norms = out2.slice(1, H * C + 3 * HPv, H * C + 4 * HPv),
           o_pair = out2.slice(1, H * (C + 4 * Pv), F);
    copy(scalar.reshape({L, H * C}), o_scalar);
    // value points back to the local frame: R^T (g - t), (L, 3, H Pv) as the output's x, y, z
    // blocks
    Tensor g = empty({L, 3, H, Pv}), local = empty({L, 3, HPv});
    copy(op.reshape({H, L, 3, Pv}).permute({1, 2, 0, 3}), g);
    Tensor g3 = g.reshape({L, 3, HPv});
    add_into(negated(t).reshape({L, 3, 1}).expand({L, 3, HPv}), g3);
    bmm(rot, g3, local, /*trans_a=*/true);
    copy(local.reshape({L, 3 * HPv}), o_points);
    // norms sqrt(|p|^2 + eps) = sum(r * rms_norm(r)) / 2 over r = [p | sqrt(eps)], whose mean
    // square is (|p|^2 + eps) / 4
    Tensor r = empty({L, HPv, 4}), rn = empty({L * HPv, 4});
    Tensor rp = r.slice(2, 0, 3), re = r.slice(2, 3, 4);
    copy(local.permute({0, 2, 1}), rp);
    copy(constant({std::sqrt(in.eps)}, {1, 1, 1}).expand({L, HPv, 1}), re);
    ops::rms_norm(r, 0.0f, rn);
    mul(rn, r.reshape({L * HPv, 4}), rn);
    copy(row_sums(rn, 0.5f).reshape({L, HPv}), o_norms);
    // pair values: out[i, h] = a[h, i, :] . z[i] per residue
    Tensor a = empty({L, H, L}), pair = empty({L, H, Cz});
    copy(s.permute({1, 0, 2}), a);
    bmm(a, *in.z, pair);
    copy(pair.reshape({L, H * Cz}), o_pair);
}

void atom_frames(const Tensor& backbone, const Tensor& angles, const Tensor& aatype,
                 const ResidueTables& t, float trans_scale, Tensor& frames_out,
                 Tensor& positions) {
    const int64_t L = aatype.numel(), R = t.atom_mask.size(0);
    if (L == 0) return;
    // the backbone frame, its translation scaled: written out, and as a 4 x 4 matrix
    const Tensor bb = backbone.reshape({L, 7});
    const Tensor q = contiguous(bb.slice(1, 0, 4));
    Tensor ts = empty({L, 3});
    scale(contiguous(bb.slice(1, 4, 7)), trans_scale, ts);
    Tensor fo = frames_out.reshape({L, 7});
    Tensor fo_q = fo.slice(1, 0, 4), fo_t = fo.slice(1, 4, 7);
    copy(q, fo_q);
    copy(ts, fo_t);
    Tensor back = Tensor::zeros({L, 4, 4}, DType::F32, device());
    Tensor back_r = back.slice(1, 0, 3).slice(2, 0, 3), back_t = back.slice(1, 0, 3).slice(2, 3, 4),
           back_1 = back.slice(1, 3, 4).slice(2, 3, 4);
    copy(rotations(q), back_r);
    copy(ts.reshape({L, 3, 1}), back_t);
    copy(constant({1.0f}, {1, 1, 1}).expand({L, 1, 1}), back_1);
    // each residue type's 8 default frames, their last rows made [0 0 0 1] (the kernels read the
    // top three rows only), composed with the rotations about x by the torsions (group 0, the
    // backbone, by none: (sin, cos) = (0, 1))
    Tensor dflt = empty({L, 8 * 16});
    embedding(aatype, t.default_frames.reshape({R, 8 * 16}), dflt);
    Tensor dflt_last = dflt.reshape({L * 8, 4, 4}).slice(1, 3, 4);
    copy(constant({0, 0, 0, 1}, {1, 1, 4}).expand({L * 8, 1, 4}), dflt_last);
    Tensor sc = empty({L, 8, 2}), torsion = empty({L * 8, 16}), local = empty({L * 8, 4, 4});
    Tensor sc0 = sc.slice(1, 0, 1), sc_rest = sc.slice(1, 1, 8);
    copy(constant({0, 1}, {1, 1, 2}).expand({L, 1, 2}), sc0);
    copy(angles.reshape({L, 7, 2}), sc_rest);
    // [[1, 0, 0, 0], [0, cos, -sin, 0], [0, sin, cos, 0], [0, 0, 0, 1]] from (sin, cos)
    std::vector<float> one(16, 0.0f);
    one[0] = one[15] = 1.0f;
    const Tensor ones_diag = constant(std::move(one), {16});
    const Tensor w_torsion =
        coefficients(16, 2, {{5, 1, 1}, {6, 0, -1}, {9, 0, 1}, {10, 1, 1}});
    linear(sc.reshape({L * 8, 2}), w_torsion, &ones_diag, torsion);
    bmm(dflt.reshape({L * 8, 4, 4}), torsion.reshape({L * 8, 4, 4}), local);
    // chi2..chi4 chained onto the groups before them
    Tensor groups = local.reshape({L, 8, 16});
    Tensor prev = contiguous(groups.slice(1, 4, 5)).reshape({L, 4, 4});
    for (int64_t g = 5; g < 8; ++g) {
        Tensor next = empty({L, 4, 4}), slot = groups.slice(1, g, g + 1);
        bmm(prev, contiguous(slot).reshape({L, 4, 4}), next);
        copy(next.reshape({L, 1, 16}), slot);
        prev = next;
    }
    // in the global frame
    Tensor back8 = empty({L, 8, 4, 4}), global = empty({L * 8, 4, 4});
    copy(back.reshape({L, 1, 4, 4}).expand({L, 8, 4, 4}), back8);
    bmm(back8.reshape({L * 8, 4, 4}), local, global);
    // host-side: each atom's group frame, indexed from the residue types (read back: L + R * 14
    // integers)
    const Tensor types = aatype.to(kHost), group_of = t.group_of_atom.to(kHost);
    std::vector<int32_t> rows(size_t(L * 14));
    for (int64_t i = 0; i < L; ++i)
        for (int64_t a = 0; a < 14; ++a)
            rows[size_t(i * 14 + a)] =
                int32_t(i * 8 + group_of.i32()[int64_t(types.i32()[i]) * 14 + a]);
    Tensor atom_frame = empty({L * 14, 16}), lit = empty({L, 42}), lit_h = empty({L * 14, 4, 1}),
           p = empty({L * 14, 4, 1}), mask = empty({L * 14});
    embedding(rows, global.reshape({L * 8, 16}), atom_frame);
    embedding(aatype, t.lit_positions.reshape({R, 42}), lit);
    Tensor lit_xyz = lit_h.slice(1, 0, 3), lit_1 = lit_h.slice(1, 3, 4);
    copy(lit.reshape({L * 14, 3, 1}), lit_xyz);
    copy(constant({1.0f}, {1, 1, 1}).expand({L * 14, 1, 1}), lit_1);
    bmm(atom_frame.reshape({L * 14, 4, 4}), lit_h, p);
    embedding(aatype, t.atom_mask.reshape({R, 14}), mask);
    Tensor pos = positions.reshape({L * 14, 3});
    scale_rows(contiguous(p.slice(1, 0, 3)).reshape({L * 14, 3}), mask, pos);
}

}  // namespace bioinfer::ops::fallback
