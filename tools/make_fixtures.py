#!/usr/bin/env python3
"""Builds diffusers' own models at small configs with seeded random weights and saves
weights, inputs and outputs as safetensors fixtures, so the C++ built-in models can be
checked against diffusers on the same numbers.

    .venv/bin/python tools/make_fixtures.py [--out tests/fixtures] [--only flux_tiny]

    .venv/bin/python tools/make_fixtures.py --programs [--only flux-tiny]

    .venv/bin/python tools/make_fixtures.py --branches [--only flux-tiny]

    .venv/bin/python tools/make_fixtures.py --calls [--only qwen-image-tiny]

Program fixtures (tests/fixtures/programs/<config>/, for runtime/program): a tiny config of every
class weft has a plan or a program test for (tools/model_configs/*-tiny.json), exported by
tools/export_program.py at its first workload with batch 2 in fp32 and bf16 (program.pt2,
program_bf16.pt2), and diffusers' outputs on weft's seeded weights (diffusers_models.seeded_weights,
the same values weft-run's nn::RandomizeParameters makes, so no weights are stored) at each of
the config's workloads: inputs_<workload>.safetensors (non-tensor arguments under `weft.args`) and
outputs_<workload>.safetensors ({"output": ..., "output_1": ...}), and the same with _bf16 for
the model as from_pretrained(torch_dtype=bfloat16) loads it.

Guidance-branch fixtures (--branches, for the cfg mesh axis, issue 26): for the classes in
BRANCH_FIXTURES, diffusers' fp32 output on a batch of 3 branches at the first workload
(inputs_<workload>-b3 / outputs_<workload>-b3; with a text mask, its rows end in 2, 5 and 0 masked
tokens), next to the existing program, which a dynamic batch lets run them; and flux-tiny's program
exported at that batch (program_b3.pt2), whose workloads show `weft explain` 3 branches.

Guidance branches as forward calls of their own (--calls, a plan's guidance_parallel `calls`): for
CALLS_FIXTURES, three calls at the first workload (batch 2) on the same latents and timestep, each
with a prompt of its own -- a text of its own length (the workload's, 3 tokens fewer, 2 more) and
values, and for QwenImage a mask whose rows end in masked tokens -- as inputs_<workload>-call<i> /
outputs_<workload>-call<i>: the conditional, unconditional and a third branch a pipeline would call
apart, each diffusers' fp32 output of its own call.

Each built-in fixture folder holds config.json (the diffusers config, as save_pretrained writes it),
weights.safetensors (diffusers key names), inputs.safetensors (keyed by forward argument
name), outputs.safetensors ({"output": ...}) and modules.json (diffusers' module tree: fqn,
class name, parameter shapes, in registration order). A fixture may add further cases on the
same weights as inputs_<case>.safetensors / outputs_<case>.safetensors. Everything is fp32
and deterministic.
"""
import argparse
import copy
import json
import pathlib
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


def randomize(model, seed):
    # Default inits leave norms at exactly 1 and some layers at zero; random values everywhere
    # make a wrong parameter mapping visible in the output.
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            scale = 0.5 if p.dim() == 1 else 1.0 / max(1, p.shape[-1]) ** 0.5
            p.copy_(torch.randn(p.shape, generator=gen) * scale)


def flux_tiny():
    from diffusers import FluxTransformer2DModel

    config = dict(patch_size=1, in_channels=16, num_layers=2, num_single_layers=2, attention_head_dim=16,
                  num_attention_heads=4, joint_attention_dim=32, pooled_projection_dim=24, guidance_embeds=True,
                  axes_dims_rope=[4, 6, 6])
    model = FluxTransformer2DModel(**config).eval()
    randomize(model, 1234)
    gen = torch.Generator().manual_seed(99)
    batch, height, width, text = 2, 4, 6, 8
    rows, cols = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    img_ids = torch.stack([torch.zeros_like(rows), rows, cols], dim=-1).reshape(-1, 3).float()
    inputs = {
        "hidden_states": torch.randn(batch, height * width, 16, generator=gen),
        "encoder_hidden_states": torch.randn(batch, text, 32, generator=gen),
        "pooled_projections": torch.randn(batch, 24, generator=gen),
        "timestep": torch.tensor([0.25, 0.75]),
        "img_ids": img_ids,
        "txt_ids": torch.zeros(text, 3),
        "guidance": torch.tensor([3.5, 3.5]),
    }
    with torch.no_grad():
        output = model(**inputs, return_dict=False)[0]
    return "FluxTransformer2DModel", config, model, inputs, output


