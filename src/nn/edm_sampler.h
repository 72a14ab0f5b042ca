// The EDM reverse-diffusion sampler of AlphaFold-3-family structure models, as Boltz-2 writes it
// (boltz/model/modules/diffusionv2.py AtomDiffusion.sample, inference): the EDM schedule, churn
// (gamma), per-step random rotation and translation after centering (on the mean of every atom,
// padded ones included, or of the masked atoms), noise, the denoiser in chunks of samples, Kabsch
// alignment of the noisy onto the denoised coordinates, and the Euler step; the caller's steering
// (guidance, Feynman-Kac resampling) when it gives one. Boltz-2 and ESMFold2 each fill
// SamplerParams from their config.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "bioinfer/tensor.h"

namespace bioinfer::nn {

// Standard normal draws, in the order the sampler asks for them (the reference's torch.randn
// calls): x0 (S, A, 3); per step quaternions (S, 4), translations (S, 1, 3), noise (S, A, 3).
class NormalSource {
public:
    virtual ~NormalSource() = default;
    virtual Tensor normal(const Shape& shape) = 0;
    // torch.multinomial(weights (G, K), n, replacement=True): n indices in [0, K) per row.
    virtual std::vector<int64_t> multinomial(const std::vector<float>& weights, int64_t groups,
                                             int64_t k, int64_t n) = 0;
};

// Production: a seeded std::mt19937_64 with std::normal_distribution<float> (bioinfer's own seed
// semantics; it does not reproduce torch's stream).
class SeededNormal : public NormalSource {
public:
    explicit SeededNormal(uint64_t seed) : gen_(seed) {}
    Tensor normal(const Shape& shape) override;
    std::vector<int64_t> multinomial(const std::vector<float>& weights, int64_t groups, int64_t k,
                                     int64_t n) override;

  private:
    std::mt19937_64 gen_;
    std::normal_distribution<float> dist_{0.0f, 1.0f};
};

// Replays recorded draws in order (parity tests replay the reference's); a shape mismatch or
// running out is an error. Multinomial draws replay `picks` ((G, n) each) and keep the weights
// they were asked with (tests compare those with the reference's).
class ReplayNormal : public NormalSource {
public:
  explicit ReplayNormal(std::vector<Tensor> draws, std::vector<Tensor> picks = {})
      : draws_(std::move(draws)), picks_(std::move(picks)) {}
  Tensor normal(const Shape& shape) override;
  std::vector<int64_t> multinomial(const std::vector<float>& weights, int64_t groups, int64_t k,
                                   int64_t n) override;
  size_t used() const { return next_; }
  const std::vector<std::vector<float>>& weights_seen() const { return weights_; }

private:
  std::vector<Tensor> draws_, picks_;
  size_t next_ = 0, next_pick_ = 0;
  std::vector<std::vector<float>> weights_;
};

// The sampler's settings, a plain struct each model fills from its config
// (boltz2::sampler_params, esmfold2::sampler_params): no model's values stand in as defaults.
struct SamplerParams {
    int64_t steps = 0;                 // schedule entries before any cap (at least 2)
    int64_t samples = 1;               // diffusion samples (boltz's multiplicity)
    int64_t max_parallel_samples = 1;  // samples per denoiser call
    double sigma_min = 0, sigma_max = 0, sigma_data = 0, rho = 0;  // the schedule
    double gamma_0 = 0, gamma_min = 0, noise_scale = 0, step_scale = 0;  // churn, noise, step
    bool alignment_reverse_diff = false;  // align the noisy onto the denoised coordinates
    // Feynman-Kac steering (boltz's fk_steering, on with --use_potentials): `samples` holds
    // fk_particles particles per sample; every fk_interval steps with noise, and at the last,
    // particles are resampled within their group by exp(fk_lambda * energy decrease) times the
    // guided / unguided transition likelihood ratio, the last keeping one per group.
    int64_t fk_particles = 1;
    double fk_lambda = 0;
    int64_t fk_interval = 0;
    // Boltz-2 centers on the mean of ALL atoms, padding included (false); true centers on the
    // mean of the masked atoms (other AF3-style samplers, ESMFold2).
    bool masked_centering = false;
    // > 0: the schedule keeps the sigmas at or below this cap and starts from the cap itself
    // (ESMFold2's inference_sigma_cap), so fewer than `steps` steps run.
    double sigma_cap = 0;
};

// sigma_k = sigma_data * (sigma_max^(1/rho) + k / (steps - 1) * (sigma_min^(1/rho) -
// sigma_max^(1/rho)))^rho for k < steps, then 0: steps + 1 values, fp32 as boltz computes them.
// With sigma_cap, those above the cap are dropped and the cap put first.
std::vector<float> sample_schedule(const SamplerParams& p);

// The denoiser: x_noisy (S', A, 3) of S' <= max_parallel_samples samples at noise level sigma
// -> denoised (S', A, 3).
using Denoiser = std::function<Tensor(const Tensor& x_noisy, float sigma)>;

// What one step saw (tests compare it with the reference's record).
struct SamplerStep {
    int64_t index;
    float t_hat;
    const Tensor& noisy;     // (S, A, 3) augmented x plus noise, the denoiser's input
    const Tensor& denoised;  // (S, A, 3) the denoiser's output (before any steering)
    const Tensor& aligned;   // (S, A, 3) noisy aligned onto denoised (noisy without alignment)
    const Tensor& next;      // (S, A, 3)
};

// Steering of a step's denoised coordinates (S, A, 3) in place (step index, denoised); boltz
// applies it at every step but the last.
using Guidance = std::function<void(int64_t step, Tensor& denoised)>;
// The resampling energy of each particle's denoised coordinates (S, A, 3) at a step.
using SteeringEnergy = std::function<std::vector<double>(int64_t step, const Tensor& denoised)>;

// Runs the sampler: atom_mask (A) atom_pad_mask; returns the coordinates (S, A, 3).
// With p.fk_particles > 1, `energy` scores particles for resampling and the result holds
// p.samples / p.fk_particles samples.
Tensor sample(const Denoiser& denoise, const Tensor& atom_mask, const SamplerParams& p,
              NormalSource& rng, const std::function<void(const SamplerStep&)>& on_step = {},
              const Guidance& guide = {}, const SteeringEnergy& energy = {});

// Rotation matrices (S, 3, 3) from quaternion draws (S, 4), as boltz's random_rotations: the
// quaternion normalised with a non-negative real part, then converted.
Tensor rotations_from_normal(const Tensor& quat_draws);

// boltz's weighted_rigid_align with weights = mask: `mobile` (S, A, 3) rigidly moved onto
// `target` (S, A, 3) minimising the masked squared distance (Kabsch, proper rotation).
Tensor rigid_align(const Tensor& mobile, const Tensor& target, const Tensor& mask);

}  // namespace bioinfer::nn
