// The shared trunk blocks against plain references written out here from their definitions
// (AlphaFold 2 supplement algorithms 11-14 and 22, ESMFold's sequence attention), in double, with
// random weights; each chunked block also against itself run in other chunk sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "io/model_dir.h"
#include "nn/ipa.h"
#include "nn/pair_seq.h"
#include "nn/triangle.h"
#include "ops/ops.h"
#include "test_util.h"

using namespace bioinfer;
using test::random_tensor;

namespace {

// Random weights named like the checkpoint's, kept for the reference.
struct Weights {
    std::map<std::string, Tensor> t;
    uint32_t seed = 100;
    const Tensor& add(const std::string& name, const Shape& s, float mean = 0, float sd = 0) {
        const double fan_in = double(s.back());
        t[name] = random_tensor(s, seed++, mean, sd > 0 ? sd : float(1.0 / std::sqrt(fan_in)));
        return t[name];
    }
    void linear(const std::string& p, int64_t in, int64_t out, bool bias = true) {
        add(p + ".weight", {out, in});
        if (bias) add(p + ".bias", {out}, 0.0f, 0.1f);
    }
    void norm(const std::string& p, int64_t d) {
        add(p + ".weight", {d}, 1.0f, 0.1f);
        add(p + ".bias", {d}, 0.0f, 0.1f);
    }
    io::ModelDir dir() const { return io::ModelDir::from_tensors("random", nlohmann::json::object({{"x", 1}}), t); }
    const float* f(const std::string& n) const { return t.at(n).f32(); }
};

using Vec = std::vector<double>;

Vec layer_norm(const float* x, const float* g, const float* b, int64_t d) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < d; ++i) m += x[i];
    m /= double(d);
    for (int64_t i = 0; i < d; ++i) v += (x[i] - m) * (x[i] - m);
    v /= double(d);
    Vec y(static_cast<size_t>(d));
    for (int64_t i = 0; i < d; ++i) y[size_t(i)] = (x[i] - m) / std::sqrt(v + 1e-5) * g[i] + b[i];
    return y;
}

Vec linear(const Vec& x, const float* w, const float* b, int64_t out) {
    const int64_t in = int64_t(x.size());
    Vec y(static_cast<size_t>(out));
    for (int64_t o = 0; o < out; ++o) {
        double s = b ? b[o] : 0.0;
        for (int64_t i = 0; i < in; ++i) s += x[size_t(i)] * w[o * in + i];
        y[size_t(o)] = s;
    }
    return y;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

void softmax(Vec& a) {
    double mx = -1e300, s = 0;
    for (double v : a) mx = std::max(mx, v);
    for (double& v : a) s += (v = std::exp(v - mx));
    for (double& v : a) v /= s;
}

void expect_match(const Tensor& got, const std::vector<double>& ref, const std::string& what) {
    ASSERT_EQ(got.numel(), int64_t(ref.size())) << what;
    std::vector<float> r(ref.begin(), ref.end());
    const auto s = test::stats(got.f32(), r.data(), got.numel());
    EXPECT_GE(s.pcc, 0.99999) << what;
    EXPECT_LE(s.rel_l2, 1e-5) << what << " (max-abs " << s.max_abs << ")";
}

}  // namespace

// With linear biases (OpenFold's layout, chunked rows) and without (Boltz-2's: the whole pair at
// once unless a smaller chunk is asked for, channel-major projections).
// The whole-pair pipelines run a step of ~1 MiB of pairs at a time: the (40, 256) cases take
// several steps, the last one partial.
struct PairCase {
    int64_t L, C;
    std::vector<bool> biased;
    std::vector<int64_t> chunks;
};