WAN_TINY = dict(patch_size=[1, 2, 2], num_attention_heads=4, attention_head_dim=16, in_channels=4, out_channels=4,
                text_dim=32, freq_dim=32, ffn_dim=128, num_layers=2, cross_attn_norm=True,
                qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=1024)


def as_loaded_in(model, dtype):
    """A copy of `model` in `dtype` as diffusers' from_pretrained(torch_dtype=dtype) leaves it:
    parameters with a dotted name component in _keep_in_fp32_modules stay fp32, and so do the
    non-persistent buffers (computed at construction, never cast). from_pretrained itself
    needs `accelerate` for that path, hence the emulation."""
    keep = set(type(model)._keep_in_fp32_modules or [])
    loaded = copy.deepcopy(model).eval()
    buffers = {name: b.clone() for name, b in loaded.named_buffers()}
    # The fp32 values themselves, not their bf16 rounding: from_pretrained reads the checkpoint's
    # fp32 tensors straight into the kept modules.
    kept = {name: p.detach().clone() for name, p in loaded.named_parameters() if keep & set(name.split("."))}
    loaded.to(dtype)
    with torch.no_grad():
        for name, p in loaded.named_parameters():
            if name in kept:
                p.data = kept[name].float()
        for name, b in buffers.items():
            module_name, _, buffer_name = name.rpartition(".")
            setattr(loaded.get_submodule(module_name), buffer_name, b)
    return loaded


