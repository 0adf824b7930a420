"""A deterministic, realistic PyTorch source file for the lint benchmarks.

`generate(lines=5000, seed=0)` returns the text of one Python module of exactly `lines` lines:
models (MLPs, attention blocks, conv nets), datasets and data loaders (pinned and not), training
loops that call `.item()` every step, evaluation loops that move results to the host, timing code,
`non_blocking` copies, checkpointing, schedulers. It is valid Python, has a realistic density of
what the peers (ruff, pyflakes) and atenlens report, and is the same for the same arguments.

    python bench/gen_corpus.py [--lines N] [--seed S] [-o FILE]
"""

from __future__ import annotations

import argparse
import random
import sys
from typing import Callable

HEADER = '''\
"""Training and evaluation utilities for the image and sequence experiments."""
from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

'''

Template = Callable[[random.Random, int], list[str]]


def _name(rng: random.Random, stems: list[str], i: int) -> str:
    return f"{rng.choice(stems)}{i}"


def mlp_module(rng: random.Random, i: int) -> list[str]:
    hidden = rng.choice([128, 256, 512, 1024])
    act = rng.choice(["F.relu", "F.gelu", "F.silu"])
    name = _name(rng, ["MLP", "FeedForward", "Head", "Projector"], i)
    return [
        f"class {name}(nn.Module):",
        f'    """A {hidden}-wide two-layer perceptron with dropout."""',
        "",
        f"    def __init__(self, d_in: int, d_out: int, hidden: int = {hidden}, p: float = 0.1):",
        "        super().__init__()",
        "        self.fc1 = nn.Linear(d_in, hidden)",
        "        self.fc2 = nn.Linear(hidden, d_out)",
        "        self.drop = nn.Dropout(p)",
        "        self.norm = nn.LayerNorm(hidden)",
        "",
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:",
        f"        h = {act}(self.norm(self.fc1(x)))",
        "        h = self.drop(h)",
        "        return self.fc2(h)",
        "",
        "",
    ]


def attention_module(rng: random.Random, i: int) -> list[str]:
    d = rng.choice([256, 512, 768])
    heads = rng.choice([4, 8, 12])
    name = _name(rng, ["SelfAttention", "Block", "EncoderLayer"], i)
    return [
        f"class {name}(nn.Module):",
        f"    def __init__(self, d: int = {d}, heads: int = {heads}, causal: bool = True):",
        "        super().__init__()",
        "        self.heads = heads",
        "        self.causal = causal",
        "        self.qkv = nn.Linear(d, 3 * d)",
        "        self.proj = nn.Linear(d, d)",
        "        self.ln1 = nn.LayerNorm(d)",
        "        self.ln2 = nn.LayerNorm(d)",
        "        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))",
        "",
        "    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:",
        "        B, T, C = x.shape",
        "        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)",
        "        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)",
        "        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)",
        "        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)",
        "        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal and mask is None)",
        "        y = y.transpose(1, 2).contiguous().view(B, T, C)",
        "        x = x + self.proj(y)",
        "        return x + self.mlp(self.ln2(x))",
        "",
        "",
    ]


def conv_module(rng: random.Random, i: int) -> list[str]:
    ch = rng.choice([32, 64, 96])
    name = _name(rng, ["ConvNet", "ResNetLite", "Encoder"], i)
    return [
        f"class {name}(nn.Module):",
        f"    def __init__(self, in_ch: int = 3, num_classes: int = {rng.choice([10, 100, 1000])}):",
        "        super().__init__()",
        f"        self.stem = nn.Conv2d(in_ch, {ch}, kernel_size=3, padding=1, bias=False)",
        f"        self.bn = nn.BatchNorm2d({ch})",
        "        self.layers = nn.Sequential(",
        f"            nn.Conv2d({ch}, {ch * 2}, 3, stride=2, padding=1),",
        "            nn.ReLU(inplace=True),",
        f"            nn.Conv2d({ch * 2}, {ch * 4}, 3, stride=2, padding=1),",
        "            nn.ReLU(inplace=True),",
        "        )",
        f"        self.head = nn.Linear({ch * 4}, num_classes)",
        "",
        "    def forward(self, images: torch.Tensor) -> torch.Tensor:",
        "        x = F.relu(self.bn(self.stem(images)))",
        "        x = self.layers(x)",
        "        x = F.adaptive_avg_pool2d(x, 1).flatten(1)",
        "        return self.head(x)",
        "",
        "",
    ]


def dataset_class(rng: random.Random, i: int) -> list[str]:
    n = rng.choice([1024, 4096, 50000])
    name = _name(rng, ["RandomImages", "TokenStream", "PairDataset"], i)
    return [
        f"class {name}(Dataset):",
        f"    def __init__(self, n: int = {n}, shape: Tuple[int, ...] = (3, 32, 32), classes: int = 10):",
        "        self.n = n",
        "        self.shape = shape",
        "        self.classes = classes",
        "        self.cache: Dict[int, torch.Tensor] = {}",
        "",
        "    def __len__(self) -> int:",
        "        return self.n",
        "",
        "    def __getitem__(self, idx: int) -> Tuple[torch.Tensor, torch.Tensor]:",
        "        g = torch.Generator().manual_seed(idx)",
        "        x = torch.randn(self.shape, generator=g)",
        "        y = torch.randint(0, self.classes, (), generator=g)",
        "        return x, y",
        "",
        "",
    ]


