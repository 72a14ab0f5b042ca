// Boltz-2's score model (boltz/model/modules/diffusionv2.py DiffusionModule) and its EDM
// preconditioning (AtomDiffusion.preconditioned_network_forward): the single conditioning with
// the noise level's Fourier features, the token transformer between the atom encoder and decoder,
// and c_skip / c_out / c_in / c_noise around the network.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "models/boltz2/config.h"
#include "nn/dit.h"
#include "nn/edm_sampler.h"
#include "nn/pair_seq.h"
#include "nn/transformer.h"

namespace bioinfer::boltz2 {

// Algorithm 21 (SingleConditioning) with Algorithm 22 (FourierEmbedding):
//   s = single_embed(LN(cat(s_trunk, s_inputs))) + fourier_to_single(LN(cos(2 pi (w t + b))))
//   then s += transition(s) per transition (boltz's Transition: nn::ResidueMlp with
//   ResidueMlpNames::boltz2()). t is c_noise(sigma), one per sample.
struct SingleConditioning {
    nn::LayerNorm norm_single;
    nn::Linear single_embed;          // (2ts, 2ts) with bias
    std::vector<float> fourier_w, fourier_b;  // fourier_embed.proj (F, 1) and (F), kept on the host
    nn::LayerNorm norm_fourier;
    nn::Linear fourier_to_single;     // (2ts, F), no bias
    std::vector<nn::ResidueMlp> transitions;
    // prefix: "structure_module.score_model.single_conditioner"
    static SingleConditioning load(const io::ModelDir& m, const std::string& prefix, int64_t token_s,
                                   int64_t dim_fourier, int64_t num_transitions);
    // The sample-independent part LN -> single_embed of cat(s_trunk, s_inputs) (N, ts) each:
    // (N, 2ts). Computed once per sampler run.
    Tensor embed_single(const Tensor& s_trunk, const Tensor& s_inputs) const;
    // s (S, N, 2ts) for noise levels times (S) (c_noise values); normed_fourier, when given,
    // receives LN(cos(...)) (S, F).
    Tensor forward(const std::vector<float>& times, const Tensor& single_embedded,
                   Tensor* normed_fourier = nullptr) const;
};

// EDM preconditioning of one noise level sigma (boltz computes it in fp32).
struct Precondition {
    float c_skip, c_out, c_in, c_noise;
    static Precondition of(float sigma, float sigma_data);
};

// The atom-level halves of the score model (the atom attention encoder and decoder), provided by
// their own module: encode(r (S, A, 3) = c_in * x_noisy) -> a (S, N, 2ts) and the skip state;
// decode(a (S, N, 2ts) after the token stage, skip state) -> r_update (S, A, 3).
struct AtomStages {
    std::function<Tensor(const Tensor& r, Tensor& q_skip)> encode;
    std::function<Tensor(const Tensor& a, const Tensor& q_skip)> decode;
};

// What the score model reuses across every call of one sampler run.
struct ScoreContext {
    Tensor single_embedded;  // (N, 2ts) SingleConditioning::embed_single
    nn::DitBias token_bias;  // token_transformer.prepare(token_trans_bias, token_pad_mask)
};

struct DiffusionModule {
    SingleConditioning single_conditioner;
    nn::LayerNorm s_to_a_norm;  // s_to_a_linear.0
    nn::Linear s_to_a;          // s_to_a_linear.1 (2ts, 2ts), no bias
    nn::DiffusionTransformer token_transformer;
    nn::LayerNorm a_norm;
    float sigma_data = 16.0f;
    // prefix: "structure_module.score_model"; dims from cfg (token_s, dim_fourier,
    // token_transformer_depth/heads, conditioning_transition_layers, sigma_data).
    static DiffusionModule load(const io::ModelDir& m, const std::string& prefix,
                                const Config& cfg);
    // s_trunk, s_inputs (N, ts); token_trans_bias (N, N, depth * heads); token_pad_mask (N).
    ScoreContext prepare(const Tensor& s_trunk, const Tensor& s_inputs,
                         const Tensor& token_trans_bias, const Tensor& token_pad_mask) const;
    // The token stage: a_norm(token_transformer(a + s_to_a(LN(s)), s)); a, s (S, N, 2ts).
    Tensor token_stage(const Tensor& a, const Tensor& s, const ScoreContext& ctx) const;
    // One denoiser call (preconditioned): x_noisy (S, A, 3) at noise level sigma (the same for
    // every sample, as boltz's sampler uses it) -> denoised (S, A, 3) =
    // c_skip * x_noisy + c_out * network(c_in * x_noisy, c_noise).
    // tap, when set, sees "single.s", "single.fourier", "r_noisy", "enc.a", "a_norm",
    // "r_update".
    Tensor denoise(const Tensor& x_noisy, float sigma, const ScoreContext& ctx,
                   const AtomStages& atoms,
                   const std::function<void(const std::string&, const Tensor&)>& tap = {}) const;
};

// The sampler's settings from the config (boltz 2.2's Boltz2DiffusionParams) and boltz's
// Feynman-Kac steering constants (BoltzSteeringParams: lambda 4, every 3 steps; particles 1,
// steering off until a run asks for it): `steps` schedule entries, `samples` per target.
nn::SamplerParams sampler_params(const Config& cfg, int64_t steps, int64_t samples,
                                 int64_t max_parallel_samples);

}  // namespace bioinfer::boltz2
