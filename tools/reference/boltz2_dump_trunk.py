"""Fixture part `trunk`: Boltz-2's trunk as the reference's own forward computes it (recycling_steps=1,
so two passes), captured with hooks: s_inputs, the pieces of z_init, each pass's s/z around the
template, MSA and pairformer modules, the MSA layers' and pairformer blocks' outputs in the first and
last pass (with the first MSA layer's and first pairformer block's sub-modules' outputs), the
trunk's final s and z, and the distogram and b-factor logits.

Names (batch dimension kept as the reference has it):
  trunk.s_inputs, trunk.s_init, trunk.z_init_1, trunk.z_init_2, trunk.relpos, trunk.token_bonds,
  trunk.token_bonds_type, trunk.contact_conditioning (z_init is the sum of the six pair terms)
  trunk.pass<p>.s / .z                  s, z after recycling (the pass's start)
  trunk.pass<p>.template_absmax         max |template module output| (0 without templates:
                                        z into the MSA module is then trunk.pass<p>.z)
  trunk.pass<p>.template_out            the template module's output, with templates (z into the
                                        MSA module is trunk.pass<p>.z + this)
  trunk.pass<p>.msa_out                 the MSA module's output (z into the pairformer is
                                        trunk.pass<p>.z + this)
  trunk.pass0.msa.layer<k>.z / .m       each MSA layer's outputs (first pass)
  trunk.pass<p>.pf.block<k>.s / .z      each pairformer block's outputs (first and last pass)
  trunk.pass0.msa.m0                    the MSA stack's input m (after msa_proj + s_proj)
  trunk.pass0.msa.l0.<sub>.out          the first MSA layer's sub-modules' outputs (first pass):
      pair_weighted_averaging, msa_transition, outer_product_mean; each one's input follows from
      the layer's input and the previous updates (all residual)
  trunk.pass0.pf.b0.<sub>.out           the first pairformer block's sub-modules' outputs (first
      pass): tri_mul_out, tri_mul_in, tri_att_start, tri_att_end, transition_z, attention,
      transition_s (updates applied in that order; attention sees LN(s))
  trunk.s, trunk.z, trunk.pdistogram, trunk.pbfactor
Inputs without constraints, cyclic chains or homomers leave branches of the pair input terms
unused, so those modules are also called directly on variants of the case's features:
  trunk.variant.contact_conditioning / .contact_threshold / .contact_out   random pair classes
      (all five) and thresholds in [4, 20] A through the trunk's ContactConditioning
  trunk.variant.cyclic_period / .relpos_cyclic   chain of token 0 cyclic with its length
  trunk.variant.entity_id / .sym_id / .relpos_homomer   every chain one entity, sym_id = asym_id
Inputs that follow from stored tensors by the residual adds are left out to keep fixtures small.
"""
from __future__ import annotations

import torch


def run_forward(model, feats: dict, hooks: list) -> dict:
    """model(feats) with recycling_steps=1, 2 sampling steps, 2 samples; hooks are
    (module, kind, fn) with kind 'pre' (with kwargs) or 'post'."""
    handles = []
    for mod, kind, fn in hooks:
        if kind == "pre":
            handles.append(mod.register_forward_pre_hook(fn, with_kwargs=True))
        else:
            handles.append(mod.register_forward_hook(fn, with_kwargs=True))
    try:
        torch.manual_seed(0)
        with torch.no_grad():
            out = model(dict(feats), recycling_steps=1, num_sampling_steps=2,
                        diffusion_samples=2)
    finally:
        for h in handles:
            h.remove()
    return out


