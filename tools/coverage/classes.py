"""Tiny configs and forward inputs for every transformer class of the pinned diffusers, for the
coverage table (tools/coverage.py, tools/coverage/run_class.py).

Each entry of CLASSES is one class: its config (the class defaults shrunk: one or two blocks of each
kind, widths of 16-32, an even head count >= 2 per attention with head_dim 8 or 16, so ulysses=2
and tp=2 mean something) and a function making the keyword arguments of its forward, from the
class's forward signature and its pipeline in diffusers 0.42.1. Token counts are even and distinct
(image tokens 16 or 32, text 8 or 12) so that ulysses=2 and ring=2 split them; batch 2 where the
model allows (a batch of 2 keeps the batch dim dynamic in the export); a text mask masks some rows
of one batch entry where the forward takes one.

Classes weft has tools/model_configs/*-tiny.json entries for take that config, and their inputs
from diffusers_models.make_inputs at its first workload (batch 2), so the table runs exactly what
the program tests run.

  spec_of(cls)    {"config": {...}, "inputs": callable -> kwargs}
  source_of(cls)  text that changes when the class's config or input builder changes (the cache key)
"""

import inspect
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(os.path.dirname(HERE), "model_configs")

B = 2  # batch


class Gen:
    """Seeded tensors: floats ~ N(0, 1), timesteps, masks, ids."""

    def __init__(self, seed=0):
        import torch
        self.torch = torch
        self.g = torch.Generator().manual_seed(seed)

    def f(self, *shape):
        return self.torch.randn(*shape, generator=self.g)

    def t(self, scale=1000.0):
        """One timestep per batch entry, distinct."""
        return self.torch.tensor([0.3, 0.7][:B]) * scale

    def mask(self, T, masked=(0, 3), dtype=None):
        """(B, T) ones, the last masked[i] positions of row i zero."""
        m = self.torch.ones(B, T, dtype=dtype or self.torch.int64)
        for i, k in enumerate(masked[:B]):
            if k:
                m[i, T - k:] = 0
        return m

    def ints(self, *shape, high=10):
        return self.torch.randint(0, high, shape, generator=self.g)


def grid_ids(h, w, axes=3, batch=None):
    """Flux-style position ids of an h x w grid: (h*w, axes) [0, row, col, 0...], batched if asked."""
    import torch
    r, c = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    cols = [torch.zeros_like(r), r, c] + [torch.zeros_like(r)] * (axes - 3)
    ids = torch.stack(cols, -1).reshape(h * w, axes).float()
    return ids.unsqueeze(0).expand(batch, -1, -1).contiguous() if batch else ids


def text_ids(T, axes=3, batch=None):
    import torch
    ids = torch.zeros(T, axes)
    return ids.unsqueeze(0).expand(batch, -1, -1).contiguous() if batch else ids


# ----------------------------------------------------------------------------------------------
# Classes with a tools/model_configs entry: its config, make_inputs at its first workload.

KNOWN = {
    "FluxTransformer2DModel": "flux-tiny.json",
    "Flux2Transformer2DModel": "flux2-tiny.json",
    "QwenImageTransformer2DModel": "qwen-image-tiny.json",
    "WanTransformer3DModel": "wan-tiny.json",
    "ChronoEditTransformer3DModel": "chronoedit-tiny.json",
    "HeliosTransformer3DModel": "helios-tiny.json",
    "HunyuanVideoTransformer3DModel": "hunyuanvideo-tiny.json",
    "LTXVideoTransformer3DModel": "ltx-video-tiny.json",
    "LTX2VideoTransformer3DModel": "ltx-2-tiny.json",
    "MiniMaxH3Transformer3DModel": "minimax-h3-tiny.json",
}


def _known(cls):
    with open(os.path.join(CONFIGS, KNOWN[cls])) as f:
        spec = json.load(f)
    cfg = {k: v for k, v in spec["config"].items() if k != "_class_name"}
    wl = dict(spec["workloads"][0], batch=B)

    def inputs():
        import torch
        from diffusers_models import RandomFactory, make_inputs
        kw = make_inputs(cls, cfg, wl, RandomFactory(torch.float32, 0))
        return kw
    return dict(config=cfg, inputs=inputs, source=json.dumps([spec, wl], sort_keys=True))


# ----------------------------------------------------------------------------------------------
# Every other class: config and input builder. The builder takes the config.

CLASSES = {}


def entry(cls, tolerance=None, **config):
    """A class's tiny config and its inputs. `tolerance` = (relative tolerance, why): for a class whose
    forward computes in a lower precision than fp32 on purpose (SanaWM casts q/k/v to bf16 before
    SDPA), the sharded runs differ from diffusers by that precision's rounding, not by 1e-4."""
    def register(fn):
        CLASSES[cls] = dict(config=config, build=fn, tolerance=tolerance)
        return fn
    return register


@entry("AceStepTransformer1DModel", hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
       num_key_value_heads=2, head_dim=8, in_channels=16, audio_acoustic_hidden_dim=8, patch_size=2,
       sliding_window=8, encoder_hidden_size=24)
