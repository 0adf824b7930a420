"""Sixth round, from small configs: Hugging Face Gemma2 (sliding window, logit soft-capping), BLOOM
(ALiBi) and GPT-NeoX (partial rotary) training steps; a timm ViT step with Mixup/CutMix and
drop-path; a diffusers AutoencoderKL tiled decode; losses with data-dependent parts (focal loss with
`torch.where`, label-smoothed cross entropy with `ignore_index`, InfoNCE); `clip_grad_norm_` with
`error_if_nonfinite=True` after a `GradScaler.unscale_`; hand-written GNN message passing
(`index_add_`, `scatter_reduce`); a KV-cache decoding loop with `pad_sequence` and
`nn.TransformerDecoder`; a CUDA-graph inference step with a side-stream prefetch and `record_stream`;
`torch.compile(mode="reduce-overhead")`; and on simulated ranks (trace only: the eager run has no
process group) DDP with `no_sync()` gradient accumulation and FSDP2 `fully_shard` on a small Llama;
Lightning `Trainer(precision="bf16-mixed", accumulate_grad_batches=2, fast_dev_run=4)`."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision_ops  # noqa: F401  (tests/fixtures/models/torchvision_ops.py, on PYTHONPATH)

DEV = os.environ.get("SWEEP_DEV", "cuda")


def _lm_step(model, opt, ids):
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad()
    print(tuple(out.logits.shape))


def gemma2_setup():
    from transformers import Gemma2Config, Gemma2ForCausalLM

    torch.manual_seed(0)
    config = Gemma2Config(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        sliding_window=4,
        attn_logit_softcapping=50.0,
        final_logit_softcapping=30.0,
        attn_implementation="eager",
    )
    model = Gemma2ForCausalLM(config).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, opt, torch.randint(0, 128, (2, 12), device=DEV)


# atenlens: gemma2_train(*gemma2_setup())
def gemma2_train(model, opt, ids):
    _lm_step(model, opt, ids)


def bloom_setup():
    from transformers import BloomConfig, BloomForCausalLM

    torch.manual_seed(0)
    config = BloomConfig(vocab_size=128, hidden_size=32, n_layer=2, n_head=4)
    model = BloomForCausalLM(config).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, opt, torch.randint(0, 128, (2, 12), device=DEV)


# atenlens: bloom_train(*bloom_setup())
def bloom_train(model, opt, ids):
    _lm_step(model, opt, ids)


def neox_setup():
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(0)
    config = GPTNeoXConfig(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        rotary_pct=0.5,
        max_position_embeddings=64,
    )
    model = GPTNeoXForCausalLM(config).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, opt, torch.randint(0, 128, (2, 12), device=DEV)


# atenlens: neox_train(*neox_setup())
def neox_train(model, opt, ids):
    _lm_step(model, opt, ids)


def vit_setup():
    import numpy as np
    import timm
    from timm.data import Mixup

    np.random.seed(0)  # Mixup draws its mode and its beta weights from numpy
    torch.manual_seed(0)
    model = timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, num_classes=10, drop_path_rate=0.1
    ).to(DEV)
    mixup = Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, switch_prob=0.5, label_smoothing=0.1, num_classes=10)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(4, 3, 32, 32, device=DEV)
    y = torch.randint(0, 10, (4,), device=DEV)
    return model, mixup, opt, x, y


# atenlens: vit_mixup(*vit_setup())
def vit_mixup(model, mixup, opt, x, y):
    from timm.loss import SoftTargetCrossEntropy

    x, y = mixup(x, y)
    loss = SoftTargetCrossEntropy()(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(tuple(y.shape))


def vae_setup():
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    vae = AutoencoderKL(
        block_out_channels=(8, 16),
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        latent_channels=4,
        norm_num_groups=4,
        sample_size=16,
    ).to(DEV)
    vae.enable_tiling()
    return vae.eval(), torch.randn(1, 4, 16, 16, device=DEV)


# atenlens: vae_tiled(*vae_setup())
@torch.no_grad()
def vae_tiled(vae, latents):
    image = vae.decode(latents).sample
    print(tuple(image.shape))


def losses_setup():
    torch.manual_seed(0)
    head = nn.Linear(16, 5).to(DEV)
    proj = nn.Linear(16, 8).to(DEV)
    x = torch.randn(6, 16, device=DEV, requires_grad=True)
    targets = torch.tensor([0, 1, -100, 3, 4, -100], device=DEV)
    return head, proj, x, targets


# atenlens: losses(*losses_setup())
def losses(head, proj, x, targets):
    logits = head(x)
    ce = F.cross_entropy(logits, targets, ignore_index=-100, label_smoothing=0.1)
    valid = targets != -100
    safe = torch.where(valid, targets, torch.zeros_like(targets))
    logp = F.log_softmax(logits, -1).gather(1, safe[:, None]).squeeze(1)
    pt = logp.exp()
    focal = torch.where(valid, -((1 - pt) ** 2) * logp, torch.zeros_like(logp)).sum() / valid.sum()
    z = F.normalize(proj(x), dim=-1)
    sim = z @ z.roll(1, 0).T / 0.07
    nce = F.cross_entropy(sim, torch.arange(sim.shape[0], device=sim.device))
    (ce + focal + nce).backward()
    print(round(float(valid.sum()), 1))


def scaler_setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(DEV)
    return model, opt, scaler, torch.randn(8, 16, device=DEV)


# atenlens: scaler_clip(*scaler_setup())
def scaler_clip(model, opt, scaler, x):
    with torch.autocast(DEV, dtype=torch.float16 if DEV == "cuda" else torch.bfloat16):
        loss = model(x).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
    scaler.step(opt)
    scaler.update()
    opt.zero_grad()
    print(norm.dim())


def gnn_setup():
    torch.manual_seed(0)
    lin = nn.Linear(8, 8).to(DEV)
    x = torch.randn(6, 8, device=DEV)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5, 0, 2], [1, 2, 3, 4, 5, 0, 3, 5]], device=DEV)
    return lin, x, edge_index


# atenlens: gnn(*gnn_setup())
def gnn(lin, x, edge_index):
    src, dst = edge_index
    msg = lin(x)[src]
    agg = torch.zeros_like(x).index_add_(0, dst, msg)
    deg = torch.zeros(x.shape[0], device=x.device).index_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
    mean = agg / deg.clamp(min=1)[:, None]
    mx = torch.full_like(x, float("-inf")).scatter_reduce(
        0, dst[:, None].expand_as(msg), msg, "amax", include_self=True
    )
    out = (mean + mx.clamp(min=-1e4)).relu()
    out.sum().backward()
    print(tuple(out.shape))


def decode_setup():
    torch.manual_seed(0)
    layer = nn.TransformerDecoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True)
    decoder = nn.TransformerDecoder(layer, num_layers=2).to(DEV).eval()
    emb = nn.Embedding(20, 32).to(DEV)
    head = nn.Linear(32, 20).to(DEV)
    prompts = [torch.tensor([1, 2, 3]), torch.tensor([4, 5])]
    memory = torch.randn(2, 5, 32, device=DEV)
    return decoder, emb, head, prompts, memory


# atenlens: kv_decode(*decode_setup())
@torch.no_grad()
def kv_decode(decoder, emb, head, prompts, memory):
    from torch.nn.utils.rnn import pad_sequence

    ids = pad_sequence(prompts, batch_first=True, padding_value=0).to(memory.device)
    pad = ids == 0
    for _ in range(3):
        t = ids.shape[1]
        causal = nn.Transformer.generate_square_subsequent_mask(t, device=memory.device)
        h = decoder(emb(ids), memory, tgt_mask=causal, tgt_key_padding_mask=pad)
        nxt = head(h[:, -1]).argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], 1)
        pad = torch.cat([pad, torch.zeros_like(nxt, dtype=torch.bool)], 1)
    print(tuple(ids.shape))


def graph_setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to(DEV).eval()
    host = [torch.randn(8, 16).pin_memory() if DEV == "cuda" else torch.randn(8, 16) for _ in range(3)]
    return model, host


# atenlens: graph_step(*graph_setup())
@torch.no_grad()
def graph_step(model, host):
    static_in = torch.zeros(8, 16, device=DEV)
    if DEV == "cuda":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                model(static_in)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = model(static_in)
    outs = []
    for batch in host:
        if DEV == "cuda":
            with torch.cuda.stream(side):
                nxt = batch.to(DEV, non_blocking=True)
            torch.cuda.current_stream().wait_stream(side)
            nxt.record_stream(torch.cuda.current_stream())
            static_in.copy_(nxt)
            graph.replay()
            outs.append(static_out.clone())
        else:
            static_in.copy_(batch.to(DEV))
            outs.append(model(static_in).clone())
    print(len(outs), tuple(torch.stack(outs).sum(0).shape))


def compile_ro_setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(DEV)
    return torch.compile(model, mode="reduce-overhead"), torch.randn(8, 16, device=DEV)


# atenlens: compile_ro(*compile_ro_setup())
def compile_ro(model, x):
    for _ in range(2):
        out = model(x)
    out.sum().backward()
    print(tuple(out.shape))


def ddp_setup():
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64)).cuda()
    model = DDP(model, device_ids=[local_rank], bucket_cap_mb=1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, opt, [torch.randn(4, 64, device="cuda") for _ in range(4)]


# atenlens-ranks: --world-size 8
# atenlens: ddp_accum(*ddp_setup())
def ddp_accum(model, opt, batches):
    for i, x in enumerate(batches):
        if (i + 1) % 2:
            with model.no_sync():
                model(x).pow(2).mean().backward()
        else:
            model(x).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()


def fsdp_llama_setup():
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from transformers import LlamaConfig, LlamaForCausalLM

    dist.init_process_group("nccl")
    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = LlamaForCausalLM(config).cuda()
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, opt, torch.randint(0, 128, (2, 16), device="cuda")


# atenlens-ranks: --world-size 8
# atenlens: fsdp_llama(*fsdp_llama_setup())
def fsdp_llama(model, opt, ids):
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    opt.step()
    opt.zero_grad()
    print(tuple(out.logits.shape))


# atenlens: lit_bf16_accum()
def lit_bf16_accum():
    import lightning as L
    from round4 import LitNet

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(16, 8), torch.randint(0, 2, (16,)))
    trainer = L.Trainer(
        accelerator="gpu" if DEV == "cuda" else "cpu",
        devices=1,
        fast_dev_run=4,
        precision="bf16-mixed",
        accumulate_grad_batches=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(LitNet.make(), torch.utils.data.DataLoader(data, batch_size=4))
    print(trainer.global_step)
