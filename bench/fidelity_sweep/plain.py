"""Plain PyTorch: nanoGPT-style attention, an LSTM, mixed precision."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

DEV = os.environ.get("SWEEP_DEV", "cuda")


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd), nn.GELU(approximate="tanh"), nn.Linear(4 * n_embd, n_embd)
        )

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab=64, block=16, n_embd=32, n_head=4, n_layer=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx, targets):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


def nanogpt_setup():
    torch.manual_seed(0)
    model = GPT().to(DEV)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
        lr=6e-4,
        betas=(0.9, 0.95),
        fused=True,
    )
    x = torch.randint(0, 64, (2, 16), device=DEV)
    y = torch.randint(0, 64, (2, 16), device=DEV)
    return model, opt, x, y


# atenlens: nanogpt(*nanogpt_setup())
def nanogpt(model, opt, x, y):
    with torch.autocast(device_type=DEV, dtype=torch.bfloat16):
        logits, loss = model(x, y)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    print(tuple(logits.shape), logits.dtype, f"{loss.item() > 0} {norm.dim()}")


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.lstm = nn.LSTM(16, 24, num_layers=2, batch_first=True, bidirectional=True, dropout=0.1)
        self.gru = nn.GRU(48, 8, batch_first=True)
        self.out = nn.Linear(8, 5)

    def forward(self, ids):
        h, _ = self.lstm(self.emb(ids))
        h, _ = self.gru(h)
        return self.out(h)


def rnn_setup():
    torch.manual_seed(0)
    model = Tagger().to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 50, (3, 7), device=DEV)
    tags = torch.randint(0, 5, (3, 7), device=DEV)
    return model, opt, ids, tags


# atenlens: rnn(*rnn_setup())
def rnn(model, opt, ids, tags):
    logits = model(ids)
    loss = F.cross_entropy(logits.reshape(-1, 5), tags.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(tuple(logits.shape))


def amp_setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.LayerNorm(64), nn.ReLU(), nn.Linear(64, 10)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(DEV)
    x = torch.randn(8, 32, device=DEV)
    y = torch.randint(0, 10, (8,), device=DEV)
    return model, opt, scaler, x, y


# atenlens: amp_fp16(*amp_setup())
def amp_fp16(model, opt, scaler, x, y):
    with torch.autocast(DEV, dtype=torch.float16):
        out = model(x)
        loss = F.cross_entropy(out, y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
    opt.zero_grad()
    print(out.dtype, loss.dtype, scaler.get_scale())


# atenlens: amp_bf16(*amp_setup())
def amp_bf16(model, opt, scaler, x, y):
    with torch.autocast(DEV, dtype=torch.bfloat16):
        out = model(x)
        loss = F.cross_entropy(out, y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(out.dtype, loss.dtype)