def _(c, g):
    # Grouped-query attention as ACE-Step 1.5 (8 key/value heads of 16): 2 of 4, so its self-attention's
    # SDPA takes enable_gqa, which the context-parallel runs repeat the key/value heads for.
    return dict(hidden_states=g.f(B, 32, 8), timestep=g.t(1.0), timestep_r=g.t(0.5), encoder_hidden_states=g.f(B, 12, 24),
                context_latents=g.f(B, 32, 8))


# head_dim 12: Allegro's RoPE rotates a third of each head per axis (t, h, w), as in diffusers' tests.
@entry("AllegroTransformer3DModel", patch_size=2, patch_size_t=1, num_attention_heads=2, attention_head_dim=12,
       in_channels=4, out_channels=4, num_layers=1, cross_attention_dim=24, sample_height=8, sample_width=8,
       sample_frames=2, caption_channels=16)
def _(c, g):
    import torch
    from diffusers.models.embeddings import get_3d_rotary_pos_embed_allegro
    # The RoPE as AllegroPipeline._prepare_rotary_positional_embeddings passes it: per-axis (cos, sin)
    # tables and every token's (t, h, w) grid position, (1, tokens) each.
    ft, fh, fw, gt, gh, gw = get_3d_rotary_pos_embed_allegro(
        embed_dim=12, crops_coords=((0, 0), (4, 4)), grid_size=(4, 4), temporal_size=2,
        interpolation_scale=(c["interpolation_scale_t"] if "interpolation_scale_t" in c else 2.2, 2.0, 2.0))
    pos = torch.cartesian_prod(gt.long(), gh.long(), gw.long()).reshape(-1, 3).transpose(0, 1).reshape(3, 1, -1)
    rope = ((ft, fh, fw), tuple(p.contiguous() for p in pos))
    return dict(hidden_states=g.f(B, 4, 2, 8, 8), encoder_hidden_states=g.f(B, 8, 16), timestep=g.t(),
                encoder_attention_mask=g.mask(8), image_rotary_emb=rope)


_ANYFLOW = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
                text_dim=16, freq_dim=16, ffn_dim=32, num_layers=1)


@entry("AnyFlowTransformer3DModel", **_ANYFLOW)
def _(c, g):
    t = g.t().unsqueeze(1).repeat(1, 2)  # one timestep per latent frame
    return dict(hidden_states=g.f(B, 2, 4, 8, 8), timestep=t, r_timestep=t * 0.5, encoder_hidden_states=g.f(B, 8, 16))


@entry("AnyFlowFARTransformer3DModel", compressed_patch_size=(1, 4, 4), full_chunk_limit=3, chunk_partition=(1, 1),
       **_ANYFLOW)
def _(c, g):
    t = g.t().unsqueeze(1).repeat(1, 2)  # one timestep per latent frame
    return dict(hidden_states=g.f(B, 2, 4, 8, 8), timestep=t, r_timestep=t * 0.5, encoder_hidden_states=g.f(B, 8, 16),
                chunk_partition=[1, 1])


@entry("AuraFlowTransformer2DModel", sample_size=8, patch_size=2, in_channels=4, num_mmdit_layers=1,
       num_single_dit_layers=1, attention_head_dim=8, num_attention_heads=2, joint_attention_dim=16,
       caption_projection_dim=16, out_channels=4, pos_embed_max_size=64)
def _(c, g):
    return dict(hidden_states=g.f(B, 4, 8, 8), encoder_hidden_states=g.f(B, 8, 16), timestep=g.t())


@entry("BriaFibo2Transformer2DModel", in_channels=4, patch_size=2, dim=32, n_layers=1, n_refiner_layers=1, n_heads=2,
       cap_feat_dim=16, injection_layer_ids=(0,), perceiver_num_layers=1, min_num_gist_tokens=4,
       max_num_gist_tokens=8, gist_step=4, gist_min_text_len=4, gist_max_text_len=16, axes_dims=(4, 6, 6),
       axes_lens=(64, 32, 32))
def _(c, g):
    # No text mask, as the pipeline passes when no prompt is padded (it drops an all-true mask): the gist
    # count then follows from the text length (which the program fixes), not from lengths read out of a mask.
    return dict(hidden_states=g.f(B, 4, 8, 8), timestep=g.t(1.0), encoder_hidden_states=g.f(B, 2, 12, 16))


_FLUXLIKE = dict(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=16,
                 num_attention_heads=2, joint_attention_dim=32)


@entry("BriaFiboTransformer2DModel", axes_dims_rope=[4, 6, 6], text_encoder_dim=24, **_FLUXLIKE)
def _(c, g):
    return dict(hidden_states=g.f(B, 32, 16), encoder_hidden_states=g.f(B, 8, 32),
                text_encoder_layers=[g.f(B, 8, 24), g.f(B, 8, 24)], timestep=g.t(1.0), img_ids=grid_ids(4, 8),
                txt_ids=text_ids(8))