TEST(PairBlocks, TriangleMultiplicationOutgoingAndIncoming) {
    for (const PairCase& pc : {PairCase{13, 8, {true, false}, {0, 1, 4, 13}}, PairCase{40, 256, {false}, {0}}})
    for (bool biased : pc.biased)
    for (bool outgoing : {true, false}) {
        const int64_t L = pc.L, C = pc.C;
        Weights w;
        const std::string p = "tm";
        w.norm(p + ".layer_norm_in", C);
        w.norm(p + ".layer_norm_out", C);
        for (const char* n : {"linear_a_p", "linear_a_g", "linear_b_p", "linear_b_g", "linear_g", "linear_z"})
            w.linear(p + "." + n, C, C, biased);
        const auto bias = [&](const char* n) { return biased ? w.f(p + "." + n + ".bias") : nullptr; };
        const Tensor z0 = random_tensor({L, L, C}, 7);
        // reference
        std::vector<Vec> zn(static_cast<size_t>(L * L)), a(size_t(L * L)), b(size_t(L * L));
        for (int64_t r = 0; r < L * L; ++r) {
            zn[size_t(r)] = layer_norm(z0.f32() + r * C, w.f(p + ".layer_norm_in.weight"), w.f(p + ".layer_norm_in.bias"), C);
            const Vec ag = linear(zn[size_t(r)], w.f(p + ".linear_a_g.weight"), bias("linear_a_g"), C);
            const Vec ap = linear(zn[size_t(r)], w.f(p + ".linear_a_p.weight"), bias("linear_a_p"), C);
            const Vec bg = linear(zn[size_t(r)], w.f(p + ".linear_b_g.weight"), bias("linear_b_g"), C);
            const Vec bp = linear(zn[size_t(r)], w.f(p + ".linear_b_p.weight"), bias("linear_b_p"), C);
            a[size_t(r)] = b[size_t(r)] = Vec(size_t(C));
            for (int64_t c = 0; c < C; ++c) {
                a[size_t(r)][size_t(c)] = sigmoid(ag[size_t(c)]) * ap[size_t(c)];
                b[size_t(r)][size_t(c)] = sigmoid(bg[size_t(c)]) * bp[size_t(c)];
            }
        }
        std::vector<double> ref(static_cast<size_t>(L * L * C));
        for (int64_t i = 0; i < L; ++i)
            for (int64_t j = 0; j < L; ++j) {
                std::vector<float> x(static_cast<size_t>(C));
                for (int64_t c = 0; c < C; ++c) {
                    double s = 0;
                    for (int64_t k = 0; k < L; ++k)
                        s += outgoing ? a[size_t(i * L + k)][size_t(c)] * b[size_t(j * L + k)][size_t(c)]
                                      : a[size_t(k * L + i)][size_t(c)] * b[size_t(k * L + j)][size_t(c)];
                    x[size_t(c)] = float(s);
                }
                const Vec xn = layer_norm(x.data(), w.f(p + ".layer_norm_out.weight"), w.f(p + ".layer_norm_out.bias"), C);
                const Vec y = linear(xn, w.f(p + ".linear_z.weight"), bias("linear_z"), C);
                const Vec g = linear(zn[size_t(i * L + j)], w.f(p + ".linear_g.weight"), bias("linear_g"), C);
                for (int64_t c = 0; c < C; ++c)
                    ref[size_t((i * L + j) * C + c)] = z0.f32()[(i * L + j) * C + c] + y[size_t(c)] * sigmoid(g[size_t(c)]);
            }
        nn::TriangleMultiplicationNames names;
        names.bias = biased;
        const auto block = nn::TriangleMultiplication::load(w.dir(), p, C, outgoing, names);
        for (int64_t chunk : pc.chunks) {
            Tensor z = z0.clone();
            block.add_to(z, chunk);
            expect_match(z, ref, std::string(outgoing ? "outgoing" : "incoming") +
                                     (biased ? "" : " without biases") + " L " + std::to_string(L) +
                                     " chunk " + std::to_string(chunk));
        }
    }
}

