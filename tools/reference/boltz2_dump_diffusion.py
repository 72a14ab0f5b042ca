"""Fixture part `diffusion`: Boltz-2's score model, EDM preconditioning and sampler.

Runs the model's own predict forward (recycling 1, 6 sampling steps, 2 samples, both in one
denoiser batch) and records, from inside AtomDiffusion.sample:
  diffusion.cond.*      what the sampler was handed: the diffusion conditioning's q, c and
                        token_trans_bias (s_trunk and s_inputs are part `trunk`'s trunk.s and
                        trunk.s_inputs; atom_enc_bias / atom_dec_bias, the largest tensors of a
                        case, are not stored: the tests compute them from the conditioning and
                        check them through the atom transformer layers they feed)
  diffusion.sample.*    every random draw (x0 = sigma0 * randn, per step the augmentation
                        quaternions randn(n, 4) and translations randn(n, 1, 3), the eps noise
                        randn), and per step x after augmentation, t_hat, x_noisy, x_denoised,
                        x_noisy aligned onto x_denoised (the final coordinates are part
                        `e2e`'s e2e.sample_atom_coords, the same run's)
  diffusion.call.*      one denoiser call (step CALL): its inputs and output, the single
                        conditioning, and each atom/token transformer's inputs and per-layer
                        outputs. Stored once: a transformer's output is its last layer's
                        (<tag>.layer<depth-1>), the encoder's q_skip that of enc; the token
                        transformer's s is single.s, the decoder's c is enc.in_c; masks are
                        the features'.
"""
from __future__ import annotations

import torch

CALL = 1  # which denoiser call (sampling step) to dump module by module


def dump(model, feats, case):
    import boltz.model.modules.diffusionv2 as dv2

    sm = model.structure_module
    score = sm.score_model
    out: dict[str, torch.Tensor] = {}
    state = {"call": -1, "draws": []}

    real_randn = torch.randn

    def logged_randn(*args, **kwargs):
        t = real_randn(*args, **kwargs)
        state["draws"].append(t.detach().clone())
        return t

    steps: dict[str, list] = {k: [] for k in ("x_aug", "t_hat", "noisy", "denoised", "aligned")}

    real_pnf = sm.preconditioned_network_forward

    def pnf(noised_atom_coords, sigma, network_condition_kwargs):
        state["call"] += 1
        steps["noisy"].append(noised_atom_coords.detach().clone())
        steps["t_hat"].append(torch.tensor(float(sigma)))
        hooks = []
        if state["call"] == CALL:
            hooks = install_call_hooks(score, out)
        try:
            den = real_pnf(noised_atom_coords, sigma, network_condition_kwargs)
        finally:
            for h in hooks:
                h.remove()
        if state["call"] == CALL:
            out["diffusion.call.x_noisy"] = noised_atom_coords
            out["diffusion.call.sigma"] = torch.tensor([float(sigma)])
            out["diffusion.call.denoised"] = den
        steps["denoised"].append(den.detach().clone())
        return den

    real_align = dv2.weighted_rigid_align

    def align(true_coords, pred_coords, weights, mask):
        r = real_align(true_coords, pred_coords, weights, mask)
        steps["aligned"].append(r.detach().clone())
        return r

    real_sample = sm.sample

    def sample(**kwargs):
        cond = kwargs["diffusion_conditioning"]
        for k in ("q", "c", "token_trans_bias"):
            out[f"diffusion.cond.{k}"] = cond[k]
        torch.randn = logged_randn
        try:
            res = real_sample(**kwargs)
        finally:
            torch.randn = real_randn
        return res

    sm.preconditioned_network_forward = pnf
    sm.sample = sample
    dv2.weighted_rigid_align = align
    try:
        torch.manual_seed(1234)
        model(feats, recycling_steps=1, num_sampling_steps=6, diffusion_samples=2,
              max_parallel_samples=2)
    finally:
        del sm.preconditioned_network_forward
        del sm.sample
        dv2.weighted_rigid_align = real_align

    draws = state["draws"]
    n_steps = len(steps["noisy"])
    assert len(draws) == 1 + 3 * n_steps, f"{len(draws)} draws for {n_steps} steps"
    x0 = draws[0]
    out["diffusion.sample.x0_randn"] = x0
    out["diffusion.sample.quat_randn"] = torch.stack([draws[1 + 3 * i] for i in range(n_steps)])
    out["diffusion.sample.trans_randn"] = torch.stack([draws[2 + 3 * i] for i in range(n_steps)])
    out["diffusion.sample.eps_randn"] = torch.stack([draws[3 + 3 * i] for i in range(n_steps)])
    out["diffusion.sample.t_hat"] = torch.stack(steps["t_hat"])
    out["diffusion.sample.noisy"] = torch.stack(steps["noisy"])
    out["diffusion.sample.denoised"] = torch.stack(steps["denoised"])
    out["diffusion.sample.aligned"] = torch.stack(steps["aligned"])
    # stored once (see the module docstring): drop the copies after checking they are copies
    copies = {"diffusion.call.tok.in_s": "diffusion.call.single.s",
              "diffusion.call.dec.in_c": "diffusion.call.enc.in_c",
              "diffusion.call.enc.q": "diffusion.call.enc.out"}
    for tag in ("enc", "tok", "dec"):
        last = max(int(k[len(f"diffusion.call.{tag}.layer"):]) for k in out
                   if k.startswith(f"diffusion.call.{tag}.layer"))
        copies[f"diffusion.call.{tag}.out"] = f"diffusion.call.{tag}.layer{last}"
    for k in ("enc.q", "tok.in_s", "dec.in_c", "enc.out", "tok.out", "dec.out"):
        k = "diffusion.call." + k
        assert torch.equal(out[k].flatten(), out[copies[k]].flatten()), k
        del out[k]
    for tag in ("enc", "tok", "dec"):
        del out[f"diffusion.call.{tag}.in_mask"]
    return out