@entry("BriaTransformer2DModel", axes_dims_rope=[4, 6, 6], **_FLUXLIKE)
def _(c, g):
    return dict(hidden_states=g.f(B, 32, 16), encoder_hidden_states=g.f(B, 8, 32), timestep=g.t(1.0),
                img_ids=grid_ids(4, 8), txt_ids=text_ids(8))


@entry("ChromaTransformer2DModel", axes_dims_rope=(4, 6, 6), approximator_num_channels=16, approximator_hidden_dim=32,
       approximator_layers=1, **_FLUXLIKE)
def _(c, g):
    # The mask as ChromaPipeline passes it: the text mask (padding masked but its first position) in
    # the text encoder's float dtype, joined to ones for the image tokens -- a float mask, which the
    # blocks square into (query, key) pairs and scaled_dot_product_attention adds as a bias.
    mask = g.torch.cat([g.mask(8, masked=(0, 3), dtype=g.torch.float32), g.torch.ones(B, 32, dtype=g.torch.bool)], 1)
    return dict(hidden_states=g.f(B, 32, 16), encoder_hidden_states=g.f(B, 8, 32), timestep=g.t(1.0),
                img_ids=grid_ids(4, 8), txt_ids=text_ids(8), attention_mask=mask)


_COGVIDEO = dict(num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4, time_embed_dim=16,
                 text_embed_dim=16, num_layers=1, sample_width=16, sample_height=16, sample_frames=9, patch_size=2,
                 max_text_seq_length=8)  # inputs smaller than the sample size: the tokens stay dynamic


@entry("CogVideoXTransformer3DModel", **{**_COGVIDEO, "max_text_seq_length": 7, "use_rotary_positional_embeddings": True})
def _(c, g):
    # Odd lengths on purpose: 7 text tokens (a length the export fixes, made local per rank by the
    # plan) before 3 x 3 x 3 = 27 video tokens, so ulysses=2 and ring=2 split both unevenly. RoPE
    # as CogVideoX-5b runs it (plans/cogvideox.weft): the pipeline passes (cos, sin) of the video
    # tokens, (tokens, head_dim) each.
    angles = g.f(27, 8)
    return dict(hidden_states=g.f(B, 3, 4, 6, 6), encoder_hidden_states=g.f(B, 7, 16), timestep=g.t().long(),
                image_rotary_emb=(angles.cos(), angles.sin()))


@entry("ConsisIDTransformer3DModel", **_COGVIDEO)
def _(c, g):
    return dict(hidden_states=g.f(B, 2, 4, 8, 8), encoder_hidden_states=g.f(B, 8, 16), timestep=g.t().long())


_COGVIEW = dict(patch_size=2, in_channels=4, out_channels=4, num_layers=1, attention_head_dim=8, num_attention_heads=2,
                text_embed_dim=16, time_embed_dim=16, condition_dim=8, pos_embed_max_size=16, sample_size=8)


def _cogview_inputs(c, g):
    import torch
    size = torch.tensor([[64.0, 64.0]] * B)
    return dict(hidden_states=g.f(B, 4, 8, 8), encoder_hidden_states=g.f(B, 8, 16), timestep=g.t(),
                original_size=size, target_size=size.clone(), crop_coords=torch.zeros(B, 2))


entry("CogView3PlusTransformer2DModel", **_COGVIEW)(_cogview_inputs)
entry("CogView4Transformer2DModel", rope_axes_dim=(16, 16), **_COGVIEW)(_cogview_inputs)


@entry("CosmosTransformer3DModel", in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16,
       num_layers=1, text_embed_dim=16, adaln_lora_dim=8, max_size=(4, 16, 16), patch_size=(1, 2, 2),
       crossattn_proj_in_channels=16, encoder_hidden_states_channels=16, extra_pos_embed_type=None)
def _(c, g):
    # No learnable positional embedding, as the Cosmos 2.0 and 2.5 checkpoints (1.0's scales by np.sqrt of
    # a token count, which numpy cannot take of a symbolic size). The pipelines' padding mask: one for the
    # batch (the forward repeats it), at the image's pixel size, which the forward resizes to the latents'.
    import torch
    return dict(hidden_states=g.f(B, 4, 2, 8, 8), timestep=g.t(1.0), encoder_hidden_states=g.f(B, 8, 16),
                padding_mask=torch.zeros(1, 1, 64, 64))


@entry("DiTTransformer2DModel", num_attention_heads=2, attention_head_dim=8, in_channels=4, num_layers=1,
       norm_num_groups=2, sample_size=8, patch_size=2, num_embeds_ada_norm=10)
def _(c, g):
    import torch
    return dict(hidden_states=g.f(B, 4, 8, 8), timestep=torch.tensor([300, 700][:B]), class_labels=torch.tensor([1, 7][:B]))


_CONTINUOUS = dict(num_attention_heads=2, attention_head_dim=8, in_channels=4, num_layers=1, norm_num_groups=2,
                   cross_attention_dim=16)


