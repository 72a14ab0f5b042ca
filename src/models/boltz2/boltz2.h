// Boltz-2 at inference, composed as boltz 2.2.1's Boltz2.forward runs it: input embedder, trunk
// (recycling, MSA module, pairformer), diffusion conditioning, the sampler over the score model,
// and the confidence module, on features from the featurizer.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/model_dir.h"
#include "models/boltz2/affinity.h"
#include "models/boltz2/atom_attention.h"
#include "models/boltz2/confidence.h"
#include "models/boltz2/config.h"
#include "models/boltz2/diffusion.h"
#include "models/boltz2/embedder.h"
#include "models/boltz2/features.h"
#include "models/boltz2/trunk.h"
#include "nn/edm_sampler.h"

namespace bioinfer::boltz2 {

// boltz predict's defaults (2.2): --recycling_steps 3, --sampling_steps 200,
// --diffusion_samples 1, --max_parallel_samples 5, --step_scale 1.5.
struct RunOptions {
    int recycling_steps = 3;
    int sampling_steps = 200;
    int diffusion_samples = 1;
    int max_parallel_samples = 5;
    double step_scale = 1.5;
    uint64_t seed = 0;              // the sampler's draws (SeededNormal) when rng is null
    nn::NormalSource* rng = nullptr;  // tests replay the reference's draws
    bool confidence = true;         // run the confidence module (when the checkpoint has one)
    bool steering = true;           // forced pocket/contact constraints steer the sampler
    // boltz's --use_potentials: the physical potentials guide the sampler too, and Feynman-Kac
    // steering runs 3 particles per sample, resampled by their potentials' energies
    bool use_potentials = false;
    // boltz's --subsample_msa: the MSA rows each trunk pass keeps (rows 0: every row)
    MsaSubsample msa_subsample;
    // Progress: (stage, step, steps), e.g. ("trunk pass", 0, 4), ("diffusion step", 17, 200).
    std::function<void(const std::string&, int, int)> progress;
    Tap tap;                        // named intermediates: "s_inputs", "trunk.<...>", "coords"
};

struct RunOutput {
    Tensor s_inputs;     // (N, token_s)
    TrunkOutput trunk;   // s, z, distogram, b-factor logits (relpos released after the conditioning)
    Tensor coords;       // (S, A, 3) sampled atom coordinates (padded atoms included)
    bool has_confidence = false;
    ConfidenceOutput confidence;
    // boltz's ranking score per sample: (4 complex_plddt + (iptm, or ptm when every iptm is 0)) / 5
    std::vector<double> confidence_score;
};

// boltz predict's affinity stage: its own trunk (5 recycling steps), 5 samples, no steering.
RunOptions affinity_run_options();

struct AffinityResult {
    // The ensemble's (the single module's without an ensemble): affinity_pred_value (with the
    // molecular-weight correction when asked) and the mean of the modules' binder probabilities.
    double value = 0, probability = 0;
    // Per module (affinity_pred_value<k>, affinity_probability_binary<k>), uncorrected.
    std::vector<double> module_values, module_probabilities;
    int64_t best_sample = 0;  // the sample the modules read: the highest ipTM, lowest index on ties
    RunOutput run;
};

class Boltz2Model {
public:
    static std::unique_ptr<Boltz2Model> load(const io::ModelDir& m);
    const Config& config() const { return cfg_; }
    RunOutput run(const Features& f, const RunOptions& opts = {}) const;

    // Affinity checkpoints (boltz2_aff.ckpt) hold affinity modules: affinity_module1 and 2 (an
    // ensemble) or affinity_module.
    bool has_affinity() const { return !affinity_.empty(); }
    // The affinity stage on features featurised for it (FeaturizeOptions::affinity): run() with
    // `opts` (steering off), confidence on every sample, then each affinity module on the trunk's
    // pair restricted to the binder's pairs, the input embedding with the affinity profile and
    // the best sample's coordinates. `mw` (the binder's heavy-atom molecular weight) applies
    // boltz's correction to the ensemble value when given.
    AffinityResult predict_affinity(const Features& f, const RunOptions& opts,
                                    const double* mw = nullptr) const;

private:
    Config cfg_;
    InputEmbedder embedder_;
    Trunk trunk_;
    DiffusionConditioning conditioning_;
    DiffusionModule score_;
    AtomAttentionEncoder encoder_;
    AtomAttentionDecoder decoder_;
    bool has_confidence_ = false;
    ConfidenceModule confidence_;
    std::vector<AffinityModule> affinity_;
};

}  // namespace bioinfer::boltz2