def dump(model, feats: dict, case: str) -> dict:
    out: dict[str, torch.Tensor] = {}
    state = {"pass": -1}
    n_pass = 2
    last = n_pass - 1

    def put(name, t):
        out["trunk." + name] = t.detach().clone()

    def out_hook(name):
        def fn(mod, args, kwargs, result):
            put(name, result)
        return fn

    def pass_pre(mod, args, kwargs):
        state["pass"] += 1

    hooks = [(model.input_embedder, "post", out_hook("s_inputs")),
             (model.s_init, "post", out_hook("s_init")),
             (model.z_init_1, "post", out_hook("z_init_1")),
             (model.z_init_2, "post", out_hook("z_init_2")),
             (model.rel_pos, "post", out_hook("relpos")),
             (model.token_bonds, "post", out_hook("token_bonds")),
             (model.token_bonds_type, "post", out_hook("token_bonds_type")),
             (model.contact_conditioning, "post", out_hook("contact_conditioning")),
             (model.distogram_module, "post", out_hook("pdistogram")),
             (model.bfactor_module, "post", out_hook("pbfactor"))]

    # The template module is the first thing each pass runs on z: count passes there.
    def template_pre(mod, args, kwargs):
        pass_pre(mod, args, kwargs)
        put(f"pass{state['pass']}.z", args[0])

    def template_post(mod, args, kwargs, result):
        put(f"pass{state['pass']}.template_absmax", result.abs().max().reshape(1))
        if feats["template_mask"].any():
            put(f"pass{state['pass']}.template_out", result)

    hooks += [(model.template_module, "pre", template_pre),
              (model.template_module, "post", template_post)]

    def msa_post(mod, args, kwargs, result):
        put(f"pass{state['pass']}.msa_out", result)

    hooks += [(model.msa_module, "post", msa_post)]

    def pf_pre(mod, args, kwargs):
        put(f"pass{state['pass']}.s", args[0])

    hooks.append((model.pairformer_module, "pre", pf_pre))

    for k, layer in enumerate(model.msa_module.layers):
        def msa_layer_post(mod, args, kwargs, result, k=k):
            p = state["pass"]
            if p == 0:
                put(f"pass{p}.msa.layer{k}.z", result[0])
                put(f"pass{p}.msa.layer{k}.m", result[1])

        hooks.append((layer, "post", msa_layer_post))

    def msa_l0_pre(mod, args, kwargs):
        if state["pass"] == 0:
            put("pass0.msa.m0", args[1])

    hooks.append((model.msa_module.layers[0], "pre", msa_l0_pre))

    def sub_hooks(prefix, module, subs):
        for sub in subs:
            m = getattr(module, sub)

            def post(mod, args, kwargs, result, sub=sub):
                if state["pass"] == 0:
                    put(f"{prefix}.{sub}.out", result)

            hooks.append((m, "post", post))

    l0 = model.msa_module.layers[0]
    sub_hooks("pass0.msa.l0", l0, ["pair_weighted_averaging", "msa_transition",
                                   "outer_product_mean"])
    b0 = model.pairformer_module.layers[0]
    sub_hooks("pass0.pf.b0", b0, ["tri_mul_out", "tri_mul_in", "tri_att_start", "tri_att_end",
                                  "transition_z", "attention", "transition_s"])

    for k, layer in enumerate(model.pairformer_module.layers):
        def pf_post(mod, args, kwargs, result, k=k):
            p = state["pass"]
            if p in (0, last):
                put(f"pass{p}.pf.block{k}.s", result[0])
                put(f"pass{p}.pf.block{k}.z", result[1])

        hooks.append((layer, "post", pf_post))

    res = run_forward(model, feats, hooks)
    assert state["pass"] == last, state
    put("s", res["s"])
    put("z", res["z"])
    variants(model, feats, put)
    return out


def variants(model, feats: dict, put) -> None:
    g = torch.Generator().manual_seed(1)
    n = feats["contact_conditioning"].shape[1]
    classes = torch.nn.functional.one_hot(torch.randint(0, 5, (1, n, n), generator=g), 5).float()
    threshold = 4.0 + 16.0 * torch.rand((1, n, n), generator=g)
    put("variant.contact_conditioning", classes)
    put("variant.contact_threshold", threshold)
    put("variant.contact_out", model.contact_conditioning(
        {"contact_conditioning": classes, "contact_threshold": threshold}))

    asym = feats["asym_id"]
    cyclic = torch.where(asym == asym[0, 0], (asym == asym[0, 0]).sum().float(),
                         torch.zeros_like(asym, dtype=torch.float32))
    put("variant.cyclic_period", cyclic)
    put("variant.relpos_cyclic", model.rel_pos(dict(feats, cyclic_period=cyclic)))

    entity = torch.zeros_like(feats["entity_id"])
    sym = feats["asym_id"].clone()
    put("variant.entity_id", entity)
    put("variant.sym_id", sym)
    put("variant.relpos_homomer", model.rel_pos(dict(feats, entity_id=entity, sym_id=sym)))