@entry("DreamLiteTransformer2DModel", **_CONTINUOUS)
def _(c, g):
    return dict(hidden_states=g.f(B, 4, 4, 8), encoder_hidden_states=g.f(B, 8, 16), encoder_attention_mask=g.mask(8))


@entry("Transformer2DModel", norm_type="layer_norm", **_CONTINUOUS)
def _(c, g):
    return dict(hidden_states=g.f(B, 4, 4, 8), encoder_hidden_states=g.f(B, 8, 16), encoder_attention_mask=g.mask(8))


@entry("TransformerTemporalModel", num_attention_heads=2, attention_head_dim=8, in_channels=4, num_layers=1,
       norm_num_groups=2)
def _(c, g):
    return dict(hidden_states=g.f(B * 8, 4, 4, 4), num_frames=8)


@entry("EasyAnimateTransformer3DModel", num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
       patch_size=2, sample_width=8, sample_height=8, num_layers=1, mmdit_layers=1, time_embed_dim=16,
       text_embed_dim=16)
def _(c, g):
    return dict(hidden_states=g.f(B, 4, 2, 8, 8), timestep=g.t(), encoder_hidden_states=g.f(B, 8, 16))


@entry("ErnieImageTransformer2DModel", hidden_size=32, num_attention_heads=2, num_layers=1, ffn_hidden_size=64,
       in_channels=4, out_channels=4, patch_size=1, text_in_dim=16, rope_axes_dim=(4, 6, 6))
def _(c, g):
    import torch
    return dict(hidden_states=g.f(B, 4, 4, 4), timestep=g.t(), text_bth=g.f(B, 12, 16),
                text_lens=torch.tensor([12, 9][:B]))


@entry("Flux3Transformer2DModel", in_channels=16, cond_in_channels=16, num_layers=1, num_single_layers=1,
       attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32, timestep_channels=16,
       axes_dims_rope=(4, 4, 4, 4))
def _(c, g):
    import torch
    cond_ids = grid_ids(4, 4, 4)
    cond_ids[:, 0] = 1  # the condition image on its own time plane
    # An edit: a 4x4 condition image beside the 4x8 target, so the image_cond stream is traced too.
    return dict(hidden_states=g.f(B, 32, 16), encoder_hidden_states=g.f(B, 12, 32), timestep=g.t(1.0),
                img_ids=grid_ids(4, 8, 4), txt_ids=text_ids(12, 4), image_cond_hidden_states=g.f(B, 16, 16),
                image_cond_ids=cond_ids)


@entry("GlmImageTransformer2DModel", patch_size=2, in_channels=4, out_channels=4, num_layers=1, attention_head_dim=8,
       num_attention_heads=2, text_embed_dim=16, time_embed_dim=16, condition_dim=8,
       prior_vq_quantizer_codebook_size=32)
def _(c, g):
    import torch
    size = torch.tensor([[64.0, 64.0]] * B)
    return dict(hidden_states=g.f(B, 4, 8, 8), encoder_hidden_states=g.f(B, 8, 16),
                prior_token_id=g.ints(B, 16, high=32), prior_token_drop=torch.tensor([False, True][:B]),
                timestep=g.t(), target_size=size, crop_coords=torch.zeros(B, 2))


@entry("HiDreamImageTransformer2DModel", patch_size=2, in_channels=4, out_channels=4, num_layers=1,
       num_single_layers=1, attention_head_dim=16, num_attention_heads=2, caption_channels=[16, 16],
       text_emb_dim=16, num_routed_experts=2, num_activated_experts=1, axes_dims_rope=(8, 4, 4),
       max_resolution=(8, 8), llama_layers=[0, 1])
def _(c, g):
    return dict(hidden_states=g.f(B, 4, 8, 8), timesteps=g.t(), encoder_hidden_states_t5=g.f(B, 8, 16),
                encoder_hidden_states_llama3=g.f(2, B, 4, 16), pooled_embeds=g.f(B, 16))


_HUNYUAN = dict(num_attention_heads=2, attention_head_dim=16, num_layers=1, num_single_layers=1, num_refiner_layers=1,
                text_embed_dim=16, rope_axes_dim=(4, 6, 6))


@entry("HunyuanImageTransformer2DModel", in_channels=4, out_channels=4, patch_size=(1, 1), **dict(_HUNYUAN, rope_axes_dim=(8, 8)))
def _(c, g):
    return dict(hidden_states=g.f(B, 4, 4, 8), timestep=g.t(), encoder_hidden_states=g.f(B, 12, 16),
                encoder_attention_mask=g.mask(12))


@entry("HunyuanVideo15Transformer3DModel", in_channels=9, out_channels=4, num_attention_heads=2, attention_head_dim=16,
       num_layers=1, num_refiner_layers=1, text_embed_dim=16, text_embed_2_dim=16, image_embed_dim=16,
       rope_axes_dim=(4, 6, 6), target_size=64)