TEST(PairBlocks, TriangleAttentionStartingAndEnding) {
    for (const PairCase& pc : {PairCase{11, 8, {}, {0, 1, 3, 11}}, PairCase{40, 256, {}, {0}}})
    for (bool starting : {true, false}) {
        const int64_t L = pc.L, C = pc.C, H = 2, D = 4;
        Weights w;
        const std::string p = "ta";
        w.norm(p + ".layer_norm", C);
        w.linear(p + ".linear", C, H, false);
        for (const char* n : {"linear_q", "linear_k", "linear_v"}) w.linear(p + ".mha." + n, C, H * D, false);
        w.linear(p + ".mha.linear_g", C, H * D);
        w.linear(p + ".mha.linear_o", H * D, C);
        const Tensor z0 = random_tensor({L, L, C}, 8);
        // x = z (starting) or z transposed (ending); attention along x's rows
        auto at = [&](int64_t r, int64_t c) { return z0.f32() + (starting ? r * L + c : c * L + r) * C; };
        std::vector<Vec> xn(static_cast<size_t>(L * L));
        for (int64_t r = 0; r < L; ++r)
            for (int64_t c = 0; c < L; ++c)
                xn[size_t(r * L + c)] = layer_norm(at(r, c), w.f(p + ".layer_norm.weight"), w.f(p + ".layer_norm.bias"), C);
        auto proj = [&](const std::string& n, bool bias) {
            std::vector<Vec> o;
            for (auto& x : xn) o.push_back(linear(x, w.f(p + n + ".weight"), bias ? w.f(p + n + ".bias") : nullptr, n == ".linear" ? H : H * D));
            return o;
        };
        const auto tb = proj(".linear", false), q = proj(".mha.linear_q", false), k = proj(".mha.linear_k", false),
                   v = proj(".mha.linear_v", false), g = proj(".mha.linear_g", true);
        std::vector<double> ref(z0.f32(), z0.f32() + z0.numel());
        for (int64_t r = 0; r < L; ++r)
            for (int64_t i = 0; i < L; ++i) {
                Vec o(static_cast<size_t>(H * D), 0.0);
                for (int64_t h = 0; h < H; ++h) {
                    Vec s(static_cast<size_t>(L));
                    for (int64_t j = 0; j < L; ++j) {
                        double d = 0;
                        for (int64_t e = 0; e < D; ++e)
                            d += q[size_t(r * L + i)][size_t(h * D + e)] * k[size_t(r * L + j)][size_t(h * D + e)];
                        s[size_t(j)] = d / std::sqrt(double(D)) + tb[size_t(i * L + j)][size_t(h)];
                    }
                    softmax(s);
                    for (int64_t j = 0; j < L; ++j)
                        for (int64_t e = 0; e < D; ++e)
                            o[size_t(h * D + e)] += s[size_t(j)] * v[size_t(r * L + j)][size_t(h * D + e)];
                }
                for (int64_t e = 0; e < H * D; ++e) o[size_t(e)] *= sigmoid(g[size_t(r * L + i)][size_t(e)]);
                const Vec y = linear(o, w.f(p + ".mha.linear_o.weight"), w.f(p + ".mha.linear_o.bias"), C);
                const int64_t zi = starting ? r * L + i : i * L + r;
                for (int64_t c = 0; c < C; ++c) ref[size_t(zi * C + c)] += y[size_t(c)];
            }
        const auto block = nn::TriangleAttention::load(w.dir(), p, C, D, H, starting);
        for (int64_t chunk : pc.chunks) {
            Tensor z = z0.clone();
            block.add_to(z, chunk);
            expect_match(z, ref, std::string(starting ? "starting" : "ending") + " L " +
                                     std::to_string(L) + " chunk " + std::to_string(chunk));
        }
    }
}

// x += down(relu(up(LN(x)))) (ESMFold's layout) and the SwiGLU transition (Boltz-2's), in
// chunks of rows that do not divide the rows evenly (the last chunk partial) and in one.
TEST(PairBlocks, ResidueMlpReluAndSwiGlu) {
    const int64_t rows = 23, D = 8, F = 12;
    for (bool swiglu : {false, true}) {
        Weights w;
        const nn::ResidueMlpNames names = swiglu ? nn::ResidueMlpNames::boltz2() : nn::ResidueMlpNames{};
        const std::string p = "mlp";
        w.norm(p + "." + names.ln, D);
        w.linear(p + "." + names.up, D, F, names.bias);
        w.linear(p + "." + names.down, F, D, names.bias);
        if (swiglu) w.linear(p + "." + names.gate, D, F, names.bias);
        const auto bias = [&](const std::string& n) { return names.bias ? w.f(p + "." + n + ".bias") : nullptr; };
        const Tensor x0 = random_tensor({rows, D}, 9);
        std::vector<double> ref(x0.f32(), x0.f32() + x0.numel());
        for (int64_t r = 0; r < rows; ++r) {
            const Vec xn = layer_norm(x0.f32() + r * D, w.f(p + "." + names.ln + ".weight"),
                                      w.f(p + "." + names.ln + ".bias"), D);
            Vec h = linear(xn, w.f(p + "." + names.up + ".weight"), bias(names.up), F);
            if (swiglu) {
                const Vec g = linear(xn, w.f(p + "." + names.gate + ".weight"), bias(names.gate), F);
                for (int64_t f = 0; f < F; ++f) h[size_t(f)] *= g[size_t(f)] * sigmoid(g[size_t(f)]);
            } else {
                for (double& v : h) v = std::max(v, 0.0);
            }
            const Vec y = linear(h, w.f(p + "." + names.down + ".weight"), bias(names.down), D);
            for (int64_t c = 0; c < D; ++c) ref[size_t(r * D + c)] += y[size_t(c)];
        }
        const auto mlp = nn::ResidueMlp::load(w.dir(), p, D, F, names);
        for (int64_t chunk : {0, 1, 5, 23, 40}) {
            Tensor x = x0.clone();
            mlp.add_to(x, chunk);
            expect_match(x, ref, std::string(swiglu ? "swiglu" : "relu") + " chunk " + std::to_string(chunk));
        }
    }
}

