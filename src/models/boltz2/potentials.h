// Boltz-2's inference-time steering of the sampler's denoised coordinates (boltz's
// contact_guidance_update, on by default) by forced pocket and contact constraints
// (ContactPotential: every forced constraint is a group of atom pairs with an upper distance
// bound, and the gradient of a soft-min over each group's flat-bottom energies pulls the closest
// pair in) and by forced templates (TemplateReferencePotential: each token's representative atom
// is pulled towards the template's CB rigidly aligned onto the prediction, beyond a threshold).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "models/boltz2/features.h"

namespace bioinfer::boltz2 {

struct ContactTerms {
    std::vector<int64_t> i, j;     // atom pairs (indices into the padded atoms)
    std::vector<int64_t> group;    // each pair's union group: one per pocket token or contact
    std::vector<float> threshold;  // each pair's upper bound (Angstrom)
    int64_t groups = 0;
    bool empty() const { return i.empty(); }

    // From the features boltz names contact_pair_index (2, E), contact_union_index (E) and
    // contact_thresholds (E); empty when they are absent or hold no pair.
    static ContactTerms from(const Features& f);
};

// boltz's schedules at steering time t = 1 - step / steps: the guidance weight (1 above 0.75,
// 0.5 above 0.25, else 0) and the union soft-min's lambda (8 at t = 0 falling to 0 at t = 1).
double contact_guidance_weight(double t);
double contact_union_lambda(double t);

// d energy / d coordinates of the contact potential at `x` (A, 3) for one sample, added into
// `grad` (A, 3) times `scale`.
void contact_gradient(const ContactTerms& c, const float* x, double t, float scale, float* grad);

// The forced templates (template_force) of the features: per template its CB coordinates and mask
// and threshold; each token's representative atom and each atom's token (padding atoms: token 0).
struct TemplateTerms {
    int64_t tokens = 0;
    std::vector<Tensor> ref;   // (N, 3) per forced template
    std::vector<Tensor> mask;  // (N) per forced template
    std::vector<float> threshold;
    std::vector<int64_t> rep_atom, atom_token;
    bool empty() const { return ref.empty(); }
    static TemplateTerms from(const Features& f);
};

// The template potential's energy per sample at `x` (S, A, 3); with grad, d energy / d
// coordinates added into `grad` (S, A, 3) times `scale`. Per sample and forced template f, r[f, n]
// = P[n] - aligned_f[n] with P the representative atoms and aligned_f the template's CB
// weighted-rigid-aligned onto P over its mask; the energy is |r| - threshold beyond the threshold.
// As the reference's tiling forms it, token n's gradient is (sum over f of dE[f, n]) times the
// first forced template's masked unit vector r_hat[0, n], and every atom of the token takes it.
std::vector<double> template_potential(const TemplateTerms& t, const Tensor& x, float scale = 1.0f,
                                       Tensor* grad = nullptr);

// The contact potential's energy at `x` (A, 3) for one sample: per union group the soft-min
// weighted flat-bottom energies, summed.
double contact_energy(const ContactTerms& c, const float* x, double t);

// ---- the physical potentials of --use_potentials (boltz's get_potentials with fk_steering and
// physical_guidance_update) --------------------------------------------------------------------

// A flat-bottom potential over a geometric variable of `arity` atoms per term: energy
// max(lower - v, 0) + max(v - upper, 0) (k = 1), summed over terms; bounds are +-inf when absent.
// Distance: v = |x_0 - x_1|. Dihedral: boltz's signed dihedral of (x_0, x_1, x_2, x_3) (acos of the
// normals' cosine, sign from r_kj . (n_ijk x n_jkl)) with its closed-form gradient; AbsDihedral:
// its magnitude, the gradient negated where the angle is negative.
struct FlatBottomTerms {
    enum class Variable { Distance, Dihedral, AbsDihedral };
    Variable variable = Variable::Distance;
    int arity = 2;
    std::vector<int64_t> index;  // arity x E, row k at [k * E, (k + 1) * E)
    std::vector<float> lower, upper;
    int64_t size() const { return int64_t(lower.size()); }
    // Energy at points x (P, 3); with grad, dE/dx added into grad (P, 3) times `scale`.
    double evaluate(const float* x, float* grad = nullptr, float scale = 1.0f) const;
};

// The seven physical potentials, built from the features (the chain centre of mass potential's
// buffer follows the steering time t, given when evaluating): SymmetricChainCOM (copies' centres of
// mass, through boltz's scatter mean that counts its zero start, at least buffer apart), VDWOverlap
// (atoms of different unconnected chains with more than one atom each, at least 0.775 of their vdW
// radii sum apart), Connections (covalently connected atoms of different chains within 2 A),
// PoseBusters (RDKit's distance bounds with bond/angle/clash buffers and vdW cutoffs), ChiralAtom
// (signed dihedral beyond +-0.5236), StereoBond (|dihedral| within 0.5236 of 0 or pi), PlanarBond
// (two impropers per planar double bond within 0.2618).
struct PhysicalTerms {
    FlatBottomTerms com, connections, posebusters, chiral, stereo, planar;
    std::vector<int64_t> atom_chain;  // per atom (padding: chain 0)
    std::vector<char> atom_real;
    std::vector<float> vdw_radius;  // per atom (boltz's const.vdw_radii by element)
    std::vector<char> vdw_pair;     // chains x chains: whether the vdW overlap term applies
    int64_t chains = 0;
    static PhysicalTerms from(const Features& f);
    // The energy of one potential ("com", "vdw", ...) at x (A, 3) and steering time t; with grad,
    // d energy / dx added into grad (A, 3) times scale (the centre-of-mass gradient reaches every
    // atom of the chain).
    double evaluate(const std::string& potential, const float* x, double t, float* grad = nullptr,
                    float scale = 1.0f) const;
};

struct SteeringTerms {
    ContactTerms contacts;
    TemplateTerms templates;
    bool physical = false;  // --use_potentials: the physical potentials guide and resample too
    PhysicalTerms potentials;
    bool empty() const { return contacts.empty() && templates.empty() && !physical; }
    static SteeringTerms from(const Features& f, bool physical = false);
};

// The resampling energy of each sample of `denoised` (S, A, 3) at steering time t: boltz's sum of
// resampling_weight x energy over its potentials (the physical ones with `physical`, then the
// contact and template potentials), in fp32.
std::vector<double> steering_energy(const SteeringTerms& terms, double t, const Tensor& denoised);

// The guidance a step applies to the denoised coordinates (S, A, 3) at steering time t: 20
// gradient steps on a running update; at each, the gradients at the denoised coordinates plus the
// update so far of every potential whose interval divides the step (with `physical`: centre of
// mass 0.5 every 4th, vdW 0.125 every 5th once t <= 0.4, connections 0.15, PoseBusters 0.01,
// chirality 0.1, stereo bonds 0.05, planar bonds 0.05 every step; then contacts every 4th times
// their weight schedule and templates 0.1 every 2nd) are summed and subtracted; then
// denoised += update.
void apply_guidance(const SteeringTerms& terms, double t, Tensor& denoised);

}  // namespace bioinfer::boltz2
