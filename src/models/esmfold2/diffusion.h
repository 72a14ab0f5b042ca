// ESMFold2's denoiser (transformers' EsmFold2DiffusionModule) and its sampler run: the
// step-invariant conditioning (the pair half LN(cat(z_trunk, relpos)) -> two SwiGLU transitions and
// each token layer's pair bias; s_inputs projected; the atom encoder's base embedding, rotary
// tables and windows), then per call the single conditioning (Fourier noise embedding, two
// transitions), the atom encoder on the scaled coordinates, the token DiT (AdaLN-conditioned
// pair-biased attention and SwiGLU, each gated by the single stream), the atom decoder and the
// EDM output. The sampler is the family's (nn::sample, as Boltz-2 runs it) with masked centering
// and the schedule capped at inference_sigma_cap.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "models/esmfold2/atom_stack.h"
#include "models/esmfold2/config.h"
#include "models/esmfold2/trunk.h"
#include "nn/dit.h"
#include "nn/edm_sampler.h"

namespace bioinfer::esmfold2 {

struct DiffusionModule {
    Config cfg;
    AtomStack encoder, decoder;
    nn::LayerNorm pair_in_norm;
    nn::Linear pair_proj;
    nn::ResidueMlp pair_tr0, pair_tr1;
    nn::LayerNorm single_in_norm;
    nn::Linear single_proj;
    std::vector<float> fourier_w, fourier_b;
    nn::LayerNorm noise_norm;
    nn::Linear noise_proj;
    nn::ResidueMlp single_tr0, single_tr1;
    nn::Linear coords_linear;  // the first 3 of its 6 input columns (the other 3 see zeros)
    nn::Linear single_to_token;
    nn::LayerNorm single_step_norm, token_norm;
    nn::DiffusionTransformer tokens;
    std::vector<nn::LayerNorm> bias_norms;
    std::vector<nn::Linear> bias_projs;
    nn::Linear token_to_atom;
    nn::LayerNorm out_norm;
    nn::Linear out_linear;

    static DiffusionModule load(const io::ModelDir& m, const Config& cfg);

    // What every denoiser call of one target reuses.
    struct Conditioning {
        int64_t tokens = 0, atoms = 0;
        Tensor embeds;  // (A, c_atom) the atom encoder's base embedding (the conditioning)
        AtomContext enc, dec;
        Tensor pair;  // (N, N, C) the conditioning's pair half
        nn::DitBias bias;
        Tensor single_proj;  // (N, c_tok)
        Tensor atom_token;   // (A) I32: each atom's token (padding: token 0)
    };
    Conditioning prepare(const Inputs& in, const TrunkOutput& trunk) const;
    // x_noisy (S, A, 3) at noise level sigma -> denoised (S, A, 3). Taps (first call of a run in
    // tests): diff.call.single (S, N, c), atom_tokens, tokens, update.
    Tensor denoise(const Conditioning& c, const Tensor& x_noisy, float sigma,
                   const Tap& tap = {}) const;

  private:
    void layer_norm_in_place(Tensor& x) const;  // pair_in_norm
};

// The sampler's settings from the config: `steps` (< 0: inference_num_steps) Karras entries,
// capped; `samples` per target.
nn::SamplerParams sampler_params(const Config& cfg, int64_t steps, int64_t samples,
                                 int64_t max_parallel_samples);

}  // namespace bioinfer::esmfold2
