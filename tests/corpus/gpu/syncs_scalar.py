"""Reading GPU values on the host: each one makes the host wait for the GPU."""
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
CALIBRATION = torch.ones(4, device=DEVICE).sum().item()  # expect: AL100:information
for _warmup in range(2):
    torch.ones(4, device=DEVICE).sum().item()  # expect: AL100:warning


def case_item_once():
    loss = torch.randn(8, device=DEVICE).pow(2).mean()
    return loss.item()  # expect: AL100:warning


def case_item_in_loop():
    total = 0.0
    for _ in range(5):
        loss = torch.randn(8, device=DEVICE).mean()
        total += loss.item()  # expect: AL100:warning
    return total


def case_conversions():
    x = torch.randn(8, device=DEVICE)
    a = float(x.sum())  # expect: AL100:warning
    b = int(x.argmax())  # expect: AL100:warning
    c = bool(x.max() > 0)  # expect: AL100:warning
    same = torch.equal(x, x.clone())  # expect: AL100:warning
    steps = list(range(x.argmax()))  # expect: AL100:warning
    return a, b, c, same, steps


def case_if_tensor():
    x = torch.randn(8, device=DEVICE)
    if (x > 0).any():  # expect: AL100:warning
        x = x * 2
    while x.abs().max() > 100:  # expect: AL100:warning
        x = x / 2
        break
    return x


def case_tolist():
    x = torch.randn(16, 4, device=DEVICE)
    rows = x.tolist()  # expect: AL100:warning
    return len(rows)


def case_printing():
    x = torch.randn(3, device=DEVICE)
    print(x)  # expect: AL100:warning
    print(f"loss {x.sum():.4f}")  # expect: AL100:warning
    return repr(x.mean())  # expect: AL100:warning


def case_numpy():
    x = torch.randn(8, 2, device=DEVICE)
    host = x.cpu().numpy()  # expect: AL100:warning
    forced = x.numpy(force=True)  # expect: AL100:warning
    return host.shape, forced.shape


def log_every_step(loss):
    print("loss", loss.item())  # expect: AL100:warning


def case_helper_called_in_loop():
    for _ in range(3):
        loss = torch.randn(8, device=DEVICE).mean()
        log_every_step(loss)


def make_inputs():
    x = torch.randn(8, device=DEVICE)
    scale = x.abs().max().item()  # expect: AL100:information
    return (x / scale,)


# atenlens: case_with_setup(*make_inputs())
def case_with_setup(x):
    return (x * 2).sum().item()  # expect: AL100:warning