def loader_fn(rng: random.Random, i: int) -> list[str]:
    pinned = rng.random() < 0.5
    return [
        f"def make_loader{i}(dataset: Dataset, batch_size: int = {rng.choice([32, 64, 128])}, train: bool = True) -> DataLoader:",
        "    return DataLoader(",
        "        dataset,",
        "        batch_size=batch_size,",
        "        shuffle=train,",
        f"        num_workers={rng.choice([0, 2, 4, 8])},",
        f"        pin_memory={pinned},",
        "        drop_last=train,",
        "    )",
        "",
        "",
    ]


def train_loop(rng: random.Random, i: int) -> list[str]:
    log_every = rng.choice([10, 50, 100])
    clip = rng.random() < 0.5
    lines = [
        f"def train_epoch{i}(model: nn.Module, loader: DataLoader, opt: torch.optim.Optimizer, device: torch.device,",
        "                 scheduler: Optional[Any] = None, epoch: int = 0) -> float:",
        "    model.train()",
        "    running = 0.0",
        "    seen = 0",
        "    start = time.time()",
        "    for step, (x, y) in enumerate(loader):",
        "        x = x.to(device, non_blocking=True)",
        "        y = y.to(device, non_blocking=True)",
        "        opt.zero_grad(set_to_none=True)",
        "        logits = model(x)",
        "        loss = F.cross_entropy(logits, y)",
        "        loss.backward()",
    ]
    if clip:
        lines.append("        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)")
    lines += [
        "        opt.step()",
        "        if scheduler is not None:",
        "            scheduler.step()",
        "        running += loss.item() * x.size(0)",
        "        seen += x.size(0)",
        f"        if step % {log_every} == 0:",
        "            elapsed = time.time() - start",
        '            print(f"epoch {epoch} step {step} loss {loss.item():.4f} {seen / max(elapsed, 1e-9):.1f} samples/s")',
        "    return running / max(seen, 1)",
        "",
        "",
    ]
    return lines


def eval_loop(rng: random.Random, i: int) -> list[str]:
    return [
        "@torch.no_grad()",
        f"def evaluate{i}(model: nn.Module, loader: DataLoader, device: torch.device) -> Dict[str, float]:",
        "    model.eval()",
        "    correct = 0",
        "    total = 0",
        "    all_probs: List[np.ndarray] = []",
        "    for x, y in loader:",
        "        x, y = x.to(device), y.to(device)",
        "        logits = model(x)",
        "        probs = logits.softmax(dim=-1)",
        "        correct += (logits.argmax(dim=-1) == y).sum().item()",
        "        total += y.numel()",
        "        all_probs.append(probs.cpu().numpy())",
        "    stacked = np.concatenate(all_probs) if all_probs else np.zeros((0,))",
        '    return {"accuracy": correct / max(total, 1), "confidence": float(stacked.max(axis=-1).mean()) if stacked.size else 0.0}',
        "",
        "",
    ]


def timing_fn(rng: random.Random, i: int) -> list[str]:
    iters = rng.choice([10, 20, 50])
    return [
        f"def benchmark_forward{i}(model: nn.Module, batch: torch.Tensor, iters: int = {iters}) -> float:",
        "    for _ in range(3):",
        "        model(batch)",
        "    torch.cuda.synchronize()",
        "    t0 = time.perf_counter()",
        "    for _ in range(iters):",
        "        out = model(batch)",
        "    elapsed = time.perf_counter() - t0",
        "    timings = []",
        "    for _ in range(iters):",
        "        start = time.time()",
        "        model(batch)",
        "        torch.cuda.synchronize()",
        "        timings.append(time.time() - start)",
        "    return elapsed / iters",
        "",
        "",
    ]


def memory_fn(rng: random.Random, i: int) -> list[str]:
    n = rng.choice([4, 8, 16])
    return [
        f"def stress_memory{i}(device: torch.device, sizes: Iterable[int] = ({', '.join(str(2**k) for k in range(8, 8 + n // 4))})) -> List[float]:",
        "    peaks = []",
        "    for size in sizes:",
        "        a = torch.randn(size, size).to(device)",
        "        b = torch.ones(size, size, device=device)",
        "        c = a @ b",
        "        peaks.append(torch.cuda.max_memory_allocated(device) / 2**20)",
        "        del a, b, c",
        "        torch.cuda.empty_cache()",
        "    return peaks",
        "",
        "",
    ]


def host_copy_fn(rng: random.Random, i: int) -> list[str]:
    return [
        f"def gather_predictions{i}(model: nn.Module, batches: List[torch.Tensor], device: torch.device) -> List[int]:",
        "    staged = []",
        "    for batch in batches:",
        "        pinned = batch.pin_memory()",
        "        gpu = pinned.to(device, non_blocking=True)",
        "        scores = model(gpu)",
        "        host = scores.to('cpu', non_blocking=True)",
        "        staged.append(host.argmax(dim=-1))",
        "    flat = torch.cat(staged).tolist()",
        "    return flat",
        "",
        "",
    ]


