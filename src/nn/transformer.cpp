// Transformer blocks: weights by checkpoint name, forward by ops; the encoder stack on them.
#include "nn/transformer.h"

#include <algorithm>
#include <mutex>

#include "bioinfer/error.h"
#include "io/safetensors.h"

namespace bioinfer::nn {

Linear Linear::load(const io::ModelDir& m, const std::string& prefix, int64_t in, int64_t out,
                    bool bias) {
    Tensor w = m.get(prefix + ".weight", {out, in});  // checked first: errors name the weight
    Tensor b = bias ? m.get_f32(prefix + ".bias", {out}) : Tensor();
    return from(w, b);
}

Linear Linear::from(Tensor w, Tensor b) {
    Linear l;
    l.b = b.defined() && b.dtype() != DType::F32 ? b.to_f32() : b;
    l.packed = ops::pack_linear_weight(w, ops::matmul_precision());
    if (!l.packed && ops::matmul_precision() != DType::F32)  // no such GEMM here: fp32 instead
        l.packed = ops::pack_linear_weight(w, DType::F32);
    l.w = l.packed || w.dtype() == DType::F32 ? w : w.to_f32();
    // The GEMM reads only the packed copy from now on: let the kernel reclaim the mapped pages
    // of the checkpoint (re-read from the file if the reference backend ever needs them).
    if (l.packed) io::release_pages_hint(w.raw(), size_t(w.numel()) * dtype_size(w.dtype()));
    return l;
}

Linear Linear::from_rows(const Tensor& w, int64_t r0, int64_t r1) {
    return from(w.narrow0(r0, r1).clone(), Tensor());
}

void Linear::operator()(const Tensor& x, Tensor& out, ops::Epilogue ep) const {
    ops::linear(x, w, b.defined() ? &b : nullptr, out, ep, packed.get());
}

LayerNorm LayerNorm::load(const io::ModelDir& m, const std::string& prefix, int64_t d, float eps,
                          bool bias) {
    // transformers >= 5 writes modules named "LayerNorm" with the legacy gamma/beta names.
    const bool legacy = !m.has(prefix + ".weight") && m.has(prefix + ".gamma");
    Tensor g = m.get_f32(prefix + (legacy ? ".gamma" : ".weight"), {d});
    Tensor b = bias ? m.get_f32(prefix + (legacy ? ".beta" : ".bias"), {d}) : Tensor();
    return from(g, b, eps);
}

LayerNorm LayerNorm::from(Tensor g, Tensor b, float eps) {
    LayerNorm ln;
    ln.g = g;
    ln.b = b.defined() ? b : Tensor::zeros(g.shape());
    ln.eps = eps;
    return ln;
}

void Rotary::ensure(int64_t n_pos) {
    if (cos.defined() && cos.size(0) >= n_pos) return;
    ops::rotary_tables(inv_freq, n_pos, cos, sin);
}

Rotary Rotary::at_least(int64_t n_pos) {
    static std::mutex mu;
    std::lock_guard<std::mutex> lock(mu);
    ensure(n_pos);
    return *this;
}

PreLnBlock PreLnBlock::load(const io::ModelDir& m, const std::string& p, const PreLnBlockNames& n,
                            int64_t d, int64_t f, float eps) {
    const bool bias = n.linear_bias;
    PreLnBlock b;
    b.ln_attn = LayerNorm::load(m, p + n.ln_attn, d, eps);
    if (!n.qkv.empty()) {  // fused rows, split as views (no bias in any fused layout)
        const Tensor qkv = m.get(p + n.qkv + ".weight", {3 * d, d});
        b.attn.q = Linear::from(qkv.narrow0(0, d), Tensor());
        b.attn.k = Linear::from(qkv.narrow0(d, 2 * d), Tensor());
        b.attn.v = Linear::from(qkv.narrow0(2 * d, 3 * d), Tensor());
    } else {
        b.attn.q = Linear::load(m, p + n.q, d, d, bias);
        b.attn.k = Linear::load(m, p + n.k, d, d, bias);
        b.attn.v = Linear::load(m, p + n.v, d, d, bias);
    }
    b.attn.o = Linear::load(m, p + n.o, d, d, bias);
    if (!n.q_ln.empty()) b.attn.q_ln = LayerNorm::load(m, p + n.q_ln, d, eps, false);
    if (!n.k_ln.empty()) b.attn.k_ln = LayerNorm::load(m, p + n.k_ln, d, eps, false);
    b.ln_ffn = LayerNorm::load(m, p + n.ln_ffn, d, eps);
    if (!n.gate_up.empty()) {
        const Tensor in = m.get(p + n.gate_up + ".weight", {2 * f, d});
        b.ffn.gate = Linear::from(in.narrow0(0, f), Tensor());
        b.ffn.up = Linear::from(in.narrow0(f, 2 * f), Tensor());
    } else {
        if (!n.gate.empty()) b.ffn.gate = Linear::load(m, p + n.gate, d, f, bias);
        b.ffn.up = Linear::load(m, p + n.up, d, f, bias);
    }
    b.ffn.down = Linear::load(m, p + n.down, f, d, bias);
    b.ffn.act =
        n.gate.empty() && n.gate_up.empty() ? FeedForward::Act::Gelu : FeedForward::Act::SwiGlu;
    return b;
}

MaskedLmHead MaskedLmHead::load(const io::ModelDir& m, const MaskedLmHeadNames& n, int64_t d,
                                int64_t vocab, float eps) {
    const ops::MatmulPrecisionScope head(ops::head_precision());
    MaskedLmHead h;
    h.dense = Linear::load(m, n.dense, d, d);
    h.ln = LayerNorm::load(m, n.ln, d, eps);
    h.decoder = Linear::load(m, n.decoder, d, vocab);
    return h;
}

void MaskedLmHead::operator()(const Tensor& x, Tensor& logits) const {
    Tensor h = Tensor::empty(x.shape()), hn = Tensor::empty(x.shape());
    dense(x, h, {.act = Act::Gelu});
    ln(h, hn);
    decoder(hn, logits);
}

std::vector<int32_t> pack_batch(const std::vector<std::vector<int32_t>>& tokens, BatchCtx& ctx,
                                const char* where) {
    BI_CHECK(!tokens.empty(), where, "empty batch");
    ctx.cu_seqlens.assign(1, 0);
    ctx.longest = 0;
    std::vector<int32_t> ids;
    for (size_t b = 0; b < tokens.size(); ++b) {
        BI_CHECK(!tokens[b].empty(), where, "sequence ", b, " of the batch has no tokens");
        ids.insert(ids.end(), tokens[b].begin(), tokens[b].end());
        ctx.cu_seqlens.push_back(int64_t(ids.size()));
        ctx.longest = std::max(ctx.longest, int64_t(tokens[b].size()));
    }
    return ids;
}

void pre_ln_block(const PreLnBlock& blk, const BatchCtx& ctx, Tensor& x, Tensor* probs) {
    const int64_t N = ctx.rows(), D = x.size(-1);
    const auto& at = blk.attn;
    const int64_t H = at.heads, Dh = D / H;

    Tensor h = Tensor::empty({N, D});
    blk.ln_attn(x, h);
    if (ctx.tap) ctx.tap("attn_ln", h);
    Tensor q = Tensor::empty({N, D}), k = Tensor::empty({N, D}), v = Tensor::empty({N, D});
    at.q(h, q);
    at.k(h, k);
    at.v(h, v);
    if (at.q_ln.defined()) {
        at.q_ln(q, q);
        at.k_ln(k, k);
    }
    if (at.q_scale != 1.0f) ops::scale(q, at.q_scale, q);
    if (ctx.rotary) {
        Tensor q3 = q.reshape({N, H, Dh}), k3 = k.reshape({N, H, Dh});
        ops::rotary_varlen(q3, ctx.cu_seqlens, ctx.rotary->cos, ctx.rotary->sin);
        ops::rotary_varlen(k3, ctx.cu_seqlens, ctx.rotary->cos, ctx.rotary->sin);
    }
    Tensor ctxv = Tensor::empty({N, D});
    ops::attention_varlen(q, k, v, H, at.score_scale, ctx.cu_seqlens, ctxv, probs);
    if (ctx.tap) ctx.tap("attn_ctx", ctxv);
    const float s = blk.residual_scale;
    at.o(ctxv, x, {.scale = s, .accumulate = true});  // x += s * o(attn)
    if (ctx.tap) ctx.tap("attn_out", x);

    blk.ln_ffn(x, h);
    const auto& f = blk.ffn;
    Tensor up = Tensor::empty({N, f.up.out_features()});
    if (f.act == FeedForward::Act::Gelu) {
        f.up(h, up, {.act = Act::Gelu});
    } else {
        Tensor gate = Tensor::empty({N, f.gate.out_features()});
        f.gate(h, gate);
        f.up(h, up);
        ops::swiglu(gate, up, up);
    }
    if (ctx.tap) ctx.tap("ffn_up", up);
    f.down(up, x, {.scale = s, .accumulate = true});  // x += s * down(act(ln(x)))
}

EncoderBatch::EncoderBatch(const std::vector<std::vector<int32_t>>& tokens, const Tensor& embedding,
                           Rotary& shared_rotary, const char* where) {
    ids = pack_batch(tokens, ctx, where);
    rotary = shared_rotary.at_least(ctx.longest);
    ctx.rotary = &rotary;
    x = Tensor::empty({ctx.rows(), embedding.size(1)});
    ops::embedding(ids, embedding, x);
}

Tensor encoder_stack(const std::vector<PreLnBlock>& blocks, const LayerNorm& final_ln,
                     BatchCtx& ctx, Tensor& x, const StackRequest& req,
                     std::map<int, Tensor>& hidden) {
    const int64_t n = int64_t(blocks.size()), N = ctx.rows(), D = x.size(-1);
    auto keep = [&](int layer) {
        return std::find(req.layers.begin(), req.layers.end(), layer) != req.layers.end();
    };
    if (keep(0)) hidden[0] = x.clone();
    Tensor probs;
    if (req.attention_probs && n > 0)
        probs = Tensor::empty({ctx.batch(), blocks[0].attn.heads, ctx.longest, ctx.longest});
    for (int64_t l = 0; l < n; ++l) {
        if (req.tap)
            ctx.tap = [&](const std::string& name, const Tensor& t) { req.tap(int(l), name, t); };
        pre_ln_block(blocks[size_t(l)], ctx, x, req.attention_probs ? &probs : nullptr);
        if (req.after_block) req.after_block(l, req.attention_probs ? &probs : nullptr);
        if (l + 1 < n && keep(int(l + 1))) hidden[int(l + 1)] = x.clone();
    }
    ctx.tap = nullptr;
    Tensor last = Tensor::empty({N, D});
    final_ln(x, last);
    if (keep(int(n))) hidden[int(n)] = last;
    return last;
}

}  // namespace bioinfer::nn
