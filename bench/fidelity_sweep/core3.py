"""Plain PyTorch, third round: attention masks, nn.Transformer, CTC, packed sequences, clipping, EMA,
gradient penalty, channels_last with autocast."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

DEV = os.environ.get("SWEEP_DEV", "cuda")


def mha_setup():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(32, 4, batch_first=True).to(DEV)
    x = torch.randn(2, 10, 32, device=DEV)
    pad = torch.zeros(2, 10, dtype=torch.bool, device=DEV)
    pad[1, 7:] = True
    return mha, x, pad


# atenlens: mha(*mha_setup())
def mha(mha, x, pad):
    out, weights = mha(x, x, x, key_padding_mask=pad)
    out.sum().backward()
    print(tuple(out.shape), tuple(weights.shape))


def transformer_setup():
    torch.manual_seed(0)
    model = nn.Transformer(
        d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=64, batch_first=True
    ).to(DEV)
    src = torch.randn(2, 9, 32, device=DEV)
    tgt = torch.randn(2, 7, 32, device=DEV)
    return model, src, tgt


# atenlens: transformer(*transformer_setup())
def transformer(model, src, tgt):
    mask = nn.Transformer.generate_square_subsequent_mask(7, device=tgt.device)
    out = model(src, tgt, tgt_mask=mask, tgt_is_causal=True)
    out.mean().backward()
    print(tuple(out.shape))


def transformer_eval_setup():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    enc = nn.TransformerEncoder(layer, 2).to(DEV).eval()
    x = torch.randn(2, 9, 32, device=DEV)
    pad = torch.zeros(2, 9, dtype=torch.bool, device=DEV)
    pad[0, 6:] = True
    return enc, x, pad


# atenlens: transformer_eval(*transformer_eval_setup())
def transformer_eval(enc, x, pad):
    with torch.no_grad():
        out = enc(x, src_key_padding_mask=pad)
    print(tuple(out.shape))


def ctc_setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 6)).to(DEV)
    feats = torch.randn(12, 2, 16, device=DEV)
    targets = torch.randint(1, 6, (2, 5), device=DEV)
    return model, feats, targets


# atenlens: ctc(*ctc_setup())
def ctc(model, feats, targets):
    log_probs = model(feats).log_softmax(-1)
    input_lengths = torch.tensor([12, 10])
    target_lengths = torch.tensor([5, 3])
    loss = F.ctc_loss(log_probs, targets, input_lengths, target_lengths)
    loss.backward()
    print(tuple(log_probs.shape), loss.dim())


def packed_setup():
    torch.manual_seed(0)
    emb = nn.Embedding(20, 8).to(DEV)
    lstm = nn.LSTM(8, 12, batch_first=True).to(DEV)
    ids = torch.randint(1, 20, (3, 6), device=DEV)
    lengths = torch.tensor([6, 4, 2])
    return emb, lstm, ids, lengths


# atenlens: packed(*packed_setup())
def packed(emb, lstm, ids, lengths):
    packed_in = pack_padded_sequence(emb(ids), lengths, batch_first=True, enforce_sorted=True)
    out, (h, c) = lstm(packed_in)
    padded, out_lengths = pad_packed_sequence(out, batch_first=True)
    padded.sum().backward()
    print(tuple(padded.shape), out_lengths.tolist(), tuple(h.shape))


def clip_ema_setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to(DEV)
    ema = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(8, 16, device=DEV)
    y = torch.randint(0, 4, (8,), device=DEV)
    return model, ema, opt, x, y


# atenlens: clip_ema(*clip_ema_setup())
def clip_ema(model, ema, opt, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
    opt.step()
    opt.zero_grad(set_to_none=True)
    with torch.no_grad():
        torch._foreach_lerp_(ema, [p.detach() for p in model.parameters()], 0.01)
        for e, p in zip(ema, model.parameters()):
            e.mul_(0.99).add_(p.detach(), alpha=0.01)
    print(norm.dim(), len(ema))


def gp_setup():
    torch.manual_seed(0)
    critic = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1)).to(DEV)
    real = torch.randn(4, 8, device=DEV)
    fake = torch.randn(4, 8, device=DEV)
    return critic, real, fake


# atenlens: gradient_penalty(*gp_setup())
def gradient_penalty(critic, real, fake):
    alpha = torch.rand(4, 1, device=real.device)
    mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    score = critic(mixed)
    (grad,) = torch.autograd.grad(score.sum(), mixed, create_graph=True)
    penalty = ((grad.norm(2, dim=1) - 1) ** 2).mean()
    loss = critic(fake).mean() - critic(real).mean() + 10 * penalty
    loss.backward()
    print(tuple(grad.shape), grad.requires_grad)


def channels_last_setup():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 8, 3, stride=2), nn.Flatten()
    )
    model = model.to(DEV, memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(2, 3, 16, 16, device=DEV).to(memory_format=torch.channels_last)
    return model, opt, x


# atenlens: channels_last(*channels_last_setup())
def channels_last(model, opt, x):
    with torch.autocast(DEV, dtype=torch.bfloat16):
        out = model(x)
        loss = out.float().pow(2).mean()
    loss.backward()
    opt.step()
    print(tuple(out.shape), out.dtype, model[0].weight.is_contiguous(memory_format=torch.channels_last))