def config_class(rng: random.Random, i: int) -> list[str]:
    return [
        "@dataclass",
        f"class TrainConfig{i}:",
        f"    lr: float = {rng.choice(['3e-4', '1e-3', '6e-4'])}",
        f"    weight_decay: float = {rng.choice(['0.0', '0.01', '0.1'])}",
        f"    epochs: int = {rng.choice([1, 3, 10, 90])}",
        f"    batch_size: int = {rng.choice([32, 64, 256])}",
        "    warmup_steps: int = 100",
        "    grad_clip: Optional[float] = 1.0",
        '    out_dir: str = "checkpoints"',
        "    tags: List[str] = field(default_factory=list)",
        "",
        "    def to_json(self) -> str:",
        "        return json.dumps(self.__dict__, indent=2)",
        "",
        "",
    ]


def schedule_fn(rng: random.Random, i: int) -> list[str]:
    return [
        f"def cosine_lr{i}(step: int, base_lr: float, warmup: int, total: int) -> float:",
        "    if step < warmup:",
        "        return base_lr * (step + 1) / warmup",
        "    progress = (step - warmup) / max(1, total - warmup)",
        "    return 0.5 * base_lr * (1.0 + math.cos(math.pi * min(progress, 1.0)))",
        "",
        "",
    ]


def checkpoint_fn(rng: random.Random, i: int) -> list[str]:
    return [
        f"def save_checkpoint{i}(model: nn.Module, opt: torch.optim.Optimizer, epoch: int, path: str) -> None:",
        "    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)",
        "    state = {",
        '        "model": model.state_dict(),',
        '        "optimizer": opt.state_dict(),',
        '        "epoch": epoch,',
        "    }",
        "    torch.save(state, path)",
        "",
        "",
        f"def load_checkpoint{i}(model: nn.Module, path: str, device: torch.device) -> int:",
        "    state = torch.load(path, map_location=device)",
        '    model.load_state_dict(state["model"])',
        '    unused_meta = state.get("meta", {})',
        '    return int(state["epoch"])',
        "",
        "",
    ]


def metrics_fn(rng: random.Random, i: int) -> list[str]:
    return [
        f"class RunningStats{i}:",
        "    def __init__(self) -> None:",
        "        self.values: List[float] = []",
        "",
        "    def update(self, t: torch.Tensor) -> None:",
        "        for v in t.detach().flatten():",
        "            self.values.append(v.item())",
        "",
        "    def summary(self) -> Dict[str, float]:",
        "        if not self.values:",
        '            return {"mean": 0.0, "std": 0.0}',
        "        arr = np.asarray(self.values)",
        '        return {"mean": float(arr.mean()), "std": float(arr.std())}',
        "",
        "",
    ]


def fit_fn(rng: random.Random, i: int) -> list[str]:
    j = rng.randrange(max(i, 1))
    return [
        f"def fit{i}(cfg: TrainConfig{j}, model: nn.Module, train_set: Dataset, val_set: Dataset) -> Dict[str, float]:",
        '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")',
        "    model = model.to(device)",
        "    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)",
        f"    train_loader = make_loader{j}(train_set, cfg.batch_size, train=True)",
        f"    val_loader = make_loader{j}(val_set, cfg.batch_size, train=False)",
        "    history = []",
        "    for epoch in range(cfg.epochs):",
        f"        loss = train_epoch{j}(model, train_loader, opt, device, epoch=epoch)",
        f"        metrics = evaluate{j}(model, val_loader, device)",
        '        history.append({"epoch": epoch, "loss": loss, **metrics})',
        '        print(f"done")',
        "    return history[-1] if history else {}",
        "",
        "",
    ]


# One "unit" of a realistic file: the blocks that tend to live together.
UNIT: list[Template] = [
    config_class,
    mlp_module,
    attention_module,
    conv_module,
    dataset_class,
    loader_fn,
    train_loop,
    eval_loop,
    timing_fn,
    memory_fn,
    host_copy_fn,
    schedule_fn,
    checkpoint_fn,
    metrics_fn,
    fit_fn,
]


def generate(lines: int = 5000, seed: int = 0) -> str:
    """Exactly `lines` lines (each ending in a newline) of valid Python; same text for same args."""
    rng = random.Random(seed)
    out = HEADER.splitlines()
    i = 0
    while True:
        block: list[str] = []
        for template in UNIT:
            block += template(rng, i)
        if len(out) + len(block) > lines:
            break
        out += block
        i += 1
    # Fill the remainder with whole small blocks, then blank-ended comment lines.
    fillers = [schedule_fn, mlp_module, loader_fn, config_class]
    k = 0
    while True:
        block = fillers[k % len(fillers)](rng, 1000 + k)
        if len(out) + len(block) > lines:
            break
        out += block
        k += 1
    while len(out) < lines:
        out.append(f"# end of section {len(out)}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", help="write here instead of stdout")
    args = parser.parse_args(argv)
    text = generate(args.lines, args.seed)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