def _(c, g):
    return dict(hidden_states=g.f(B, 9, 2, 4, 4), timestep=g.t(), encoder_hidden_states=g.f(B, 12, 16),
                encoder_attention_mask=g.mask(12), encoder_hidden_states_2=g.f(B, 8, 16),
                encoder_attention_mask_2=g.mask(8, (0, 2)), image_embeds=g.f(B, 4, 16))


@entry("HunyuanVideoFramepackTransformer3DModel", in_channels=4, out_channels=4, pooled_projection_dim=8,
       has_image_proj=True, has_clean_x_embedder=True,
       image_proj_dim=16, **_HUNYUAN)
def _(c, g):
    import torch
    return dict(hidden_states=g.f(B, 4, 2, 8, 8), timestep=g.t(), encoder_hidden_states=g.f(B, 12, 16),
                encoder_attention_mask=g.mask(12), pooled_projections=g.f(B, 8), image_embeds=g.f(B, 4, 16),
                indices_latents=torch.arange(4, 6), guidance=g.t(1.0) * 5,
                # the history the pipeline packs in front: 1 clean frame, 2 frames at 2x, 4 at 4x
                latents_clean=g.f(B, 4, 1, 8, 8), indices_latents_clean=torch.arange(0, 1),
                latents_history_2x=g.f(B, 4, 2, 8, 8), indices_latents_history_2x=torch.arange(1, 3),
                latents_history_4x=g.f(B, 4, 4, 8, 8), indices_latents_history_4x=torch.arange(0, 4))


@entry("Ideogram4Transformer2DModel", in_channels=16, num_layers=1, attention_head_dim=16, num_attention_heads=2,
       intermediate_size=64, adaln_dim=16, llm_features_dim=24, mrope_section=(4, 2, 2))
def _(c, g):
    import torch
    S, T = 28, 12  # 12 text tokens (indicator 3), then 16 image tokens (indicator 2)
    indicator = torch.tensor([3] * T + [2] * (S - T)).unsqueeze(0).expand(B, -1).contiguous()
    pos = torch.arange(S).view(1, S, 1).expand(B, S, 3).contiguous()
    # Two samples packed in each sequence, cut at another place in each batch row: the block-diagonal
    # mask over (query, key) pairs differs per row and crosses the CP ranks' pieces.
    segments = torch.tensor([[0] * 14 + [1] * 14, [0] * 9 + [1] * 19])
    return dict(hidden_states=g.f(B, S, 16), timestep=g.t(1.0), encoder_hidden_states=g.f(B, S, 24), position_ids=pos,
                segment_ids=segments, indicator=indicator)


_JOY = dict(patch_size=[1, 2, 2], in_channels=4, hidden_size=32, num_attention_heads=2, text_dim=16, num_layers=1,
            rope_dim_list=[4, 6, 6])


@entry("JoyImageEditTransformer3DModel", **_JOY)
def _(c, g):
    return dict(hidden_states=g.f(B, 4, 1, 8, 8), timestep=g.t(), encoder_hidden_states=g.f(B, 12, 16))


@entry("JoyImageEditPlusTransformer3DModel", **_JOY)
def _(c, g):
    return dict(hidden_states=g.f(B, 16, 4, 1, 2, 2), timestep=g.t(), encoder_hidden_states=g.f(B, 12, 16),
                encoder_hidden_states_mask=g.mask(12), shape_list=[[[1, 4, 4]]] * B)


@entry("Kandinsky5Transformer3DModel", in_visual_dim=4, in_text_dim=16, in_text_dim2=8, time_dim=16, out_visual_dim=4,
       patch_size=(1, 2, 2), model_dim=32, ff_dim=64, num_text_blocks=1, num_visual_blocks=1, axes_dims=(4, 6, 6))
def _(c, g):
    # 5 latent frames: plans/kandinsky5.weft splits the tokens in whole frames (the forward views them as
    # the latent video after the last block), so 4 CP ranks take 2 + 1 + 1 + 1.
    return dict(hidden_states=g.f(B, 5, 8, 8, 4), encoder_hidden_states=g.f(B, 12, 16), timestep=g.t(),
                pooled_projections=g.f(B, 8), visual_rope_pos=[list(range(5)), list(range(4)), list(range(4))],
                text_rope_pos=__import__("torch").arange(12))


@entry("Kandinsky6Transformer3DModel", in_visual_dim=4, out_visual_dim=4, in_text_dim=16, in_text_dim2=8, time_dim=16,
       patch_size=(1, 2, 2), model_dim=32, ff_dim=64, num_text_blocks=1, num_visual_blocks=1, axes_dims=(4, 6, 6),
       visual_cond=False, in_audio_dim=4, out_audio_dim=4)
def _(c, g):
    # With its audio stream (12 audio frames), so the audio blocks are traced too.
    return dict(hidden_states=g.f(B, 2, 8, 8, 4), encoder_hidden_states=g.f(B, 12, 16), pooled_projections=g.f(B, 8),
                timestep=g.t(), audio_hidden_states=g.f(B, 12, 4))


