"""diffusers transformers' forward inputs as weft's Python tools build them, at a workload.

Shared by tools/export_graph.py (shapes on the meta device), tools/export_program.py (torch.export
programs) and tools/make_fixtures.py (reference outputs on seeded random weights), so that all three
agree on what a model's inputs are.

  make_inputs(cls_name, cfg, workload, factory)   forward keyword arguments at a workload
  EmptyFactory(dtype)                              uninitialised tensors (shapes only)
  RandomFactory(dtype, seed)                       seeded random floats, meaningful control values

A workload is a dict: pixel `height`, `width`, `frames` (video), `text_len`, `batch`, and class
specific keys (`latent_frames`, `history_sizes`, `image_len`, `fps`, `num_timesteps`). Shapes follow
shared/reference/model-configs.md and the classes' pipelines in diffusers 0.42.1.
"""

import contextlib
import copy

# ----------------------------------------------------------------------------------------------
# Tensor factories: what make_inputs builds tensors with.


class EmptyFactory:
    """Uninitialised tensors on the current default device (tools/export_graph.py: shapes only, on the
    meta device). Control tensors the forward reads values from are made on the CPU by make_inputs
    itself (see export_graph.host_values)."""

    def __init__(self, dtype):
        self.dtype = dtype

    def float(self, *shape, dtype=None):
        import torch
        return torch.empty(*shape, dtype=dtype or self.dtype)

    def ints(self, *shape, values=None, dtype=None):
        import torch
        return torch.empty(*shape, dtype=dtype or torch.int64)


class RandomFactory:
    """Seeded random floats and the given values for control tensors, on the CPU."""

    def __init__(self, dtype, seed):
        import torch
        self.dtype = dtype
        self.gen = torch.Generator().manual_seed(seed)

    def float(self, *shape, dtype=None):
        import torch
        return torch.randn(*shape, generator=self.gen, dtype=torch.float32).to(dtype or self.dtype)

    def ints(self, *shape, values=None, dtype=None):
        import torch
        dtype = dtype or torch.int64
        if values is None:
            return torch.zeros(*shape, dtype=dtype)
        return torch.as_tensor(values).to(dtype).reshape(*shape)



def latent_video(frames, height, width, temporal=4, spatial=8):
    return (frames - 1) // temporal + 1, height // spatial, width // spatial


