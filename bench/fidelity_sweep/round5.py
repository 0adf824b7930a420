"""Fifth round, from small configs: detection-style post-processing with data-dependent shapes
(topk, nonzero, masked_select, a greedy NMS loop), T5 beam-search `generate()`, a diffusers
`UNet2DModel` DDPM training step, `torch.compile` around a submodule with a graph break,
non-reentrant activation checkpointing under bf16 autocast, `nn.LSTM` with `proj_size`, a PPO clip
loss with `torch.distributions`, `grid_sample` / `interpolate` on channels_last, `torch.ao` dynamic
quantization, `torch.autograd.functional` jacobian and hessian, a hand-written LoRA wrapper with
gradient accumulation, Whisper beam search, a LLaVA training step, a Flux transformer with a
flow-matching scheduler loop, an RNN-T loss written as a logsumexp recursion."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision_ops  # noqa: F401  (tests/fixtures/models/torchvision_ops.py, on PYTHONPATH)

DEV = os.environ.get("SWEEP_DEV", "cuda")


def detect_setup():
    torch.manual_seed(0)
    backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=2, padding=1))
    head = nn.Conv2d(8, 4 + 3, 1)  # 4 box deltas, 3 class scores per cell
    model = nn.ModuleDict({"backbone": backbone, "head": head}).to(DEV).eval()
    images = torch.randn(2, 3, 16, 16, device=DEV)
    return model, images


def box_iou(a, b):
    lt = torch.maximum(a[:, None, :2], b[None, :, :2])
    rb = torch.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    area_a = (a[:, 2:] - a[:, :2]).prod(-1)
    area_b = (b[:, 2:] - b[:, :2]).prod(-1)
    return inter / (area_a[:, None] + area_b[None, :] - inter)


# atenlens: detect(*detect_setup())
@torch.no_grad()
def detect(model, images):
    out = model["head"](model["backbone"](images))
    n = out.shape[0]
    out = out.flatten(2).transpose(1, 2)
    deltas, logits = out[..., :4], out[..., 4:]
    scores, labels = logits.sigmoid().max(-1)
    centers = torch.rand(n, deltas.shape[1], 2, device=images.device) * 16
    boxes = torch.cat([centers - deltas[..., 2:].exp(), centers + deltas[..., 2:].exp()], -1)
    kept = []
    for b in range(n):
        top, idx = scores[b].topk(20)
        cand = boxes[b][idx]
        keep_mask = top > 0.3
        cand = cand[keep_mask]
        cand_scores = torch.masked_select(top, keep_mask)
        order = cand_scores.argsort(descending=True)
        cand = cand[order]
        chosen = []
        alive = torch.ones(cand.shape[0], dtype=torch.bool, device=cand.device)
        for i in range(cand.shape[0]):
            if not alive[i]:
                continue
            chosen.append(i)
            alive &= box_iou(cand[i : i + 1], cand)[0] <= 0.5
        kept.append(cand[torch.tensor(chosen, dtype=torch.long, device=cand.device)])
        nz = torch.nonzero(labels[b][idx] == 1).flatten()
        kept.append(boxes[b][idx][nz])
    print(len(kept), kept[0].dim())


def t5_setup():
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    config = T5Config(
        vocab_size=64,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
    )
    model = T5ForConditionalGeneration(config).to(DEV).eval()
    ids = torch.randint(2, 64, (2, 7), device=DEV)
    return model, ids


# atenlens: t5_beam(*t5_setup())
def t5_beam(model, ids):
    out = model.generate(ids, num_beams=3, max_new_tokens=5, early_stopping=True)
    print(tuple(out.shape))


def ddpm_setup():
    from diffusers import DDPMScheduler, UNet2DModel

    torch.manual_seed(0)
    unet = UNet2DModel(
        sample_size=8,
        in_channels=3,
        out_channels=3,
        layers_per_block=1,
        block_out_channels=(8, 16),
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=4,
        attention_head_dim=4,
    ).to(DEV)
    scheduler = DDPMScheduler(num_train_timesteps=100)
    opt = torch.optim.AdamW(unet.parameters(), lr=1e-4)
    images = torch.randn(2, 3, 8, 8, device=DEV)
    return unet, scheduler, opt, images


# atenlens: ddpm(*ddpm_setup())
def ddpm(unet, scheduler, opt, images):
    noise = torch.randn_like(images)
    t = torch.randint(0, scheduler.config.num_train_timesteps, (images.shape[0],), device=images.device)
    noisy = scheduler.add_noise(images, noise, t)
    pred = unet(noisy, t).sample
    loss = F.mse_loss(pred, noise)
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(tuple(pred.shape))


class GraphBreak(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 16)

    def forward(self, x):
        y = self.a(x).relu()
        print("between")  # a graph break under torch.compile
        return self.b(y)


def compiled_setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), GraphBreak(), nn.Linear(16, 4)).to(DEV)
    model[1] = torch.compile(model[1])
    x = torch.randn(4, 8, device=DEV)
    return model, x


# atenlens: compiled(*compiled_setup())
def compiled(model, x):
    loss = model(x).square().mean()
    loss.backward()
    print(loss.dim())


def ckpt_setup():
    torch.manual_seed(0)
    blocks = nn.ModuleList(
        nn.Sequential(nn.LayerNorm(32), nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32)) for _ in range(2)
    ).to(DEV)
    x = torch.randn(4, 10, 32, device=DEV, requires_grad=True)
    return blocks, x


# atenlens: ckpt_bf16(*ckpt_setup())
def ckpt_bf16(blocks, x):
    from torch.utils.checkpoint import checkpoint

    with torch.autocast(x.device.type, dtype=torch.bfloat16):
        h = x
        for block in blocks:
            h = h + checkpoint(block, h, use_reentrant=False)
        loss = h.float().pow(2).mean()
    loss.backward()
    print(h.dtype, x.grad.dtype)


def lstm_proj_setup():
    torch.manual_seed(0)
    lstm = nn.LSTM(12, 20, num_layers=2, proj_size=6, batch_first=True, bidirectional=True).to(DEV)
    x = torch.randn(3, 5, 12, device=DEV)
    return lstm, x


# atenlens: lstm_proj(*lstm_proj_setup())
def lstm_proj(lstm, x):
    out, (h, c) = lstm(x)
    out.sum().backward()
    print(tuple(out.shape), tuple(h.shape), tuple(c.shape))


def ppo_setup():
    torch.manual_seed(0)
    policy = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 4)).to(DEV)
    value = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 1)).to(DEV)
    params = list(policy.parameters()) + list(value.parameters())
    opt = torch.optim.Adam(params, lr=3e-4)
    obs = torch.randn(16, 6, device=DEV)
    return policy, value, opt, obs


# atenlens: ppo(*ppo_setup())
def ppo(policy, value, opt, obs):
    from torch.distributions import Categorical, Normal

    with torch.no_grad():
        old = Categorical(logits=policy(obs))
        actions = old.sample()
        old_logp = old.log_prob(actions)
        returns = Normal(torch.zeros(16, device=obs.device), 1.0).sample()
    dist = Categorical(logits=policy(obs))
    logp = dist.log_prob(actions)
    ratio = (logp - old_logp).exp()
    adv = returns - value(obs).squeeze(-1).detach()
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    clip = torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
    loss = -clip + 0.5 * F.mse_loss(value(obs).squeeze(-1), returns) - 0.01 * dist.entropy().mean()
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
    opt.step()
    print(actions.shape[0], loss.dim())


def warp_setup():
    torch.manual_seed(0)
    conv = nn.Conv2d(4, 8, 3, padding=1).to(DEV).to(memory_format=torch.channels_last)
    x = torch.randn(2, 4, 12, 12, device=DEV).to(memory_format=torch.channels_last).requires_grad_()
    theta = torch.tensor([[[0.9, 0.1, 0.0], [-0.1, 0.9, 0.0]]] * 2, device=DEV)
    return conv, x, theta


# atenlens: warp(*warp_setup())
def warp(conv, x, theta):
    y = conv(x)
    grid = F.affine_grid(theta, (2, 8, 12, 12), align_corners=False)
    warped = F.grid_sample(y, grid, mode="bilinear", align_corners=False)
    up = F.interpolate(warped, scale_factor=2, mode="bilinear", align_corners=False)
    up.mean().backward()
    print(tuple(up.shape), up.is_contiguous(memory_format=torch.channels_last))


def aoquant_setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).eval()
    qmodel = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    x = torch.randn(4, 16)
    return qmodel, x


# atenlens: aoquant(*aoquant_setup())
@torch.no_grad()
def aoquant(qmodel, x):
    y = qmodel(x)
    print(tuple(y.shape), y.dtype)


def jac_setup():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2)).to(DEV)
    x = torch.randn(3, device=DEV)
    return net, x


# atenlens: jac(*jac_setup())
def jac(net, x):
    from torch.autograd.functional import hessian, jacobian

    j = jacobian(net, x)
    h = hessian(lambda v: net(v).pow(2).sum(), x)
    print(tuple(j.shape), tuple(h.shape))


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank: int = 4, alpha: float = 8.0):
        super().__init__()
        self.base = base
        self.base.requires_grad_(False)
        self.lora_a = nn.Parameter(torch.randn(rank, base.in_features) * 0.01)
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank))
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + (x @ self.lora_a.T @ self.lora_b.T) * self.scale


def lora_setup():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=4)
    model = GPT2LMHeadModel(config)
    for p in model.parameters():
        p.requires_grad_(False)
    for block in model.transformer.h:
        # the MLP and the attention input projection (Conv1D) stay frozen
        block.attn.c_proj = LoRALinear(nn.Linear(32, 32))
    model = model.to(DEV)
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-3)
    batches = [torch.randint(0, 64, (2, 8), device=DEV) for _ in range(3)]
    return model, opt, batches


# atenlens: lora_accum(*lora_setup())
def lora_accum(model, opt, batches):
    for ids in batches:
        loss = model(input_ids=ids, labels=ids).loss / len(batches)
        loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    print(sum(p.numel() for p in model.parameters() if p.requires_grad))


def whisper_setup():
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(0)
    config = WhisperConfig(
        vocab_size=64,
        num_mel_bins=8,
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_source_positions=16,
        max_target_positions=32,
        decoder_start_token_id=1,
        pad_token_id=0,
        eos_token_id=2,
        begin_suppress_tokens=None,
        suppress_tokens=None,
    )
    model = WhisperForConditionalGeneration(config).to(DEV).eval()
    feats = torch.randn(2, 8, 32, device=DEV)
    return model, feats


# atenlens: whisper_beam(*whisper_setup())
def whisper_beam(model, feats):
    out = model.generate(input_features=feats, num_beams=2, max_new_tokens=4)
    print(tuple(out.shape))


def llava_setup():
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

    torch.manual_seed(0)
    vision = CLIPVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, image_size=16, patch_size=4
    )
    text = LlamaConfig(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=0,
    )
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=99, image_seq_length=16)
    model = LlavaForConditionalGeneration(config).to(DEV)
    ids = torch.randint(1, 90, (2, 24), device=DEV)
    ids[:, 2:18] = 99  # the 16 patch tokens of each image
    pixels = torch.randn(2, 3, 16, 16, device=DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, opt, ids, pixels


# atenlens: llava(*llava_setup())
def llava(model, opt, ids, pixels):
    out = model(input_ids=ids, pixel_values=pixels, labels=ids)
    out.loss.backward()
    opt.step()
    print(tuple(out.logits.shape))


def flux_setup():
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxTransformer2DModel

    torch.manual_seed(0)
    model = FluxTransformer2DModel(
        patch_size=1,
        in_channels=8,
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=8,
        num_attention_heads=2,
        joint_attention_dim=16,
        pooled_projection_dim=16,
        axes_dims_rope=(2, 2, 4),
    ).to(DEV)
    scheduler = FlowMatchEulerDiscreteScheduler()
    latents = torch.randn(1, 16, 8, device=DEV)
    text = torch.randn(1, 6, 16, device=DEV)
    pooled = torch.randn(1, 16, device=DEV)
    img_ids = torch.zeros(16, 3, device=DEV)
    txt_ids = torch.zeros(6, 3, device=DEV)
    return model, scheduler, latents, text, pooled, img_ids, txt_ids


# atenlens: flux(*flux_setup())
@torch.no_grad()
def flux(model, scheduler, latents, text, pooled, img_ids, txt_ids):
    scheduler.set_timesteps(3, device=latents.device)
    for t in scheduler.timesteps:
        timestep = t.expand(latents.shape[0]).to(latents.dtype) / 1000
        noise = model(
            hidden_states=latents,
            timestep=timestep,
            encoder_hidden_states=text,
            pooled_projections=pooled,
            txt_ids=txt_ids,
            img_ids=img_ids,
        ).sample
        latents = scheduler.step(noise, t, latents).prev_sample
    print(tuple(latents.shape))


def rnnt_setup():
    torch.manual_seed(0)
    joiner = nn.Linear(16, 6).to(DEV)  # 5 labels + blank
    enc = torch.randn(2, 7, 16, device=DEV, requires_grad=True)
    pred = torch.randn(2, 4, 16, device=DEV, requires_grad=True)  # 3 labels + start
    targets = torch.randint(1, 6, (2, 3), device=DEV)
    return joiner, enc, pred, targets


# atenlens: rnnt(*rnnt_setup())
def rnnt(joiner, enc, pred, targets):
    logp = joiner(enc[:, :, None] + pred[:, None]).log_softmax(-1)  # (B, T, U+1, V)
    blank = logp[..., 0]
    emit = logp[:, :, :-1].gather(-1, targets[:, None, :, None].expand(-1, logp.shape[1], -1, -1)).squeeze(-1)
    T, U1 = logp.shape[1], logp.shape[2]
    alpha = [[None] * U1 for _ in range(T)]
    alpha[0][0] = torch.zeros(2, device=enc.device)
    for t in range(T):
        for u in range(U1):
            if t == 0 and u == 0:
                continue
            paths = []
            if t > 0:
                paths.append(alpha[t - 1][u] + blank[:, t - 1, u])
            if u > 0:
                paths.append(alpha[t][u - 1] + emit[:, t, u - 1])
            alpha[t][u] = torch.logsumexp(torch.stack(paths), 0)
    loss = -(alpha[T - 1][U1 - 1] + blank[:, T - 1, U1 - 1]).mean()
    loss.backward()
    print(round(float(loss) * 0, 1), tuple(enc.grad.shape))