@entry("Kandinsky6SRTransformer3DModel", in_visual_dim=4, out_visual_dim=4, time_dim=16, patch_size=(1, 1, 1),
       model_dim=32, ff_dim=64, num_visual_blocks=1, axes_dims=(4, 6, 6))
def _(c, g):
    return dict(hidden_states=g.f(B, 1, 8, 8, 9), timestep=g.t())  # latents, condition, mask: 2 x 4 + 1


# Grouped-query as the published model (48 query heads over 12 key/value heads): 4 over 2, so
# that tensor parallelism meets the forward's repeat of the key/value heads.
@entry("Krea2Transformer2DModel", in_channels=16, num_layers=1, attention_head_dim=16, num_attention_heads=4,
       num_key_value_heads=2, intermediate_size=64, timestep_embed_dim=16, text_hidden_dim=24, num_text_layers=2,
       text_num_attention_heads=2, text_num_key_value_heads=2, text_intermediate_size=48, num_layerwise_text_blocks=1,
       num_refiner_text_blocks=1, axes_dims_rope=(4, 6, 6))
def _(c, g):
    import torch
    T, n = 12, 16
    pos = torch.cat([text_ids(T), grid_ids(4, 4)]).long()
    return dict(hidden_states=g.f(B, n, 16), encoder_hidden_states=g.f(B, T, 2, 24), timestep=g.t(1.0), position_ids=pos,
                encoder_attention_mask=g.mask(T).bool())


# Latte-1's kinds of layers (tools/model_configs/latte-1.json: gelu-approximate FFN, attention
# biases) at 4 frames, so that its temporal attention splits over 2 and 4 ranks.
@entry("LatteTransformer3DModel", num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=8,
       num_layers=1, cross_attention_dim=16, attention_bias=True, sample_size=8, patch_size=2,
       activation_fn="gelu-approximate", norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6,
       num_embeds_ada_norm=1000, caption_channels=16, video_length=4)
def _(c, g):
    return dict(hidden_states=g.f(B, 4, 4, 8, 8), timestep=g.t(), encoder_hidden_states=g.f(B, 8, 16))


@entry("LongCatImageTransformer2DModel", pooled_projection_dim=32, axes_dims_rope=[4, 6, 6], **_FLUXLIKE)
def _(c, g):
    return dict(hidden_states=g.f(B, 32, 16), encoder_hidden_states=g.f(B, 12, 32), timestep=g.t(1.0),
                img_ids=grid_ids(4, 8), txt_ids=text_ids(12))


@entry("Lumina2Transformer2DModel", sample_size=8, patch_size=2, in_channels=4, hidden_size=32, num_layers=1,
       num_refiner_layers=1, num_attention_heads=2, num_kv_heads=2, multiple_of=16, axes_dim_rope=(4, 6, 6),
       axes_lens=(64, 32, 32), cap_feat_dim=16)
def _(c, g):
    return dict(hidden_states=g.f(B, 4, 8, 8), timestep=g.t(1.0), encoder_hidden_states=g.f(B, 12, 16),
                encoder_attention_mask=g.mask(12).bool())


@entry("MiniMaxMusic3Transformer1DModel", in_channels=16, condition_dim=24, num_layers=1, num_attention_heads=2,
       attention_head_dim=16, ff_inner_dim=64, rotary_dim=8, fourier_embedding_dim=16)
def _(c, g):
    return dict(hidden_states=g.f(B, 16, 32), timestep=g.t(1.0), encoder_hidden_states=g.f(B, 32, 24))  # channels first


@entry("MochiTransformer3DModel", patch_size=2, num_attention_heads=2, attention_head_dim=24, num_layers=1,
       pooled_projection_dim=16, in_channels=4, text_embed_dim=16, time_embed_dim=16, max_sequence_length=12)
def _(c, g):
    return dict(hidden_states=g.f(B, 4, 2, 8, 8), encoder_hidden_states=g.f(B, 12, 16), timestep=g.t(),
                encoder_attention_mask=g.mask(12))


@entry("MotifVideoTransformer3DModel", in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16,
       num_layers=1, num_single_layers=1, text_embed_dim=16, rope_axes_dim=(4, 6, 6))
def _(c, g):
    return dict(hidden_states=g.f(B, 4, 2, 8, 8), timestep=g.t(), encoder_hidden_states=g.f(B, 12, 16),
                encoder_attention_mask=g.mask(12))


@entry("NucleusMoEImageTransformer2DModel", patch_size=2, in_channels=16, num_layers=2, attention_head_dim=16,
       num_attention_heads=2, joint_attention_dim=16, axes_dims_rope=(4, 6, 6),
       dense_moe_strategy="leave_first_block_dense", num_experts=4, moe_intermediate_dim=16, capacity_factors=2.0)
def _(c, g):
    return dict(hidden_states=g.f(B, 16, 16), img_shapes=[[[1, 4, 4]]] * B, encoder_hidden_states=g.f(B, 12, 16),
                encoder_hidden_states_mask=g.mask(12), timestep=g.t(1.0))