def wan_tiny():
    from diffusers import WanTransformer3DModel

    config = dict(WAN_TINY)
    model = WanTransformer3DModel(**config).eval()
    randomize(model, 4321)
    gen = torch.Generator().manual_seed(77)
    # Latent (F, H, W) = (5, 4, 8) with patch (1, 2, 2): 5 x 2 x 4 = 40 tokens, distinct sizes per
    # axis (a swapped RoPE axis shows), divisible by 2 and 4 but not by 3 (uneven CP over 3 ranks).
    batch, frames, height, width, text = 2, 5, 4, 8, 7
    inputs = {
        "hidden_states": torch.randn(batch, 4, frames, height, width, generator=gen),
        "timestep": torch.tensor([250.0, 875.0]),
        "encoder_hidden_states": torch.randn(batch, text, 32, generator=gen),
    }
    with torch.no_grad():
        output = model(**inputs, return_dict=False)[0]
    # Per-token timesteps (Wan 2.2 TI2V's expand_timesteps), same weights: (B, tokens).
    tokens = frames * (height // 2) * (width // 2)
    extra_inputs = dict(inputs, timestep=torch.rand(batch, tokens, generator=gen) * 1000)
    with torch.no_grad():
        extra_output = model(**extra_inputs, return_dict=False)[0]
    extras = {"seq_timestep": (extra_inputs, extra_output)}
    # The model as from_pretrained(torch_dtype=torch.bfloat16) loads it (bf16, except the
    # _keep_in_fp32_modules parameters) on bf16-rounded inputs; inputs and output stored as
    # fp32 holding bf16 values, so a bf16 run can be compared closely.
    bf16_inputs = {k: v.to(torch.bfloat16) for k, v in inputs.items()}
    bf16_model = as_loaded_in(model, torch.bfloat16)
    with torch.no_grad():
        bf16_output = bf16_model(**bf16_inputs, return_dict=False)[0]
    extras["bf16"] = ({k: v.float() for k, v in bf16_inputs.items()}, bf16_output.float())
    return "WanTransformer3DModel", config, model, inputs, output, extras


def wan_tiny_i2v():
    from diffusers import WanTransformer3DModel

    config = dict(WAN_TINY, image_dim=24, added_kv_proj_dim=64)
    model = WanTransformer3DModel(**config).eval()
    randomize(model, 2468)
    gen = torch.Generator().manual_seed(55)
    # diffusers' I2V attention takes everything before the last 512 context tokens as image
    # tokens, so the text is 512 tokens long; 5 image tokens.
    batch, frames, height, width = 1, 3, 4, 6
    inputs = {
        "hidden_states": torch.randn(batch, 4, frames, height, width, generator=gen),
        "timestep": torch.tensor([500.0]),
        "encoder_hidden_states": torch.randn(batch, 512, 32, generator=gen),
        "encoder_hidden_states_image": torch.randn(batch, 5, 24, generator=gen),
    }
    with torch.no_grad():
        output = model(**inputs, return_dict=False)[0]
    return "WanTransformer3DModel", config, model, inputs, output, {}


def module_tree(model):
    """Every module in registration order: fqn, class name, own parameters with shapes."""
    return [{"fqn": name, "type": type(module).__name__,
             "params": [[pname, list(p.shape)] for pname, p in module.named_parameters(recurse=False)]}
            for name, module in model.named_modules()]


FIXTURES = {"flux_tiny": flux_tiny, "wan_tiny": wan_tiny, "wan_tiny_i2v": wan_tiny_i2v}


# Fixtures whose weights are written by diffusers' save_pretrained (sharded) into <name>/model.
SAVE_PRETRAINED = {"flux_tiny"}


# Program fixtures: tiny configs in tools/model_configs, the seed of their weights.
PROGRAM_FIXTURES = ["flux-tiny", "flux2-tiny", "qwen-image-tiny", "wan-tiny", "wan-tiny-i2v", "chronoedit-tiny",
                    "helios-tiny", "ltx-video-tiny", "ltx-2-tiny", "minimax-h3-tiny", "hunyuanvideo-tiny",
                    "flux-heads6-tiny"]
PROGRAM_SEED = 20261201
# Text masks of the forward arguments, given a padded variant at the first workload.
PADDED_MASKS = ("encoder_hidden_states_mask", "encoder_attention_mask")


def outputs_dict(result):
    tensors = result if isinstance(result, (tuple, list)) else (result,)
    return {("output" if i == 0 else "output_%d" % i): t.detach().float().contiguous() for i, t in enumerate(tensors)}


def make_program_fixture(name, out_dir):
    import diffusers
    import export_program as ep
    from diffusers_models import RandomFactory, make_inputs, seeded_weights
    config = pathlib.Path(__file__).resolve().parent / "model_configs" / (name + ".json")
    cls_name, cfg, _, _, workloads = ep.load_spec(str(config))
    folder = pathlib.Path(out_dir) / "programs" / name
    folder.mkdir(parents=True, exist_ok=True)
    for dtype_name, suffix in (("fp32", ""), ("bf16", "_bf16")):
        ep.export_config(str(config), str(folder / ("program%s.pt2" % suffix)), batch=2, dtype_name=dtype_name)
    model = getattr(diffusers, cls_name).from_config(dict(cfg)).eval()
    seeded_weights(model, PROGRAM_SEED)
    bf16_model = as_loaded_in(model, torch.bfloat16)
    for n, wl in enumerate(workloads):
        wl = dict(wl, batch=2)
        for dtype, which, suffix in ((torch.float32, model, ""), (torch.bfloat16, bf16_model, "_bf16")):
            inputs = make_inputs(cls_name, cfg, wl, RandomFactory(dtype, 100 + n))
            with torch.no_grad():
                result = which(**inputs, return_dict=False)
            stem = "%s%s" % (wl["name"], suffix)
            ep.write_inputs_file(str(folder / ("inputs_%s.safetensors" % stem)), inputs)
            save_file(outputs_dict(result), folder / ("outputs_%s.safetensors" % stem))
            print("%s: workload %s %s, output %s" % (folder, wl["name"], suffix or "fp32",
                                                     tuple(outputs_dict(result)["output"].shape)))
            # At the first workload, masked text variants: -padded (rows end in 2 and 5 masked
            # tokens, so a plan's split must move the mask with its keys) and -rowmasked (row 0
            # ends in 2, row 1 is masked whole: one device attends that row's queries to every
            # key under an additive mask, to none under a boolean one).
            if n == 0:
                for variant, masked_inputs in masked_variants(inputs):
                    with torch.no_grad():
                        result = which(**masked_inputs, return_dict=False)
                    stem = "%s-%s%s" % (wl["name"], variant, suffix)
                    ep.write_inputs_file(str(folder / ("inputs_%s.safetensors" % stem)), masked_inputs)
                    save_file(outputs_dict(result), folder / ("outputs_%s.safetensors" % stem))
                    print("%s: workload %s-%s %s" % (folder, wl["name"], variant, suffix or "fp32"))


def seeded_program_model(name, out_dir):
    """(config path, class, config, workloads, fixture folder, diffusers model on weft's seeded
    weights) of program fixture `name`."""
    import diffusers
    import export_program as ep
    from diffusers_models import seeded_weights
    config = pathlib.Path(__file__).resolve().parent / "model_configs" / (name + ".json")
    cls_name, cfg, _, _, workloads = ep.load_spec(str(config))
    model = getattr(diffusers, cls_name).from_config(dict(cfg)).eval()
    seeded_weights(model, PROGRAM_SEED)
    return config, cls_name, cfg, workloads, pathlib.Path(out_dir) / "programs" / name, model


BRANCH_FIXTURES = ["flux-tiny", "wan-tiny", "qwen-image-tiny", "hunyuanvideo-tiny", "ltx-video-tiny", "ltx-2-tiny",
                   "chronoedit-tiny", "flux2-tiny", "helios-tiny"]


def make_branch_fixture(name, out_dir):
    import export_program as ep
    from diffusers_models import RandomFactory, make_inputs
    config, cls_name, cfg, workloads, folder, model = seeded_program_model(name, out_dir)
    wl = dict(workloads[0], batch=3)
    inputs = make_inputs(cls_name, cfg, wl, RandomFactory(torch.float32, 300))
    mask = next((k for k in PADDED_MASKS if isinstance(inputs.get(k), torch.Tensor) and inputs[k].dim() == 2), None)
    if mask is not None:  # uneven text per branch: rows end in 2, 5 and 0 masked tokens
        m = inputs[mask].clone()
        for row, masked in enumerate((2, 5, 0)):
            if masked:
                m[row, m.shape[1] - masked:] = 0
        inputs[mask] = m
    with torch.no_grad():
        result = model(**inputs, return_dict=False)
    stem = "%s-b3" % wl["name"]
    ep.write_inputs_file(str(folder / ("inputs_%s.safetensors" % stem)), inputs)
    save_file(outputs_dict(result), folder / ("outputs_%s.safetensors" % stem))
    print("%s: workload %s, output %s" % (folder, stem, tuple(outputs_dict(result)["output"].shape)))
    if name == "flux-tiny":
        ep.export_config(str(config), str(folder / "program_b3.pt2"), batch=3, dtype_name="fp32")


CALLS_FIXTURES = {"qwen-image-tiny": ("encoder_hidden_states", "encoder_hidden_states_mask"),
                  "flux-tiny": ("encoder_hidden_states", "pooled_projections", "txt_ids")}


def make_calls_fixture(name, out_dir):
    import export_program as ep
    from diffusers_models import RandomFactory, make_inputs
    config, cls_name, cfg, workloads, folder, model = seeded_program_model(name, out_dir)
    base = dict(workloads[0], batch=2)
    shared = make_inputs(cls_name, cfg, base, RandomFactory(torch.float32, 400))
    for call, extra_text in enumerate((0, -3, 2)):
        wl = dict(base, text_len=base.get("text_len", 512) + extra_text)
        own = make_inputs(cls_name, cfg, wl, RandomFactory(torch.float32, 410 + call))
        inputs = dict(shared)
        for arg in CALLS_FIXTURES[name]:
            inputs[arg] = own[arg]
        mask = "encoder_hidden_states_mask"
        if mask in CALLS_FIXTURES[name]:  # each call's rows end in masked tokens of their own
            m = inputs[mask].clone()
            for row, masked in enumerate(((2, 0), (0, 4), (1, 3))[call]):
                if masked:
                    m[row, m.shape[1] - masked:] = 0
            inputs[mask] = m
        with torch.no_grad():
            result = model(**inputs, return_dict=False)
        stem = "%s-call%d" % (base["name"], call)
        ep.write_inputs_file(str(folder / ("inputs_%s.safetensors" % stem)), inputs)
        save_file(outputs_dict(result), folder / ("outputs_%s.safetensors" % stem))
        print("%s: %s, text %d, output %s" % (folder, stem, inputs["encoder_hidden_states"].shape[1],
                                              tuple(outputs_dict(result)["output"].shape)))


# The masked variants of `inputs` (name, inputs): none without a 2-D text mask among PADDED_MASKS.
def masked_variants(inputs, only=None):
    mask = next((k for k in PADDED_MASKS if isinstance(inputs.get(k), torch.Tensor) and inputs[k].dim() == 2), None)
    if mask is None:
        return []
    out = []
    for variant, masked_per_row in (("padded", (2, 5)), ("rowmasked", (2, None))):
        if only and variant != only:
            continue
        m = inputs[mask].clone()
        for row, masked in zip(range(m.shape[0]), masked_per_row):
            m[row, (0 if masked is None else max(1, m.shape[1] - masked)):] = 0
        out.append((variant, dict(inputs, **{mask: m})))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures"))
    parser.add_argument("--only", help="one fixture (a built-in one, or a program config with --programs)")
    parser.add_argument("--programs", action="store_true", help="the program fixtures instead of the built-in ones")
    parser.add_argument("--branches", action="store_true", help="the guidance-branch fixtures (3 branches)")
    parser.add_argument("--calls", action="store_true", help="the fixtures of guidance branches as calls of their own")
    args = parser.parse_args()
    if args.calls:
        for name in CALLS_FIXTURES:
            if not args.only or name == args.only:
                make_calls_fixture(name, args.out)
        return
    if args.branches:
        for name in BRANCH_FIXTURES:
            if not args.only or name == args.only:
                make_branch_fixture(name, args.out)
        return
    if args.programs:
        for name in PROGRAM_FIXTURES:
            if args.only and name != args.only:
                continue
            make_program_fixture(name, args.out)
        return
    if args.only and args.only not in FIXTURES:
        parser.error("no built-in fixture %s; they are %s" % (args.only, ", ".join(sorted(FIXTURES))))
    torch.manual_seed(0)
    for name, make in FIXTURES.items():
        if args.only and name != args.only:
            continue
        class_name, config, model, inputs, output, *rest = make()
        extras = rest[0] if rest else {}
        folder = pathlib.Path(args.out) / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps({"_class_name": class_name, **config}, indent=2) + "\n")
        if name in SAVE_PRETRAINED:
            # diffusers' own directory layout, sharded: config.json, an index and two shards,
            # which is what `weft-run --model-dir` and io::DiffusersWeightFiles read.
            model.save_pretrained(folder / "model", max_shard_size="1MB", safe_serialization=True)
            (folder / "weights.safetensors").unlink(missing_ok=True)
        else:
            save_file({k: v.contiguous() for k, v in model.state_dict().items()}, folder / "weights.safetensors")
        save_file({k: v.contiguous() for k, v in inputs.items()}, folder / "inputs.safetensors")
        save_file({"output": output.contiguous()}, folder / "outputs.safetensors")
        for extra, (extra_inputs, extra_output) in extras.items():
            save_file({k: v.contiguous() for k, v in extra_inputs.items()}, folder / f"inputs_{extra}.safetensors")
            save_file({"output": extra_output.contiguous()}, folder / f"outputs_{extra}.safetensors")
        # One module per line, so a test can compare line by line and a diff reads well.
        tree = module_tree(model)
        (folder / "modules.json").write_text("[\n" + ",\n".join(json.dumps(m) for m in tree) + "\n]\n")
        print(f"{folder}: {sum(p.numel() for p in model.parameters())} parameters, output {tuple(output.shape)}")


if __name__ == "__main__":
    main()