def install_call_hooks(score, out):
    """Forward hooks that record one denoiser call, module by module."""
    hooks = []

    def keep(name, t):
        out[name] = t.detach().clone()

    def on_score(mod, args, kwargs, res):
        keep("diffusion.call.r_noisy", kwargs["r_noisy"])
        keep("diffusion.call.times", kwargs["times"])
        keep("diffusion.call.r_update", res)

    def on_single(mod, args, kwargs, res):
        keep("diffusion.call.single.s", res[0])
        keep("diffusion.call.single.fourier", res[1])

    def on_encoder(mod, args, kwargs, res):
        a, q_skip, c_skip, _ = res
        keep("diffusion.call.enc.a", a)
        keep("diffusion.call.enc.q", q_skip)

    def transformer_hooks(mod, tag):
        def on_in(m, args, kwargs):
            if args:
                keep(f"diffusion.call.{tag}.in_a", args[0])
            for k in ("q", "c", "a", "s", "mask"):
                if k in kwargs and kwargs[k] is not None:
                    keep(f"diffusion.call.{tag}.in_{k}", kwargs[k])

        def on_out(m, args, kwargs, res):
            keep(f"diffusion.call.{tag}.out", res)

        hooks.append(mod.register_forward_pre_hook(on_in, with_kwargs=True))
        hooks.append(mod.register_forward_hook(on_out, with_kwargs=True))
        layers = mod.diffusion_transformer.layers if hasattr(mod, "diffusion_transformer") else mod.layers
        for i, layer in enumerate(layers):
            def on_layer(m, args, kwargs, res, i=i):
                keep(f"diffusion.call.{tag}.layer{i}", res)
            hooks.append(layer.register_forward_hook(on_layer, with_kwargs=True))

    hooks.append(score.register_forward_hook(on_score, with_kwargs=True))
    hooks.append(score.single_conditioner.register_forward_hook(on_single, with_kwargs=True))
    hooks.append(score.atom_attention_encoder.register_forward_hook(on_encoder, with_kwargs=True))
    transformer_hooks(score.atom_attention_encoder.atom_encoder, "enc")
    transformer_hooks(score.token_transformer, "tok")
    transformer_hooks(score.atom_attention_decoder.atom_decoder, "dec")
    hooks.append(score.a_norm.register_forward_hook(
        lambda m, a, r: keep("diffusion.call.a_norm", r)))
    return hooks