@entry("OmniGenTransformer2DModel", in_channels=4, patch_size=2, hidden_size=32, num_attention_heads=2,
       num_key_value_heads=2, intermediate_size=64, num_layers=1, pad_token_id=0, vocab_size=64,
       max_position_embeddings=256, original_max_position_embeddings=64, pos_embed_max_size=16, time_step_dim=16,
       rope_scaling={"short_factor": [1.0] * 8, "long_factor": [1.0] * 8})
def _(c, g):
    import torch
    T, n = 12, 16
    S = T + 1 + n  # text, the time token, the image
    # OmniGen's pipeline mask: causal over the text, the time token and the image see every token;
    # the second sample's text is left-padded by 3 (those keys masked for every query).
    mask = torch.ones(S, S).tril()
    mask[T:, :] = 1.0
    mask = mask.repeat(B, 1, 1)
    mask[1, :, :3] = 0.0
    return dict(hidden_states=g.f(B, 4, 8, 8), timestep=g.t(1.0), input_ids=g.ints(B, T, high=64) + 1,
                input_img_latents=[], input_image_sizes={}, attention_mask=mask,
                position_ids=torch.arange(S).unsqueeze(0).expand(B, -1).contiguous())


@entry("OvisImageTransformer2DModel", out_channels=16, axes_dims_rope=(4, 6, 6), **_FLUXLIKE)
def _(c, g):
    return dict(hidden_states=g.f(B, 32, 16), encoder_hidden_states=g.f(B, 12, 32), timestep=g.t(1.0),
                img_ids=grid_ids(4, 8), txt_ids=text_ids(12))


@entry("PRXTransformer2DModel", in_channels=4, patch_size=2, context_in_dim=16, hidden_size=32, mlp_ratio=2.0,
       num_heads=2, depth=1, axes_dim=[8, 8])
def _(c, g):
    return dict(hidden_states=g.f(B, 4, 8, 8), timestep=g.t(1.0), encoder_hidden_states=g.f(B, 12, 16),
                attention_mask=g.mask(12).bool())


@entry("PixArtTransformer2DModel", num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=8,
       num_layers=1, norm_num_groups=2, cross_attention_dim=16, sample_size=8, patch_size=2, caption_channels=16,
       use_additional_conditions=False)
def _(c, g):
    return dict(hidden_states=g.f(B, 4, 8, 8), encoder_hidden_states=g.f(B, 12, 16), timestep=g.t(),
                added_cond_kwargs={"resolution": None, "aspect_ratio": None}, encoder_attention_mask=g.mask(12))


@entry("QwenImage21Transformer2DModel", patch_size=1, in_channels=16, out_channels=16, num_layers=1,
       attention_head_dim=16, num_attention_heads=2, context_in_dim=32, axes_dims_rope=(4, 6, 6))
def _(c, g):
    import torch
    from diffusers_models import RandomFactory, make_inputs
    return make_inputs("QwenImage21Transformer2DModel", c, dict(height=128, width=64, text_len=12, batch=B),
                       RandomFactory(torch.float32, 0))


@entry("SD3Transformer2DModel", sample_size=8, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=8,
       num_attention_heads=2, joint_attention_dim=16, caption_projection_dim=16, pooled_projection_dim=16,
       out_channels=4, pos_embed_max_size=8)
def _(c, g):
    return dict(hidden_states=g.f(B, 4, 8, 8), encoder_hidden_states=g.f(B, 12, 16), pooled_projections=g.f(B, 16),
                timestep=g.t())


_SANA = dict(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=8, num_layers=1,
             num_cross_attention_heads=2, cross_attention_head_dim=8, cross_attention_dim=16, caption_channels=16,
             sample_size=8)


@entry("SanaTransformer2DModel", patch_size=2, **_SANA)
def _(c, g):
    return dict(hidden_states=g.f(B, 4, 8, 8), encoder_hidden_states=g.f(B, 12, 16), timestep=g.t(),
                encoder_attention_mask=g.mask(12))


# Three latent frames: a split of the frames (the plan's split is made in whole frames, its
# feed-forward's temporal convolution reading the neighbouring frames) is uneven on 2 ranks.
@entry("SanaVideoTransformer3DModel", patch_size=(1, 2, 2), **_SANA)
def _(c, g):
    return dict(hidden_states=g.f(B, 4, 3, 8, 8), encoder_hidden_states=g.f(B, 12, 16), timestep=g.t(),
                encoder_attention_mask=g.mask(12))


@entry("SanaWMTransformer3DModel",
       tolerance=(1e-3, "its softmax attention runs in bf16 (SanaWMSoftmaxAttention casts q, k and v to bf16 "
                        "before SDPA), so sharded attention rounds differently from diffusers'"),
       in_channels=4, num_layers=1, hidden_size=32, num_attention_heads=2,
       softmax_every_n=1, linear_head_dim=16, chunk_plucker_post_attn_blocks=1, chunk_plucker_channels=8,
       image_size=64, caption_channels=16)