def make_inputs(cls_name, cfg, wl, f):
    """Keyword arguments of `cls_name.forward` at workload `wl`, tensors made by factory `f`.
    Non-tensor arguments (QwenImage's img_shapes, LTX's num_frames ...) are plain Python values."""
    import torch
    B = wl.get("batch", 1)
    T = wl.get("text_len", 512)
    i64 = torch.int64

    if cls_name == "FluxTransformer2DModel":
        n = (wl["height"] // 16) * (wl["width"] // 16)
        kw = dict(hidden_states=f.float(B, n, cfg["in_channels"]),
                  encoder_hidden_states=f.float(B, T, cfg["joint_attention_dim"]),
                  pooled_projections=f.float(B, cfg.get("pooled_projection_dim", 768)),
                  timestep=f.float(B), img_ids=f.float(n, 3, dtype=torch.float32),
                  txt_ids=f.float(T, 3, dtype=torch.float32))
        if cfg.get("guidance_embeds", False):
            kw["guidance"] = f.float(B)
        return kw
    if cls_name == "Flux2Transformer2DModel":
        n = (wl["height"] // 16) * (wl["width"] // 16)
        kw = dict(hidden_states=f.float(B, n, cfg["in_channels"]),
                  encoder_hidden_states=f.float(B, T, cfg["joint_attention_dim"]),
                  timestep=f.float(B), img_ids=f.float(B, n, 4, dtype=torch.float32),
                  txt_ids=f.float(B, T, 4, dtype=torch.float32))
        if cfg.get("guidance_embeds", True):
            kw["guidance"] = f.float(B)
        return kw
    if cls_name == "QwenImageTransformer2DModel":
        h, w = wl["height"] // 16, wl["width"] // 16
        return dict(hidden_states=f.float(B, h * w, cfg["in_channels"]),
                    encoder_hidden_states=f.float(B, T, cfg["joint_attention_dim"]),
                    encoder_hidden_states_mask=f.ints(B, T, values=[1] * (B * T)),
                    timestep=f.float(B), img_shapes=[[(1, h, w)]] * B)
    if cls_name == "QwenImage21Transformer2DModel":
        # Text-to-image as QwenImage21Pipeline calls it (diffusers 0.42.1): the VAE downsamples 16x
        # and the latents go in unpatched, one token per 16x16 pixels with in_channels channels; the
        # pipeline floors height and width to multiples of 32 so that each vision-language slot
        # covers 2x2 latent tokens. encoder_hidden_states: the T text tokens left after the system
        # prompt is dropped, not padded at batch 1, so encoder_hidden_states_mask is None (the
        # pipeline drops an all-ones mask). img_mask: False for each text token (no condition
        # image), then one True slot per 2x2 target tokens (its `append_target_slots`). The model
        # reads img_mask's values to lay out the joint sequence, so it is a real CPU tensor.
        if wl["height"] % 32 or wl["width"] % 32:
            raise SystemExit("QwenImage 2.1 takes multiples of 32 pixels, not %dx%d" % (wl["width"], wl["height"]))
        h, w = wl["height"] // 16, wl["width"] // 16
        p = cfg.get("patch_size", 1)
        img_mask = torch.cat([torch.zeros(B, T, dtype=torch.bool, device="cpu"),
                              torch.ones(B, h * w // 4, dtype=torch.bool, device="cpu")], dim=1)
        return dict(hidden_states=f.float(B, h * w, cfg["in_channels"] * p * p),
                    encoder_hidden_states=f.float(B, T, cfg["context_in_dim"]),
                    timestep=f.float(B), img_shapes=[[(1, h, w)]] * B, img_mask=img_mask)
    if cls_name in ("WanTransformer3DModel", "ChronoEditTransformer3DModel", "SkyReelsV2Transformer3DModel",
                    "WanVACETransformer3DModel"):
        fr, h, w = latent_video(wl["frames"], wl["height"], wl["width"])
        kw = dict(hidden_states=f.float(B, cfg["in_channels"], fr, h, w), timestep=f.float(B),
                  encoder_hidden_states=f.float(B, T, cfg["text_dim"]))
        if cfg.get("image_dim"):
            kw["encoder_hidden_states_image"] = f.float(B, wl.get("image_len", 257), cfg["image_dim"])
        if cls_name == "WanVACETransformer3DModel":
            # WanVACEPipeline: the control video (masked frames and reference latents) at the
            # latents' grid with vace_in_channels channels, and one scale per VACE block.
            vace = cfg.get("vace_layers", [0, 5, 10, 15, 20, 25, 30, 35])
            kw["control_hidden_states"] = f.float(B, cfg.get("vace_in_channels", 96), fr, h, w)
            kw["control_hidden_states_scale"] = f.float(len(vace), dtype=torch.float32)
        return kw
    if cls_name == "HeliosTransformer3DModel":
        fr, h, w = wl["latent_frames"], wl["height"] // 8, wl["width"] // 8
        long_, mid, short = wl["history_sizes"][0], wl["history_sizes"][1], wl["history_sizes"][2] + 1
        c = cfg["in_channels"]
        # Frame indices as the pipeline lays them out: long, mid, short history, then the chunk.
        start = long_ + mid + short
        return dict(hidden_states=f.float(B, c, fr, h, w), timestep=f.float(B),
                    encoder_hidden_states=f.float(B, T, cfg["text_dim"]),
                    indices_hidden_states=f.ints(1, fr, values=list(range(start, start + fr))),
                    indices_latents_history_short=f.ints(1, short, values=list(range(long_ + mid, start))),
                    indices_latents_history_mid=f.ints(1, mid, values=list(range(long_, long_ + mid))),
                    indices_latents_history_long=f.ints(1, long_, values=list(range(long_))),
                    latents_history_short=f.float(B, c, short, h, w),
                    latents_history_mid=f.float(B, c, mid, h, w),
                    latents_history_long=f.float(B, c, long_, h, w))
    if cls_name == "LTXVideoTransformer3DModel":
        fr, h, w = latent_video(wl["frames"], wl["height"], wl["width"], 8, 32)
        return dict(hidden_states=f.float(B, fr * h * w, cfg["in_channels"]),
                    encoder_hidden_states=f.float(B, T, cfg["caption_channels"]), timestep=f.float(B),
                    encoder_attention_mask=f.ints(B, T, values=[1] * (B * T), dtype=f.dtype),
                    num_frames=fr, height=h, width=w,
                    rope_interpolation_scale=(8 / wl.get("fps", 25), 32, 32))
    if cls_name == "LTX2VideoTransformer3DModel":
        fr, h, w = latent_video(wl["frames"], wl["height"], wl["width"], 8, 32)
        fps = wl.get("fps", 24.0)
        audio = wl["audio_frames"] if "audio_frames" in wl else round(wl["frames"] / fps * 25)
        return dict(hidden_states=f.float(B, fr * h * w, cfg["in_channels"]),
                    audio_hidden_states=f.float(B, audio, cfg["audio_in_channels"]),
                    encoder_hidden_states=f.float(B, T, cfg["caption_channels"]),
                    audio_encoder_hidden_states=f.float(B, T, cfg["caption_channels"]),
                    timestep=f.float(B), encoder_attention_mask=f.ints(B, T, values=[1] * (B * T), dtype=f.dtype),
                    audio_encoder_attention_mask=f.ints(B, T, values=[1] * (B * T), dtype=f.dtype),
                    num_frames=fr, height=h, width=w, fps=fps, audio_num_frames=audio)
    if cls_name == "MiniMaxH3Transformer3DModel":
        lat = wl["latent_frames"] if "latent_frames" in wl else (wl["frames"] - 5) // 17 * 5 + 2
        h, w = wl["height"] // 32, wl["width"] // 32
        nv = lat * h * w
        na = wl["audio_tokens"] if "audio_tokens" in wl else 2 * round(wl["frames"] / 24 * 40)
        s = T + na + nv
        nt = wl.get("num_timesteps", 1)
        # The packed sequence: text rows, then audio, then video; every row at timestep 0 of `timestep`.
        tags = [1] * T + [2] * na + [0] * nv
        positions = f.float(s, 3, dtype=torch.float64)
        return dict(hidden_states=f.float(B, nv, cfg["in_channels"] * 4),
                    audio_hidden_states=f.float(B, na, cfg["audio_in_channels"]),
                    encoder_hidden_states=f.float(B, T, cfg["text_dim"]),
                    timestep=f.float(nt),
                    timestep_indices=f.ints(s, values=[0] * s), token_tags=f.ints(s, values=tags),
                    position_ids=positions,
                    video_indices=f.ints(nv, values=list(range(T + na, s))),
                    audio_indices=f.ints(na, values=list(range(T, T + na))),
                    text_indices=f.ints(T, values=list(range(T))))
    if cls_name == "MochiTransformer3DModel":
        # MochiPipeline: latents (B, in_channels, frames, h, w) from its VAE (8x spatial, 6x
        # temporal), T5 embeddings padded to max_sequence_length with their attention mask, float
        # timesteps. The model keeps each sample's valid text tokens with nonzero, so the mask is a
        # real CPU tensor (all tokens valid) even where the rest is on meta.
        fr, h, w = latent_video(wl["frames"], wl["height"], wl["width"], 6, 8)
        T = cfg.get("max_sequence_length", 256)
        return dict(hidden_states=f.float(B, cfg.get("in_channels", 12), fr, h, w),
                    encoder_hidden_states=f.float(B, T, cfg.get("text_embed_dim", 4096)), timestep=f.float(B),
                    encoder_attention_mask=torch.ones(B, T, dtype=torch.bool, device="cpu"))
    if cls_name == "HunyuanVideoTransformer3DModel":
        fr, h, w = latent_video(wl["frames"], wl["height"], wl["width"])
        return dict(hidden_states=f.float(B, cfg["in_channels"], fr, h, w), timestep=f.float(B),
                    encoder_hidden_states=f.float(B, T, cfg["text_embed_dim"]),
                    encoder_attention_mask=f.ints(B, T, values=[1] * (B * T)),
                    pooled_projections=f.float(B, cfg.get("pooled_projection_dim", 768)),
                    guidance=f.float(B))
    if cls_name == "CogVideoXTransformer3DModel":
        # CogVideoXPipeline: latents (B, frames, channels, h, w) -- frames before channels -- the
        # text padded to max_text_seq_length, integer timesteps, and (cos, sin) of the video
        # tokens' 3-D RoPE, (tokens, head_dim) each, when the config uses rotary embeddings.
        fr, h, w = latent_video(wl["frames"], wl["height"], wl["width"])
        T = cfg.get("max_text_seq_length", 226)
        kw = dict(hidden_states=f.float(B, fr, cfg["in_channels"], h, w),
                  encoder_hidden_states=f.float(B, T, cfg.get("text_embed_dim", 4096)),
                  timestep=f.ints(B, values=[500] * B))
        if cfg.get("use_rotary_positional_embeddings"):
            p = cfg.get("patch_size", 2)
            n = fr * (h // p) * (w // p)
            d = cfg.get("attention_head_dim", 64)
            kw["image_rotary_emb"] = (f.float(n, d, dtype=torch.float32), f.float(n, d, dtype=torch.float32))
        return kw
    if cls_name == "SanaTransformer2DModel":
        # SanaPipeline: DC-AE latents, 32x spatial compression, `in_channels` channels; the Gemma-2
        # caption padded to max_sequence_length (300) with its attention mask; float timesteps.
        h, w = wl["height"] // 32, wl["width"] // 32
        return dict(hidden_states=f.float(B, cfg.get("in_channels", 32), h, w),
                    encoder_hidden_states=f.float(B, T, cfg.get("caption_channels", 2304)),
                    encoder_attention_mask=f.ints(B, T, values=[1] * (B * T)), timestep=f.float(B))
    if cls_name == "SanaVideoTransformer3DModel":
        # SanaVideoPipeline: Wan-VAE latents (4x temporal, 8x spatial compression), `in_channels`
        # channels before the frames; the Gemma-2 caption padded to max_sequence_length (300) with
        # its attention mask; float timesteps.
        fr, h, w = latent_video(wl["frames"], wl["height"], wl["width"])
        return dict(hidden_states=f.float(B, cfg.get("in_channels", 16), fr, h, w),
                    encoder_hidden_states=f.float(B, T, cfg.get("caption_channels", 2304)),
                    encoder_attention_mask=f.ints(B, T, values=[1] * (B * T)), timestep=f.float(B))
    if cls_name in ("CogView4Transformer2DModel", "CogView3PlusTransformer2DModel"):
        # CogView4Pipeline / CogView3PlusPipeline: 16-channel latents (8x), the prompt's GLM-4 / T5
        # features, and the micro-conditions original size, target size and crop corner in pixels.
        h, w = wl["height"] // 8, wl["width"] // 8
        size = [float(wl["height"]), float(wl["width"])] * B
        return dict(hidden_states=f.float(B, cfg.get("in_channels", 16), h, w),
                    encoder_hidden_states=f.float(B, T, cfg.get("text_embed_dim", 4096)), timestep=f.float(B),
                    original_size=f.ints(B, 2, values=size, dtype=f.dtype),
                    target_size=f.ints(B, 2, values=size, dtype=f.dtype),
                    crop_coords=f.ints(B, 2, values=[0.0] * (2 * B), dtype=f.dtype))
    if cls_name == "PixArtTransformer2DModel":
        # PixArtSigmaPipeline: 4-channel latents (8x), T5 captions padded to max_sequence_length
        # with their mask; the micro-conditions are off in the Sigma config.
        h, w = wl["height"] // 8, wl["width"] // 8
        return dict(hidden_states=f.float(B, cfg.get("in_channels", 4), h, w),
                    encoder_hidden_states=f.float(B, T, cfg.get("caption_channels", 4096)),
                    encoder_attention_mask=f.ints(B, T, values=[1] * (B * T)), timestep=f.float(B),
                    added_cond_kwargs={"resolution": None, "aspect_ratio": None})
    if cls_name == "SD3Transformer2DModel":
        # StableDiffusion3Pipeline: 16-channel latents (8x); CLIP-L/G (77) and T5 (256) tokens
        # joined, 4096 features; the CLIP pooled projections.
        h, w = wl["height"] // 8, wl["width"] // 8
        return dict(hidden_states=f.float(B, cfg.get("in_channels", 16), h, w),
                    encoder_hidden_states=f.float(B, T, cfg.get("joint_attention_dim", 4096)),
                    pooled_projections=f.float(B, cfg.get("pooled_projection_dim", 2048)), timestep=f.float(B))
    if cls_name == "AuraFlowTransformer2DModel":
        # AuraFlowPipeline: 4-channel latents (8x), Pile-T5 captions padded to 256 tokens.
        h, w = wl["height"] // 8, wl["width"] // 8
        return dict(hidden_states=f.float(B, cfg.get("in_channels", 4), h, w),
                    encoder_hidden_states=f.float(B, T, cfg.get("joint_attention_dim", 2048)), timestep=f.float(B))
    if cls_name == "ChromaTransformer2DModel":
        # ChromaPipeline: Flux's packed 64-channel latents (2x2 patches of 16 channels at 8x), T5-XXL
        # captions padded to max_sequence_length 512, and `attention_mask` over text + image: the
        # text mask in the text encoder's float dtype (padding masked but its first position) joined
        # to ones for the image tokens. No pooled projection, no guidance embedding.
        n = (wl["height"] // 16) * (wl["width"] // 16)
        return dict(hidden_states=f.float(B, n, cfg.get("in_channels", 64)),
                    encoder_hidden_states=f.float(B, T, cfg.get("joint_attention_dim", 4096)),
                    timestep=f.float(B), img_ids=f.float(n, 3, dtype=torch.float32),
                    txt_ids=f.float(T, 3, dtype=torch.float32),
                    attention_mask=f.ints(B, T + n, values=[1.0] * (B * (T + n)), dtype=f.dtype))
    if cls_name == "DiTTransformer2DModel":
        # DiTPipeline: 4-channel SD-VAE latents (8x), ImageNet class labels (1000 = the null class of
        # classifier-free guidance) and integer timesteps, one per sample.
        h, w = wl["height"] // 8, wl["width"] // 8
        return dict(hidden_states=f.float(B, cfg.get("in_channels", 4), h, w),
                    timestep=f.ints(B, values=[500] * B), class_labels=f.ints(B, values=[207] * B))
    if cls_name == "LatteTransformer3DModel":
        # LattePipeline: 4-channel SD-VAE latents (8x) of `video_length` frames, T5 captions padded to
        # max_sequence_length 120 (the pipeline passes no mask), one timestep per sample.
        h, w = wl["height"] // 8, wl["width"] // 8
        return dict(hidden_states=f.float(B, cfg.get("in_channels", 4), wl.get("frames", 16), h, w),
                    encoder_hidden_states=f.float(B, T, cfg.get("caption_channels", 4096)), timestep=f.float(B))
    if cls_name == "AllegroTransformer3DModel":
        # AllegroPipeline: 4-channel latents (8x spatial, 4x temporal), T5 captions padded to 512 tokens
        # with their mask, and the RoPE of _prepare_rotary_positional_embeddings: per-axis (cos, sin)
        # tables of head_dim / 3 features and every token's (t, h, w) grid position, (1, tokens) each.
        fr, h, w = (wl.get("frames", 88) + 3) // 4, wl["height"] // 8, wl["width"] // 8
        p = cfg.get("patch_size", 2)
        d = cfg.get("attention_head_dim", 96) // 3
        grid = [(t, i, j) for t in range(fr) for i in range(h // p) for j in range(w // p)]  # plain ints: meta-safe
        pos = [f.ints(1, len(grid), values=[g[a] for g in grid]) for a in range(3)]
        tables = tuple((f.float(n, d, dtype=torch.float32), f.float(n, d, dtype=torch.float32))
                       for n in (fr, h // p, w // p))
        return dict(hidden_states=f.float(B, cfg.get("in_channels", 4), fr, h, w),
                    encoder_hidden_states=f.float(B, T, cfg.get("caption_channels", 4096)), timestep=f.float(B),
                    encoder_attention_mask=f.ints(B, T, values=[1] * (B * T)),
                    image_rotary_emb=(tables, tuple(pos)))
    if cls_name == "CosmosTransformer3DModel":
        # Cosmos2TextToImagePipeline: Wan-VAE latents (B, in_channels, frames, h, w) at 8x spatial,
        # 4x temporal compression (one latent frame for an image); T5-11B captions padded to
        # max_sequence_length 512 (padding rows zeroed, no attention mask passed); one float
        # timestep per sample; and the padding mask, zeros (1, 1, height, width) at the *pixel*
        # size, which the forward resizes to the latents' and repeats over batch and frames.
        fr, h, w = latent_video(wl.get("frames", 1), wl["height"], wl["width"])
        return dict(hidden_states=f.float(B, cfg.get("in_channels", 16), fr, h, w), timestep=f.float(B),
                    encoder_hidden_states=f.float(B, T, cfg.get("text_embed_dim", 1024)),
                    padding_mask=f.float(1, 1, wl["height"], wl["width"]))
    if cls_name in ("BriaTransformer2DModel", "LongCatImageTransformer2DModel"):
        # BriaPipeline / LongCatImagePipeline: the VAE's latents (8x) packed 2x2 into one token per
        # 16x16 pixels of in_channels channels; T5-XXL captions zero-padded to max_sequence_length
        # (Bria: 128) / the Qwen2.5-VL last hidden states of the caption padded to
        # tokenizer_max_length (LongCat: 512, the template's prefix and suffix cut off); one float
        # timestep per sample; 2-D position ids without a batch dim: zeros for the text, (0, row,
        # col) for the image tokens (float32 as the forward joins them). No pooled projection, no
        # guidance, no text mask.
        n = (wl["height"] // 16) * (wl["width"] // 16)
        return dict(hidden_states=f.float(B, n, cfg.get("in_channels", 64)),
                    encoder_hidden_states=f.float(B, T, cfg.get("joint_attention_dim", 4096)),
                    timestep=f.float(B), img_ids=f.float(n, 3, dtype=torch.float32),
                    txt_ids=f.float(T, 3, dtype=torch.float32))
    if cls_name == "BriaFiboTransformer2DModel":
        # BriaFiboPipeline (do_patching False): Wan 2.2 VAE latents, 16x spatial compression, one
        # token per 16x16 pixels with in_channels channels; SmolLM3 text features: its last two
        # hidden states joined (joint_attention_dim) and one hidden state per transformer block
        # (text_encoder_layers, text_encoder_dim each; the pipeline keeps the last ones or repeats
        # the final one to get num_layers + num_single_layers), T tokens (the longest prompt, no
        # padding at batch 1, so no attention mask); one float timestep per sample; 2-D position
        # ids: zeros for the text, (0, row, col) for the image tokens.
        n = (wl["height"] // 16) * (wl["width"] // 16)
        layers = cfg.get("num_layers", 19) + cfg.get("num_single_layers", 38)
        return dict(hidden_states=f.float(B, n, cfg.get("in_channels", 64)),
                    encoder_hidden_states=f.float(B, T, cfg.get("joint_attention_dim", 4096)),
                    text_encoder_layers=[f.float(B, T, cfg.get("text_encoder_dim", 2048)) for _ in range(layers)],
                    timestep=f.float(B), img_ids=f.float(n, 3, dtype=torch.float32),
                    txt_ids=f.float(T, 3, dtype=torch.float32))
    if cls_name == "Kandinsky5Transformer3DModel":
        # Kandinsky5T2VPipeline: HunyuanVideo-VAE latents channels-last (B, frames, h, w, C) at 4x
        # temporal, 8x spatial compression; with visual_cond the pipeline appends zero condition
        # latents and a zero mask channel, so C = 2 * in_visual_dim + 1. Qwen2.5-VL text features
        # (not padded beyond the longest prompt: T tokens at batch 1), CLIP pooled features, one
        # float timestep per sample. RoPE positions: per-axis indices of the 2x2-patched latent grid
        # and the text positions 0..T-1 (the forward indexes its frequency tables with them); the
        # RoPE scale (1, 2, 2) inside 480..854 pixels a side, else (1, 3.16, 3.16); no sparse
        # attention for attention_type "regular" (the NABLA 10s checkpoints pass sparse_params).
        fr, h, w = latent_video(wl["frames"], wl["height"], wl["width"])
        c = cfg.get("in_visual_dim", 4)
        c = 2 * c + 1 if cfg.get("visual_cond", False) else c
        p = cfg.get("patch_size", (1, 2, 2))
        small = all(480 <= x <= 854 for x in (wl["height"], wl["width"]))
        return dict(hidden_states=f.float(B, fr, h, w, c),
                    encoder_hidden_states=f.float(B, T, cfg.get("in_text_dim", 3584)), timestep=f.float(B),
                    pooled_projections=f.float(B, cfg.get("in_text_dim2", 768)),
                    visual_rope_pos=[list(range(fr // p[0])), list(range(h // p[1])), list(range(w // p[2]))],
                    text_rope_pos=f.ints(T, values=list(range(T))),
                    scale_factor=(1, 2, 2) if small else (1, 3.16, 3.16))
    if cls_name == "OvisImageTransformer2DModel":
        # OvisImagePipeline: Flux-style packed latents (2x2 patches of 16 channels at 8x, so
        # in_channels 64, one token per 16x16 pixels), Qwen3 last hidden states (2048 features) of
        # the chat-templated caption padded to max_sequence_length 256 once the 28 system-prompt
        # tokens are cut off (padding rows zeroed, no mask passed), timestep / 1000 per sample, and
        # 2-D position ids without a batch dim, txt_ids (T, 3) and img_ids (n, 3), both in the
        # pipeline's dtype (the text encoder's / the latents').
        n = (wl["height"] // 16) * (wl["width"] // 16)
        return dict(hidden_states=f.float(B, n, cfg.get("in_channels", 64)),
                    encoder_hidden_states=f.float(B, T, cfg.get("joint_attention_dim", 2048)),
                    timestep=f.float(B), img_ids=f.float(n, 3), txt_ids=f.float(T, 3))
    if cls_name == "OmniGenTransformer2DModel":
        # OmniGenPipeline, text to image: 4-channel SD-VAE latents (8x) in the transformer's dtype, the
        # scheduler's float32 timesteps (0..1, one per sample), and what its OmniGenMultiModalProcessor
        # makes of the chat-templated prompt: T token ids (no input images: input_img_latents [] and
        # input_image_sizes {}), a float32 (B, S, S) mask over the S = T + 1 + n tokens (text, the time
        # token, the image) -- causal over the text and the time token, which see no image; the image
        # rows see every token -- and position_ids 0..S-1. No row is padded here (the pipeline
        # left-pads the shorter of prompt / negative prompt). The model reads position_ids' values
        # (its RoPE switches to the long factors when max + 1 > original_max_position_embeddings), so
        # they are a real CPU tensor; the mask's values only reach the attention, so the CPU tensor
        # below only gives a RandomFactory its values.
        h, w = wl["height"] // 8, wl["width"] // 8
        p = cfg.get("patch_size", 2)
        S = T + 1 + (h // p) * (w // p)
        mask = torch.ones(S, S, dtype=torch.float32, device="cpu").tril()
        mask[T + 1:, :] = 1.0
        vocab = cfg.get("vocab_size", 32064)
        return dict(hidden_states=f.float(B, cfg.get("in_channels", 4), h, w),
                    timestep=f.float(B, dtype=torch.float32),
                    input_ids=f.ints(B, T, values=[1 + (7919 * i) % (vocab - 1) for i in range(B * T)]),
                    input_img_latents=[], input_image_sizes={},
                    attention_mask=f.ints(B, S, S, values=mask.expand(B, S, S), dtype=torch.float32),
                    position_ids=torch.arange(S, dtype=i64, device="cpu").unsqueeze(0).expand(B, -1).contiguous())
    if cls_name == "Krea2Transformer2DModel":
        # Krea2Pipeline: Qwen-Image VAE latents (8x) packed in 2x2 patches, (B, h*w, in_channels); the
        # prompt padded to max_sequence_length (512) text tokens, each a stack of num_text_layers tapped
        # Qwen3-VL hidden states, (B, T, layers, text_hidden_dim), with its boolean key mask; timesteps
        # t / 1000 in [0, 1]; position_ids (T + h*w, 3) in float32: zeros for the text, (0, row, col)
        # for the image grid.
        h, w = wl["height"] // 16, wl["width"] // 16
        pos = [0.0] * (3 * T) + [float(v) for i in range(h) for j in range(w) for v in (0, i, j)]
        return dict(hidden_states=f.float(B, h * w, cfg.get("in_channels", 64)),
                    encoder_hidden_states=f.float(B, T, cfg.get("num_text_layers", 12), cfg.get("text_hidden_dim", 2560)),
                    timestep=f.float(B), position_ids=f.ints(T + h * w, 3, values=pos, dtype=torch.float32),
                    encoder_attention_mask=f.ints(B, T, values=[True] * (B * T), dtype=torch.bool))
    if cls_name == "JoyImageEditTransformer3DModel":
        # JoyImageEditPipeline: Wan-VAE latents (8x) of one frame per item, (B, items, C, 1, h, w): the
        # reference image's latents, then the noisy target (items = 2 for an edit, 1 without an image);
        # the Qwen3-VL last hidden states of the template-dropped multimodal prompt (the reference
        # image's vision tokens plus the instruction), not padded, so T is that prompt's length; float
        # timesteps. The forward moves the target item first and joins the items along the frames.
        h, w = wl["height"] // 8, wl["width"] // 8
        return dict(hidden_states=f.float(B, wl.get("items", 2), cfg.get("in_channels", 16), 1, h, w),
                    timestep=f.float(B), encoder_hidden_states=f.float(B, T, cfg.get("text_dim", 4096)))
    if cls_name == "AceStepTransformer1DModel":
        # AceStepPipeline, text2music: latents at latents_per_second (48 kHz / 1920 = 25) for `duration`
        # seconds, (B, frames, audio_acoustic_hidden_dim); context_latents the source latents (silence
        # for text2music) joined with the chunk mask, in_channels - acoustic channels; the condition
        # encoder's packed lyrics + timbre + caption sequence (B, T, encoder_hidden_size), passed
        # without a mask; timestep and timestep_r both the current t (float). With CFG the pipeline
        # batches the conditional and null-condition halves in one call (batch 2).
        import math
        n = wl["latent_frames"] if "latent_frames" in wl else math.ceil(wl["duration"] * wl.get("latents_per_second", 25.0))
        a = cfg.get("audio_acoustic_hidden_dim", 64)
        e = cfg.get("encoder_hidden_size") or cfg.get("hidden_size", 2048)
        return dict(hidden_states=f.float(B, n, a), timestep=f.float(B), timestep_r=f.float(B),
                    encoder_hidden_states=f.float(B, T, e),
                    context_latents=f.float(B, n, cfg.get("in_channels", 192) - a))
    if cls_name == "HiDreamImageTransformer2DModel":
        # HiDreamImagePipeline: 16-channel latents (8x) as (B, C, h, w) -- the model patchifies them
        # itself (square latents: no hidden_states_masks, img_ids or img_sizes passed); the
        # scheduler's float32 timesteps unscaled (0..1000); T5-XXL last hidden states padded to
        # max_sequence_length (128); every Llama-3.1-8B hidden state after the embeddings stacked as
        # (layers, B, T, 4096) -- the model picks cfg["llama_layers"] out of it, so the stack is as deep
        # as its largest index + 1 (32 = all of Llama-3.1-8B's layers for the published config); and
        # CLIP-L + CLIP-G pooled embeddings joined (text_emb_dim 2048).
        h, w = wl["height"] // 8, wl["width"] // 8
        t5_dim, llama_dim = cfg.get("caption_channels", [4096, 4096])
        n_llama = max(cfg.get("llama_layers", [31])) + 1
        return dict(hidden_states=f.float(B, cfg.get("in_channels", 16), h, w),
                    timesteps=f.float(B, dtype=torch.float32),
                    encoder_hidden_states_t5=f.float(B, T, t5_dim),
                    encoder_hidden_states_llama3=f.float(n_llama, B, T, llama_dim),
                    pooled_embeds=f.float(B, cfg.get("text_emb_dim", 2048)))
    if cls_name == "WanAnimateTransformer3DModel":
        # WanAnimatePipeline, animate mode, one inference segment of `frames` (segment_frame_length)
        # video frames: hidden_states joins the noisy latents (latent_channels) with the reference
        # latents (4 mask + latent_channels channels) on the channel axis, one more latent frame than
        # the segment has (the reference image's frame first); the pose video's latents at the
        # segment's latent frames; the face video in pixels, motion_encoder_size square, one frame per
        # video frame; umT5 prompt embeddings padded to max_sequence_length (512) and the reference
        # image's CLIP features (257 tokens) as encoder_hidden_states_image; float timesteps.
        fr, h, w = latent_video(wl["frames"], wl["height"], wl["width"])
        face = cfg.get("motion_encoder_size", 512)
        return dict(hidden_states=f.float(B, cfg.get("in_channels", 36), fr + 1, h, w), timestep=f.float(B),
                    encoder_hidden_states=f.float(B, T, cfg.get("text_dim", 4096)),
                    encoder_hidden_states_image=f.float(B, wl.get("image_len", 257), cfg.get("image_dim", 1280)),
                    pose_hidden_states=f.float(B, cfg.get("latent_channels", 16), fr, h, w),
                    face_pixel_values=f.float(B, 3, wl["frames"], face, face))
    if cls_name == "GlmImageTransformer2DModel":
        # GlmImagePipeline, text-to-image (no condition images, so no kv_caches): 16-channel latents
        # (8x); encoder_hidden_states the ByT5 glyph embeddings of the prompt's quoted text (not padded
        # to a fixed length); prior_token_id the AR model's d32 image tokens upsampled 2x, one per
        # latent patch, with prior_token_drop False (the conditional branch; all True for the
        # unconditional one); timesteps t - 1 (float32); target_size (H, W) and crop_coords (0, 0) in
        # pixels, in the prompt embeddings' dtype. The forward zeroes the dropped prior embeddings by
        # boolean indexing, so prior_token_drop is a real CPU tensor.
        h, w = wl["height"] // 8, wl["width"] // 8
        p = cfg.get("patch_size", 2)
        n = (h // p) * (w // p)
        book = cfg.get("prior_vq_quantizer_codebook_size", 16384)
        size = [float(wl["height"]), float(wl["width"])] * B
        return dict(hidden_states=f.float(B, cfg.get("in_channels", 16), h, w),
                    encoder_hidden_states=f.float(B, T, cfg.get("text_embed_dim", 1472)),
                    prior_token_id=f.ints(B, n, values=[(7 * i) % book for i in range(B * n)]),
                    prior_token_drop=torch.zeros(B, n, dtype=torch.bool, device="cpu"),
                    timestep=f.float(B, dtype=torch.float32),
                    target_size=f.ints(B, 2, values=size, dtype=f.dtype),
                    crop_coords=f.ints(B, 2, values=[0.0] * (2 * B), dtype=f.dtype))
    if cls_name == "Ideogram4Transformer2DModel":
        # Ideogram4Pipeline: one packed sequence per sample, [left padding | prompt tokens | image
        # tokens], T = max_sequence_length (2048) text slots then the (H/16)*(W/16) image tokens (VAE 8x,
        # patch 2). hidden_states: zeros in the text slots, then the patchified latents (in_channels);
        # encoder_hidden_states: the 13 tapped Qwen3-VL layers' features in the prompt slots, zeros
        # elsewhere (llm_features_dim); position_ids (t, h, w): zeros for padding, (i, i, i) for the i-th
        # prompt token, (0, row, col) + 65536 for the image; segment_ids -1 for padding, 1 for the
        # sample; indicator 0 padding, 3 text, 2 image; timesteps 1 - t/1000 in [0, 1]. T = 0 is the
        # unconditional_transformer's call (image tokens only, zeroed text features). The prompt fills
        # prompt_tokens of the T slots (all of them unless given).
        h, w = wl["height"] // 16, wl["width"] // 16
        n, S = h * w, T + h * w
        k = min(wl.get("prompt_tokens", T), T)
        pos, seg, ind = [], [], []
        for _ in range(B):
            pos += [0] * (3 * (T - k)) + [v for i in range(k) for v in (i, i, i)]
            pos += [v for i in range(h) for j in range(w) for v in (65536, 65536 + i, 65536 + j)]
            seg += [-1] * (T - k) + [1] * (k + n)
            ind += [0] * (T - k) + [3] * k + [2] * n
        return dict(hidden_states=f.float(B, S, cfg.get("in_channels", 128)), timestep=f.float(B),
                    encoder_hidden_states=f.float(B, S, cfg.get("llm_features_dim", 53248)),
                    position_ids=f.ints(B, S, 3, values=pos), segment_ids=f.ints(B, S, values=seg),
                    indicator=f.ints(B, S, values=ind))
    if cls_name == "HunyuanImageTransformer2DModel":
        # HunyuanImagePipeline: 64-channel latents of its 32x VAE, (B, C, H/32, W/32); the Qwen2.5-VL
        # prompt padded to tokenizer_max_length (1000, after the 34 template tokens are dropped) and
        # the ByT5 glyph prompt padded to tokenizer_2_max_length (128), each with its attention mask;
        # float timesteps. guidance (x1000) only for a guidance-distilled config, timestep_r (the next
        # timestep) only for a meanflow one. The forward reorders each sample's text by its masks
        # (valid ByT5, valid Qwen, then the padding, by boolean indexing), so the masks are real CPU
        # tensors: all tokens valid here, which gives the same shapes as any other prompt.
        h, w = wl["height"] // 32, wl["width"] // 32
        T2 = wl.get("text_2_len", 128)
        kw = dict(hidden_states=f.float(B, cfg.get("in_channels", 64), h, w), timestep=f.float(B),
                  encoder_hidden_states=f.float(B, T, cfg.get("text_embed_dim", 3584)),
                  encoder_attention_mask=torch.ones(B, T, dtype=i64, device="cpu"))
        if cfg.get("text_embed_2_dim"):
            kw["encoder_hidden_states_2"] = f.float(B, T2, cfg["text_embed_2_dim"])
            kw["encoder_attention_mask_2"] = torch.ones(B, T2, dtype=i64, device="cpu")
        if cfg.get("guidance_embeds", False):
            kw["guidance"] = f.float(B)
        if cfg.get("use_meanflow", False):
            kw["timestep_r"] = f.float(B)
        return kw
    raise SystemExit("no input builder for class %s" % cls_name)


# ----------------------------------------------------------------------------------------------
# Seeded weights, identical to weft's nn::RandomizeParameters / SeededValues (runtime/nn/
# load_weights.h): element i of parameter `fqn` is scale * u_i, u_i uniform in [-1, 1) from a
# splitmix64 stream keyed by the name and the seed, all exact in fp32, so a diffusers model and a
# weft model given the same seed hold the same bits without a checkpoint.

_MASK = (1 << 64) - 1


def _splitmix64(x):
    import numpy as np
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _fnv1a64(text):
    h = 0xcbf29ce484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001b3) & _MASK
    return h


def seeded_values(fqn, shape, seed):
    """The fp32 values weft's SeededValues gives parameter `fqn` of `shape`."""
    import math
    import numpy as np
    import torch
    n = int(np.prod(shape)) if len(shape) else 1
    scale = np.float32(0.5) if len(shape) <= 1 else np.float32(1.0 / math.sqrt(max(1, n // max(1, shape[0]))))
    base = _splitmix64(np.array([(seed ^ _fnv1a64(fqn)) & _MASK], dtype=np.uint64))[0]
    with np.errstate(over="ignore"):
        bits = _splitmix64(base + np.arange(n, dtype=np.uint64))
    u = (bits >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 8388608.0) - np.float32(1.0)
    return torch.from_numpy((u * scale).astype(np.float32).reshape(shape))


def seeded_weights(model, seed):
    """Fills every parameter of `model` with weft's seeded values (in the parameter's dtype)."""
    import torch
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(seeded_values(name, tuple(p.shape), seed).to(p.dtype))