TEST(PairBlocks, SequenceAttentionWithPairBiasAndSequenceToPair) {
    const int64_t L = 9, Dm = 12, Hw = 4, H = Dm / Hw, C = 6;
    Weights w;
    w.norm("p2s.layernorm", C);
    w.linear("p2s.linear", C, H, false);
    w.linear("att.proj", Dm, 3 * Dm, false);
    w.linear("att.g_proj", Dm, Dm);
    w.linear("att.o_proj", Dm, Dm);
    w.norm("s2p.layernorm", Dm);
    w.linear("s2p.proj", Dm, C);
    w.linear("s2p.o_proj", C, C);
    const Tensor z0 = random_tensor({L, L, C}, 9), y = random_tensor({L, Dm}, 10), s0 = random_tensor({L, Dm}, 11);
    const io::ModelDir m = w.dir();
    // pair-to-sequence bias (H, L, L)
    const auto p2s = nn::PairToSequence::load(m, "p2s", C, H);
    const Tensor bias = p2s(z0, 2);
    std::vector<double> bref(static_cast<size_t>(H * L * L));
    for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j) {
            const Vec b = linear(layer_norm(z0.f32() + (i * L + j) * C, w.f("p2s.layernorm.weight"), w.f("p2s.layernorm.bias"), C),
                                 w.f("p2s.linear.weight"), nullptr, H);
            for (int64_t h = 0; h < H; ++h) bref[size_t((h * L + i) * L + j)] = b[size_t(h)];
        }
    expect_match(bias, bref, "pair-to-sequence bias");
    // gated attention, q/k/v interleaved per head in the fused projection
    const auto att = nn::GatedBiasedAttention::load(m, "att", Dm, Hw);
    Tensor s = s0.clone();
    att.add_to(y, bias, s);
    std::vector<double> sref(s0.f32(), s0.f32() + s0.numel());
    std::vector<Vec> t, g;
    for (int64_t i = 0; i < L; ++i) {
        const Vec yi(y.f32() + i * Dm, y.f32() + (i + 1) * Dm);
        t.push_back(linear(yi, w.f("att.proj.weight"), nullptr, 3 * Dm));
        g.push_back(linear(yi, w.f("att.g_proj.weight"), w.f("att.g_proj.bias"), Dm));
    }
    for (int64_t i = 0; i < L; ++i) {
        Vec o(static_cast<size_t>(Dm), 0.0);
        for (int64_t h = 0; h < H; ++h) {
            Vec a(static_cast<size_t>(L));
            for (int64_t j = 0; j < L; ++j) {
                double d = 0;
                for (int64_t e = 0; e < Hw; ++e) d += t[size_t(i)][size_t(h * 3 * Hw + e)] * t[size_t(j)][size_t(h * 3 * Hw + Hw + e)];
                a[size_t(j)] = d / std::sqrt(double(Hw)) + bref[size_t((h * L + i) * L + j)];
            }
            softmax(a);
            for (int64_t j = 0; j < L; ++j)
                for (int64_t e = 0; e < Hw; ++e) o[size_t(h * Hw + e)] += a[size_t(j)] * t[size_t(j)][size_t(h * 3 * Hw + 2 * Hw + e)];
        }
        for (int64_t e = 0; e < Dm; ++e) o[size_t(e)] *= sigmoid(g[size_t(i)][size_t(e)]);
        const Vec out = linear(o, w.f("att.o_proj.weight"), w.f("att.o_proj.bias"), Dm);
        for (int64_t e = 0; e < Dm; ++e) sref[size_t(i * Dm + e)] += out[size_t(e)];
    }
    expect_match(s, sref, "gated attention with pair bias");
    // sequence-to-pair: z[i, j] += o_proj(cat(q[j] * k[i], q[j] - k[i]))
    const auto s2p = nn::SequenceToPair::load(m, "s2p", Dm, C / 2, C);
    std::vector<double> zref(z0.f32(), z0.f32() + z0.numel());
    std::vector<Vec> qk;
    for (int64_t i = 0; i < L; ++i)
        qk.push_back(linear(layer_norm(s0.f32() + i * Dm, w.f("s2p.layernorm.weight"), w.f("s2p.layernorm.bias"), Dm),
                            w.f("s2p.proj.weight"), w.f("s2p.proj.bias"), C));
    for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j) {
            Vec x(static_cast<size_t>(C));
            for (int64_t c = 0; c < C / 2; ++c) {
                x[size_t(c)] = qk[size_t(j)][size_t(c)] * qk[size_t(i)][size_t(C / 2 + c)];
                x[size_t(C / 2 + c)] = qk[size_t(j)][size_t(c)] - qk[size_t(i)][size_t(C / 2 + c)];
            }
            const Vec o = linear(x, w.f("s2p.o_proj.weight"), w.f("s2p.o_proj.bias"), C);
            for (int64_t c = 0; c < C; ++c) zref[size_t((i * L + j) * C + c)] += o[size_t(c)];
        }
    for (int64_t chunk : {0, 1, 4}) {
        Tensor z = z0.clone();
        s2p.add_to(s0, z, chunk);
        expect_match(z, zref, "sequence-to-pair chunk " + std::to_string(chunk));
    }
}