def _(c, g):
    t = g.t().view(B, 1, 1).repeat(1, 1, 2)  # (B, 1, frames): one timestep per latent frame
    return dict(hidden_states=g.f(B, 4, 2, 8, 8), timestep=t, encoder_hidden_states=g.f(B, 1, 12, 16),
                encoder_attention_mask=g.mask(12))


@entry("SanaWMLTX2RefinerTransformer3DModel", in_channels=8, out_channels=8, num_attention_heads=2,
       attention_head_dim=16, cross_attention_dim=32, audio_in_channels=8, audio_out_channels=8,
       audio_num_attention_heads=2, audio_attention_head_dim=8, audio_cross_attention_dim=16, num_layers=1,
       caption_channels=16)
def _(c, g):
    import torch
    n = 32
    return dict(hidden_states=g.f(B, n, 8), encoder_hidden_states=g.f(B, 12, 16), timestep=g.t(1.0),
                video_rotary_emb=(torch.ones(B, n, 32), torch.zeros(B, n, 32)), encoder_attention_mask=g.mask(12))


_WANLIKE = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
                text_dim=16, freq_dim=16, ffn_dim=32, num_layers=1)


@entry("SkyReelsV2Transformer3DModel", **_WANLIKE)
def _(c, g):
    return dict(hidden_states=g.f(B, 4, 2, 8, 8), timestep=g.t(), encoder_hidden_states=g.f(B, 12, 16))


@entry("WanVACETransformer3DModel", vace_layers=[0], vace_in_channels=8, **_WANLIKE)
def _(c, g):
    import torch
    return dict(hidden_states=g.f(B, 4, 2, 8, 8), timestep=g.t(), encoder_hidden_states=g.f(B, 12, 16),
                control_hidden_states=g.f(B, 8, 2, 8, 8), control_hidden_states_scale=torch.ones(1))


@entry("WanAnimateTransformer3DModel", **dict(_WANLIKE, in_channels=12, latent_channels=4, image_dim=16,
       # The face motion encoder's convolutions 16 wide at every size (512 by default: 15M parameters)
       motion_encoder_channel_sizes={"4": 16, "8": 16, "16": 16, "32": 16}, motion_encoder_size=32, motion_style_dim=16, motion_dim=8,
       motion_encoder_dim=16, face_encoder_hidden_dim=16, face_encoder_num_heads=3, inject_face_latents_blocks=1,
       motion_encoder_batch_size=2))
def _(c, g):
    # 3 latent frames, and 5 face frames that the face encoder's two stride-2 convolutions make 2 (and
    # a padding frame 3): the face adapter views the tokens per frame, so a split of them must be in
    # whole frames -- 3, which no CP degree here divides, and not the batch's 2 nor the 4 face tokens
    # per frame (3 face encoder heads and a padding token) the frames attend to.
    return dict(hidden_states=g.f(B, 12, 3, 8, 8), timestep=g.t(), encoder_hidden_states=g.f(B, 12, 16),
                encoder_hidden_states_image=g.f(B, 4, 16), pose_hidden_states=g.f(B, 4, 2, 8, 8),
                face_pixel_values=g.f(B, 3, 5, 32, 32))


@entry("WanAnimate2Transformer3DModel", patch_size=(1, 2, 2), text_len=12, in_dim=12, dim=32, ffn_dim=64, freq_dim=16,
       text_dim=16, out_dim=4, num_heads=2, num_layers=1)
def _(c, g):
    # Its forward runs in one of two modes, both of which store into or read from `kv_cache`, an object
    # with store()/get() (the reference stream's keys and values), not a tensor or JSON value.
    raise SystemExit("the forward needs kv_cache, a cache object with store()/get() (kv_cache_mode 'extract' or "
                     "'cached'), which an inputs file cannot hold")


@entry("ZImageTransformer2DModel", all_patch_size=(2,), all_f_patch_size=(1,), in_channels=4, dim=32, n_layers=1,
       n_refiner_layers=1, n_heads=2, n_kv_heads=2, cap_feat_dim=16, axes_dims=[4, 6, 6], axes_lens=[64, 32, 32])
def _(c, g):
    return dict(x=[g.f(4, 1, 8, 8) for _ in range(B)], t=g.t(1.0), cap_feats=[g.f(12, 16) for _ in range(B)])


# ----------------------------------------------------------------------------------------------

def all_classes():
    import diffusers
    return sorted(n for n in dir(diffusers) if "Transformer" in n and n.endswith("Model"))


def spec_of(cls):
    if cls in KNOWN:
        return _known(cls)
    if cls not in CLASSES:
        raise SystemExit("tools/coverage/classes.py has no entry for %s" % cls)
    e = CLASSES[cls]
    cfg = dict(e["config"])
    return dict(config=cfg, inputs=lambda: e["build"](cfg, Gen(0)), tolerance=e["tolerance"],
                source=json.dumps(cfg, sort_keys=True, default=str) + inspect.getsource(e["build"]))


def source_of(cls):
    return spec_of(cls)["source"]
