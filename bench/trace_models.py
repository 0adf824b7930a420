"""User code traced by bench/trace_cost.py and by the engine's scale test: a GPT-2-shaped and a
Llama-shaped language model and one AdamW training step. Plain PyTorch, nothing atenlens-specific.

Full sizes (the defaults) match GPT-2 small (124M parameters, fp32) and Llama-7B (6.7B, bf16);
`tiny=True` gives the same architecture at toy sizes for smoke runs.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class GPTBlock(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab: int = 50257, context: int = 1024, d: int = 768, layers: int = 12, heads: int = 12):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(context, d)
        self.blocks = nn.ModuleList(GPTBlock(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.type_as(x) * self.weight


def rope(T: int, head_dim: int, device: torch.device, base: float = 10000.0):
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    freqs = torch.outer(torch.arange(T, device=device).float(), inv)
    return freqs.cos(), freqs.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., 0::2], x[..., 1::2]
    c, s = cos[None, None], sin[None, None]
    return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2).type_as(x)


class LlamaBlock(nn.Module):
    def __init__(self, d: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.attn_norm = RMSNorm(d)
        self.wq = nn.Linear(d, d, bias=False)
        self.wk = nn.Linear(d, d, bias=False)
        self.wv = nn.Linear(d, d, bias=False)
        self.wo = nn.Linear(d, d, bias=False)
        self.ffn_norm = RMSNorm(d)
        self.w1 = nn.Linear(d, ffn, bias=False)
        self.w3 = nn.Linear(d, ffn, bias=False)
        self.w2 = nn.Linear(ffn, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(h).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        v = self.wv(h).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(y.transpose(1, 2).reshape(B, T, C))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, vocab: int = 32000, d: int = 4096, layers: int = 32, heads: int = 32, ffn: int = 11008):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(LlamaBlock(d, heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.out = nn.Linear(d, vocab, bias=False)
        self.head_dim = d // heads

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        cos, sin = rope(idx.shape[1], self.head_dim, idx.device)
        x = self.tok(idx)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.out(self.norm(x))


def setup(kind: str = "gpt2", tiny: bool = False, batch: int = 8, seq: int = 1024):
    """Model, optimizer and a batch of token ids on the default device of the run."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model: nn.Module
    if kind == "gpt2":
        model, vocab, dtype = (
            (GPT(vocab=512, context=seq, d=64, layers=2, heads=4) if tiny else GPT(context=seq)),
            (512 if tiny else 50257),
            torch.float32,
        )
    else:
        model, vocab, dtype = (
            (Llama(vocab=512, d=64, layers=2, heads=4, ffn=172) if tiny else Llama()),
            (512 if tiny else 32000),
            torch.bfloat16,
        )
    model = model.to(device=device, dtype=dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    idx = torch.randint(0, vocab, (batch, seq), device=device)
    targets = torch.randint(0, vocab, (batch, seq), device=device)
    return model, opt, idx, targets


def setup_fsdp(kind: str = "llama", tiny: bool = False, batch: int = 8, seq: int = 1024):
    """The same, as each rank of a torchrun job builds it with FSDP2: every block `fully_shard`ed over
    all ranks, then the root, and AdamW over the sharded parameters. `batch` is per rank."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("nccl")
    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    model, _, idx, targets = setup(kind, tiny, batch, seq)
    blocks = model.layers if kind == "llama" else model.blocks
    for block in blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, opt, idx, targets


# atenlens: train_step(*setup("gpt2"))
def train_step(model, opt, idx, targets):
    logits = model(idx)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss
