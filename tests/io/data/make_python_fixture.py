"""Writes python_written.safetensors with the reference (Rust) safetensors writer, so the C++
reader is tested against files it did not write itself. Values are closed-form so the C++
test can recompute them:  .venv/bin/python tests/io/data/make_python_fixture.py"""
import pathlib

import torch
from safetensors.torch import save_file

here = pathlib.Path(__file__).parent
tensors = {
    "transformer_blocks.0.attn.to_q.weight": torch.arange(24, dtype=torch.float32).reshape(4, 6) / 8,
    "transformer_blocks.0.attn.to_q.bias": torch.tensor([1.5, -2.0, 0.25, 3.0], dtype=torch.bfloat16),
    "img_ids": torch.arange(6, dtype=torch.int64).reshape(3, 2),
    "mask": torch.tensor([True, False, True]),
    "scalar": torch.tensor(7.0, dtype=torch.float16),
}
save_file(tensors, here / "python_written.safetensors", metadata={"format": "pt", "source": "weft test"})
