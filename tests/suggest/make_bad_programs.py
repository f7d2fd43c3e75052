#!/usr/bin/env python3
"""Programs `weft suggest` must refuse, by name (tests/suggest/CMakeLists.txt):

  no_attention.pt2       a token MLP: no scaled_dot_product_attention node, nothing to run in parallel
  fixed_tokens.pt2       self-attention exported with every size static (torch.export without
                         dynamic shapes): the token length is a constant, so no split can be proven

  .venv/bin/python tests/suggest/make_bad_programs.py tests/suggest/programs

and one program of a real model whose forward fixes its token counts at export:

  zimage_len_fixed.pt2   ZImage at its coverage config (its forward reads `len(tensor)`, a Python
                         int): tools/export_program.py records the sizes it fixed and the lines
                         (weft.json `fixed_sizes`), which weft suggest and weft program name

  .venv/bin/python tools/coverage.py --classes ZImageTransformer2DModel
  cp ~/.cache/weft/coverage/ZImageTransformer2DModel/program.pt2 tests/suggest/programs/zimage_len_fixed.pt2
"""

import os
import sys

import torch
import torch.nn.functional as F


class TokenMlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 8)

    def forward(self, hidden_states):
        return self.down(F.gelu(self.up(hidden_states)))


class FixedAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.to_qkv = torch.nn.Linear(8, 24)

    def forward(self, hidden_states):
        b, s, _ = hidden_states.shape
        q, k, v = self.to_qkv(hidden_states).view(b, s, 3, 2, 4).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, 8)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    x = torch.randn(2, 6, 8)
    batch, tokens = torch.export.Dim("batch", min=2), torch.export.Dim("tokens", min=2)
    mlp = torch.export.export(TokenMlp(), (x,), dynamic_shapes=({0: batch, 1: tokens},))
    torch.export.save(mlp, os.path.join(out, "no_attention.pt2"))
    fixed = torch.export.export(FixedAttention(), (x,))
    torch.export.save(fixed, os.path.join(out, "fixed_tokens.pt2"))


if __name__ == "__main__":
    main()
