"""Fixture part `steering`: Boltz-2's sampler as --use_potentials runs it (fk_steering and
physical_guidance_update on: 3 particles per sample, Feynman-Kac resampling every 3 steps and at
the last, the physical potentials' guidance), on the model's own predict forward (recycling 1,
6 steps, 2 samples, so 6 particles in one batch). Records every draw and what the replay needs:

  steering.x0_randn (6, A, 3), steering.quat_randn (steps, 6, 4), steering.trans_randn
  (steps, 6, 1, 3), steering.eps_randn (steps, n, A, 3): the sampler's randn draws
  steering.denoised (steps, n, A, 3)     the denoiser's output each step (before guidance)
  steering.resample_weights<k> (G, K)    the weights of the k-th resampling (torch.multinomial's
  steering.resample_draws<k> (G, n)      input) and its draws (its output)
  steering.coords (2, A, 3)              the final coordinates
"""
from __future__ import annotations

import torch


def dump(model, feats, case):
    sm = model.structure_module
    out: dict[str, torch.Tensor] = {}
    draws, multinomials, denoised = [], [], []
    real_randn, real_multinomial = torch.randn, torch.multinomial

    def logged_randn(*args, **kwargs):
        t = real_randn(*args, **kwargs)
        draws.append(t.detach().clone())
        return t

    def logged_multinomial(weights, n, replacement=False, **kwargs):
        r = real_multinomial(weights, n, replacement=replacement, **kwargs)
        multinomials.append((weights.detach().clone(), r.detach().clone()))
        return r

    real_pnf = sm.preconditioned_network_forward

    def pnf(noised_atom_coords, sigma, network_condition_kwargs):
        den = real_pnf(noised_atom_coords, sigma, network_condition_kwargs)
        denoised.append(den.detach().clone())
        return den

    saved = dict(model.steering_args)
    model.steering_args.update(fk_steering=True, physical_guidance_update=True,
                               contact_guidance_update=True, num_particles=3, fk_lambda=4.0,
                               fk_resampling_interval=3, num_gd_steps=20)
    sm.preconditioned_network_forward = pnf
    torch.randn, torch.multinomial = logged_randn, logged_multinomial
    try:
        torch.manual_seed(4321)
        with torch.no_grad():
            res = model(feats, recycling_steps=1, num_sampling_steps=6, diffusion_samples=2,
                        max_parallel_samples=6, run_confidence_sequentially=True)
    finally:
        torch.randn, torch.multinomial = real_randn, real_multinomial
        del sm.preconditioned_network_forward
        model.steering_args.clear()
        model.steering_args.update(saved)
    n_steps = len(denoised)
    sample_draws = draws[-(1 + 3 * n_steps):]  # the sampler's, after any earlier ones
    out["steering.x0_randn"] = sample_draws[0]
    out["steering.quat_randn"] = torch.stack([sample_draws[1 + 3 * i] for i in range(n_steps)])
    out["steering.trans_randn"] = torch.stack([sample_draws[2 + 3 * i] for i in range(n_steps)])
    eps = [sample_draws[3 + 3 * i] for i in range(n_steps)]
    out["steering.eps_randn"] = torch.stack(eps)
    out["steering.denoised"] = torch.stack(denoised)
    for k, (w, r) in enumerate(multinomials):
        out[f"steering.resample_weights{k}"] = w
        out[f"steering.resample_draws{k}"] = r.float()
    out["steering.coords"] = res["sample_atom_coords"].detach()
    return out