TEST(PairBlocks, InvariantPointAttention) {
    const int64_t L = 10, Cs = 12, Cz = 6, H = 3, D = 4, Pq = 2, Pv = 3;
    Weights w;
    w.linear("ipa.linear_q", Cs, H * D);
    w.linear("ipa.linear_kv", Cs, 2 * H * D);
    w.linear("ipa.linear_q_points", Cs, H * Pq * 3);
    w.linear("ipa.linear_kv_points", Cs, H * (Pq + Pv) * 3);
    w.linear("ipa.linear_b", Cz, H);
    w.linear("ipa.linear_out", H * (Cz + D + Pv * 4), Cs);
    w.add("ipa.head_weights", {H}, 0.5f, 0.3f);
    const Tensor s = random_tensor({L, Cs}, 12), z = random_tensor({L, L, Cz}, 13);
    // random frames: unit quaternions and translations
    std::vector<geom::Rigid> frames;
    Tensor frame_t = Tensor::empty({L, 7});  // the same frames as (quaternion, translation) rows
    std::mt19937 rng(5);
    std::normal_distribution<float> nd;
    for (int64_t i = 0; i < L; ++i) {
        geom::QuatRigid q;
        const float u[6] = {nd(rng), nd(rng), nd(rng), 3 * nd(rng), 3 * nd(rng), 3 * nd(rng)};
        const geom::QuatRigid r = q.compose_update(u);
        frames.push_back(r.rigid());
        std::copy(r.q.begin(), r.q.end(), frame_t.f32() + i * 7);
        std::copy(r.trans.begin(), r.trans.end(), frame_t.f32() + i * 7 + 4);
    }
    const auto ipa = nn::InvariantPointAttention::load(w.dir(), "ipa", Cs, Cz, D, H, Pq, Pv, 1e-8f);
    Tensor got = Tensor::empty({L, Cs});
    ipa(s, z, frame_t, got);

    // reference, in double
    auto apply = [](const geom::Rigid& r, const Vec& p) {
        Vec o(3);
        for (int a = 0; a < 3; ++a) o[size_t(a)] = r.rot[size_t(a * 3)] * p[0] + r.rot[size_t(a * 3 + 1)] * p[1] + r.rot[size_t(a * 3 + 2)] * p[2] + r.trans[size_t(a)];
        return o;
    };
    auto invert_apply = [](const geom::Rigid& r, const Vec& p) {
        Vec d{p[0] - r.trans[0], p[1] - r.trans[1], p[2] - r.trans[2]}, o(3);
        for (int a = 0; a < 3; ++a) o[size_t(a)] = r.rot[size_t(a)] * d[0] + r.rot[size_t(3 + a)] * d[1] + r.rot[size_t(6 + a)] * d[2];
        return o;
    };
    std::vector<Vec> q, kv, qp, kvp;
    for (int64_t i = 0; i < L; ++i) {
        const Vec si(s.f32() + i * Cs, s.f32() + (i + 1) * Cs);
        q.push_back(linear(si, w.f("ipa.linear_q.weight"), w.f("ipa.linear_q.bias"), H * D));
        kv.push_back(linear(si, w.f("ipa.linear_kv.weight"), w.f("ipa.linear_kv.bias"), 2 * H * D));
        qp.push_back(linear(si, w.f("ipa.linear_q_points.weight"), w.f("ipa.linear_q_points.bias"), H * Pq * 3));
        kvp.push_back(linear(si, w.f("ipa.linear_kv_points.weight"), w.f("ipa.linear_kv_points.bias"), H * (Pq + Pv) * 3));
    }
    // point n of residue i: components at n, N + n, 2N + n (N points), in the global frame
    auto point = [&](const std::vector<Vec>& raw, int64_t i, int64_t N, int64_t n) {
        return apply(frames[size_t(i)], {raw[size_t(i)][size_t(n)], raw[size_t(i)][size_t(N + n)], raw[size_t(i)][size_t(2 * N + n)]});
    };
    std::vector<double> ref;
    for (int64_t i = 0; i < L; ++i) {
        Vec feat(size_t(H * (Cz + D + 4 * Pv)), 0.0);
        for (int64_t h = 0; h < H; ++h) {
            const double hw = std::log1p(std::exp(double(w.f("ipa.head_weights")[h]))) * std::sqrt(1.0 / (3 * (Pq * 9.0 / 2)));
            Vec a(static_cast<size_t>(L));
            for (int64_t j = 0; j < L; ++j) {
                double dot = 0, d2 = 0;
                for (int64_t e = 0; e < D; ++e) dot += q[size_t(i)][size_t(h * D + e)] * kv[size_t(j)][size_t(h * 2 * D + e)];
                for (int64_t pt = 0; pt < Pq; ++pt) {
                    const Vec x = point(qp, i, H * Pq, h * Pq + pt), y = point(kvp, j, H * (Pq + Pv), h * (Pq + Pv) + pt);
                    for (int c = 0; c < 3; ++c) d2 += (x[size_t(c)] - y[size_t(c)]) * (x[size_t(c)] - y[size_t(c)]);
                }
                const Vec b = linear(Vec(z.f32() + (i * L + j) * Cz, z.f32() + (i * L + j + 1) * Cz), w.f("ipa.linear_b.weight"), w.f("ipa.linear_b.bias"), H);
                a[size_t(j)] = dot * std::sqrt(1.0 / (3 * D)) + std::sqrt(1.0 / 3) * b[size_t(h)] - 0.5 * hw * d2;
            }
            softmax(a);
            for (int64_t j = 0; j < L; ++j) {
                for (int64_t e = 0; e < D; ++e) feat[size_t(h * D + e)] += a[size_t(j)] * kv[size_t(j)][size_t(h * 2 * D + D + e)];
                for (int64_t c = 0; c < Cz; ++c) feat[size_t(H * (D + 4 * Pv) + h * Cz + c)] += a[size_t(j)] * z.f32()[(i * L + j) * Cz + c];
            }
            for (int64_t pt = 0; pt < Pv; ++pt) {
                Vec o(3, 0.0);
                for (int64_t j = 0; j < L; ++j) {
                    const Vec y = point(kvp, j, H * (Pq + Pv), h * (Pq + Pv) + Pq + pt);
                    for (int c = 0; c < 3; ++c) o[size_t(c)] += a[size_t(j)] * y[size_t(c)];
                }
                const Vec loc = invert_apply(frames[size_t(i)], o);
                for (int c = 0; c < 3; ++c) feat[size_t(H * D + c * H * Pv + h * Pv + pt)] = loc[size_t(c)];
                feat[size_t(H * D + 3 * H * Pv + h * Pv + pt)] = std::sqrt(loc[0] * loc[0] + loc[1] * loc[1] + loc[2] * loc[2] + 1e-8);
            }
        }
        const Vec out = linear(feat, w.f("ipa.linear_out.weight"), w.f("ipa.linear_out.bias"), Cs);
        ref.insert(ref.end(), out.begin(), out.end());
    }
    expect_match(got, ref, "invariant point attention");
}
