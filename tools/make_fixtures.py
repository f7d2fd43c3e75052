#!/usr/bin/env python3
"""Builds diffusers' own models at small configs with seeded random weights and saves
weights, inputs and outputs as safetensors fixtures, so the C++ built-in models can be
checked against diffusers on the same numbers.

    .venv/bin/python tools/make_fixtures.py [--out tests/fixtures] [--only flux_tiny]

Each fixture folder holds config.json (the diffusers config, as save_pretrained writes it),
weights.safetensors (diffusers key names), inputs.safetensors (keyed by forward argument
name) and outputs.safetensors ({"output": ...}). Everything is fp32 and deterministic.
"""
import argparse
import json
import pathlib

import torch
from safetensors.torch import save_file


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
    batch, height, width, text = 2, 4, 6, 7
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


FIXTURES = {"flux_tiny": flux_tiny}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures"))
    parser.add_argument("--only", choices=sorted(FIXTURES))
    args = parser.parse_args()
    torch.manual_seed(0)
    for name, make in FIXTURES.items():
        if args.only and name != args.only:
            continue
        class_name, config, model, inputs, output = make()
        folder = pathlib.Path(args.out) / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps({"_class_name": class_name, **config}, indent=2) + "\n")
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, folder / "weights.safetensors")
        save_file({k: v.contiguous() for k, v in inputs.items()}, folder / "inputs.safetensors")
        save_file({"output": output.contiguous()}, folder / "outputs.safetensors")
        print(f"{folder}: {sum(p.numel() for p in model.parameters())} parameters, output {tuple(output.shape)}")


if __name__ == "__main__":
    main()
