"""Fourth round, from small configs: Hugging Face Llama training step, Mistral sampling `generate()`,
Mixtral MoE training with router logits, mBART with labels; timm ConvNeXt with a TorchScript loss;
weight_norm / spectral_norm parametrizations; torch.func per-sample gradients; sdpa with boolean,
additive and causal masks and grouped-query heads; EmbeddingBag with sparse gradients and SparseAdam;
a custom autograd.Function; nn.MultiheadAttention inference; Lightning automatic optimization in
16-mixed precision with fast_dev_run; packed GRU; torchao float8 training."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision_ops  # noqa: F401  (tests/fixtures/models/torchvision_ops.py, on PYTHONPATH)

DEV = os.environ.get("SWEEP_DEV", "cuda")


def llama_setup():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = LlamaForCausalLM(config).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 96, (2, 12), device=DEV)
    mask = torch.ones(2, 12, dtype=torch.long, device=DEV)
    mask[1, :3] = 0
    return model, opt, ids, mask


# atenlens: llama(*llama_setup())
def llama(model, opt, ids, mask):
    out = model(input_ids=ids, attention_mask=mask, labels=ids)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    print(tuple(out.logits.shape))


def mistral_setup():
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    config = MistralConfig(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        sliding_window=8,
        eos_token_id=95,
        pad_token_id=0,
    )
    model = MistralForCausalLM(config).to(DEV).eval()
    ids = torch.randint(1, 90, (2, 5), device=DEV)
    return model, ids


# atenlens: mistral_sample(*mistral_setup())
def mistral_sample(model, ids):
    torch.manual_seed(1)
    out = model.generate(ids, max_new_tokens=4, do_sample=True, top_k=20, top_p=0.9, temperature=0.7)
    print(tuple(out.shape))


def mixtral_setup():
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    config = MixtralConfig(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=64,
        output_router_logits=True,
        router_aux_loss_coef=0.01,
    )
    model = MixtralForCausalLM(config).to(DEV)
    ids = torch.randint(0, 96, (2, 10), device=DEV)
    return model, ids


# atenlens: mixtral(*mixtral_setup())
def mixtral(model, ids):
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    print(tuple(out.logits.shape), out.aux_loss.dim())


def mbart_setup():
    from transformers import MBartConfig, MBartForConditionalGeneration

    torch.manual_seed(0)
    config = MBartConfig(
        vocab_size=96,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=32,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        scale_embedding=True,
    )
    model = MBartForConditionalGeneration(config).to(DEV)
    ids = torch.randint(3, 96, (2, 10), device=DEV)
    ids[:, -1] = 2
    labels = torch.randint(3, 96, (2, 6), device=DEV)
    labels[:, -1] = 2
    return model, ids, labels


# atenlens: mbart(*mbart_setup())
def mbart(model, ids, labels):
    out = model(input_ids=ids, labels=labels)
    out.loss.backward()
    print(tuple(out.logits.shape))


@torch.jit.script
def smooth_l1(x: torch.Tensor, y: torch.Tensor, beta: float) -> torch.Tensor:
    d = (x - y).abs()
    return torch.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta).mean()


def convnext_setup():
    import timm

    torch.manual_seed(0)
    model = timm.create_model("convnext_atto", num_classes=4, drop_path_rate=0.1).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(2, 3, 32, 32, device=DEV)
    y = torch.randn(2, 4, device=DEV)
    return model, opt, x, y


# atenlens: convnext(*convnext_setup())
def convnext(model, opt, x, y):
    loss = smooth_l1(model(x), y, 1.0)
    loss.backward()
    opt.step()
    print(loss.dim())


def parametrized_setup():
    from torch.nn.utils.parametrizations import spectral_norm, weight_norm

    torch.manual_seed(0)
    model = nn.Sequential(
        weight_norm(nn.Conv1d(8, 16, 3, padding=1)),
        nn.ReLU(),
        spectral_norm(nn.Conv1d(16, 8, 3, padding=1)),
    ).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(2, 8, 20, device=DEV)
    return model, opt, x


# atenlens: parametrized(*parametrized_setup())
def parametrized(model, opt, x):
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    print(loss.dim(), model[2].parametrizations.weight.original.shape)


def per_sample_setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 3)).to(DEV)
    x = torch.randn(5, 16, device=DEV)
    y = torch.randint(0, 3, (5,), device=DEV)
    return model, x, y


# atenlens: per_sample(*per_sample_setup())
def per_sample(model, x, y):
    from torch.func import functional_call, grad, vmap

    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss_of(p, xi, yi):
        logits = functional_call(model, p, (xi.unsqueeze(0),))
        return F.cross_entropy(logits, yi.unsqueeze(0))

    grads = vmap(grad(loss_of), in_dims=(None, 0, 0))(params, x, y)
    norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()]).sum(0)
    print(tuple(grads["0.weight"].shape), tuple(norms.shape))


def sdpa_setup():
    torch.manual_seed(0)
    q = torch.randn(2, 8, 16, 32, device=DEV, dtype=torch.float16, requires_grad=True)
    kv = torch.randn(2, 2, 16, 32, device=DEV, dtype=torch.float16, requires_grad=True)
    keep = torch.ones(16, 16, dtype=torch.bool, device=DEV).tril()
    bias = torch.randn(2, 1, 16, 16, device=DEV, dtype=torch.float16)
    return q, kv, keep, bias


# atenlens: sdpa_masks(*sdpa_setup())
def sdpa_masks(q, kv, keep, bias):
    k = v = kv.repeat_interleave(4, dim=1)
    a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    b = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    c = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    d = F.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True)
    (a + b + c + d).float().sum().backward()
    print(tuple(a.shape), q.grad.dtype, tuple(kv.grad.shape))


def bag_setup():
    torch.manual_seed(0)
    bag = nn.EmbeddingBag(100, 16, mode="sum", sparse=True).to(DEV)
    head = nn.Linear(16, 2).to(DEV)
    sparse_opt = torch.optim.SparseAdam(list(bag.parameters()), lr=1e-2)
    dense_opt = torch.optim.Adam(head.parameters(), lr=1e-2)
    ids = torch.randint(0, 100, (12,), device=DEV)
    offsets = torch.tensor([0, 4, 9], device=DEV)
    y = torch.tensor([0, 1, 1], device=DEV)
    return bag, head, sparse_opt, dense_opt, ids, offsets, y


# atenlens: bag(*bag_setup())
def bag(bag, head, sparse_opt, dense_opt, ids, offsets, y):
    loss = F.cross_entropy(head(bag(ids, offsets)), y)
    loss.backward()
    sparse_opt.step()
    dense_opt.step()
    print(bag.weight.grad.is_sparse, loss.dim())


class ScaledGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        out = F.gelu(x) * scale
        sign = (x > 0).to(torch.int8)
        ctx.mark_non_differentiable(sign)
        return out, sign

    @staticmethod
    def backward(ctx, grad_out, _grad_sign):
        (x,) = ctx.saved_tensors
        cdf = 0.5 * (1.0 + torch.erf(x / 1.4142135623730951))
        pdf = torch.exp(-0.5 * x * x) / 2.5066282746310002
        return grad_out * ctx.scale * (cdf + x * pdf), None


def custom_fn_setup():
    torch.manual_seed(0)
    lin = nn.Linear(16, 16).to(DEV)
    x = torch.randn(4, 16, device=DEV)
    return lin, x


# atenlens: custom_fn(*custom_fn_setup())
def custom_fn(lin, x):
    out, sign = ScaledGelu.apply(lin(x), 2.0)
    (out * sign).sum().backward()
    print(sign.dtype, sign.requires_grad, lin.weight.grad.shape)


def mha_eval_setup():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(32, 4, batch_first=True).to(DEV).eval()
    x = torch.randn(2, 10, 32, device=DEV)
    pad = torch.zeros(2, 10, dtype=torch.bool, device=DEV)
    pad[0, 8:] = True
    return mha, x, pad


# atenlens: mha_eval(*mha_eval_setup())
def mha_eval(mha, x, pad):
    with torch.inference_mode():
        out, _ = mha(x, x, x, key_padding_mask=pad, need_weights=False)
    print(tuple(out.shape))


class LitNet:
    """Built lazily so the module imports without lightning."""

    @staticmethod
    def make():
        import lightning as L

        class Net(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 2))

            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = F.cross_entropy(self.body(x), y)
                self.log("loss", loss)
                return loss

            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters(), lr=1e-3)

        return Net()


# atenlens: lit_amp()
def lit_amp():
    import lightning as L

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(8, 8), torch.randint(0, 2, (8,)))
    trainer = L.Trainer(
        accelerator="gpu" if DEV == "cuda" else "cpu",
        devices=1,
        fast_dev_run=2,
        precision="16-mixed" if DEV == "cuda" else "bf16-mixed",
        gradient_clip_val=0.5,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    model = LitNet.make()
    trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=4))
    print(trainer.global_step)


def packed_setup():
    torch.manual_seed(0)
    emb = nn.Embedding(50, 16).to(DEV)
    gru = nn.GRU(16, 24, batch_first=True, bidirectional=True).to(DEV)
    ids = torch.randint(1, 50, (3, 7), device=DEV)
    lengths = torch.tensor([7, 5, 2])
    return emb, gru, ids, lengths


# atenlens: packed_gru(*packed_setup())
def packed_gru(emb, gru, ids, lengths):
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    packed = pack_padded_sequence(emb(ids), lengths, batch_first=True, enforce_sorted=True)
    out, h = gru(packed)
    padded, out_lengths = pad_packed_sequence(out, batch_first=True)
    padded.sum().backward()
    print(tuple(padded.shape), tuple(h.shape), out_lengths.tolist())


def float8_setup():
    from torchao.float8 import convert_to_float8_training

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 32)).to(DEV)
    convert_to_float8_training(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(32, 64, device=DEV)
    return model, opt, x


# atenlens: float8(*float8_setup())
def float8(model, opt, x):
    loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    print(loss.dim(), type(model[0]).__name__)
