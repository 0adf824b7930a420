"""timm, diffusers and torchao from small configs."""

import os

import torch
import torchvision_ops  # noqa: F401  (tests/fixtures/models/torchvision_ops.py, on PYTHONPATH)

DEV = os.environ.get("SWEEP_DEV", "cuda")


def effnet_setup():
    import timm

    torch.manual_seed(0)
    model = timm.create_model("efficientnet_b0", pretrained=False, num_classes=10, drop_path_rate=0.2).to(DEV).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(2, 3, 32, 32, device=DEV)
    y = torch.randint(0, 10, (2,), device=DEV)
    return model, opt, x, y


# atenlens: effnet(*effnet_setup())
def effnet(model, opt, x, y):
    out = model(x)
    loss = torch.nn.functional.cross_entropy(out, y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    print(tuple(out.shape), int(model.bn1.num_batches_tracked))


def swin_setup():
    import timm

    torch.manual_seed(0)
    model = timm.create_model(
        "swin_tiny_patch4_window7_224",
        pretrained=False,
        img_size=32,
        patch_size=4,
        window_size=4,
        embed_dim=16,
        depths=(1, 1),
        num_heads=(1, 2),
        num_classes=10,
    ).to(DEV)
    x = torch.randn(2, 3, 32, 32, device=DEV)
    return model, x


# atenlens: swin(*swin_setup())
def swin(model, x):
    out = model(x)
    out.sum().backward()
    print(tuple(out.shape))


def vae_setup():
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    model = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        block_out_channels=(16, 32),
        layers_per_block=1,
        latent_channels=4,
        norm_num_groups=8,
        sample_size=16,
    ).to(DEV)
    x = torch.randn(2, 3, 16, 16, device=DEV)
    return model, x


# atenlens: vae(*vae_setup())
def vae(model, x):
    posterior = model.encode(x).latent_dist
    z = posterior.sample()
    recon = model.decode(z).sample
    loss = torch.nn.functional.mse_loss(recon, x) + 1e-6 * posterior.kl().mean()
    loss.backward()
    print(tuple(z.shape), tuple(recon.shape))


def unet_cond_setup():
    from diffusers import UNet2DConditionModel

    torch.manual_seed(0)
    model = UNet2DConditionModel(
        sample_size=8,
        in_channels=4,
        out_channels=4,
        layers_per_block=1,
        block_out_channels=(32, 64),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=24,
        attention_head_dim=8,
        norm_num_groups=8,
    ).to(DEV)
    x = torch.randn(2, 4, 8, 8, device=DEV)
    t = torch.tensor([10, 500], device=DEV)
    ctx = torch.randn(2, 7, 24, device=DEV)
    return model, x, t, ctx


# atenlens: unet_cond(*unet_cond_setup())
def unet_cond(model, x, t, ctx):
    out = model(x, t, encoder_hidden_states=ctx).sample
    torch.nn.functional.mse_loss(out, torch.randn_like(out)).backward()
    print(tuple(out.shape))


def int8_setup():
    from torchao.quantization import Int8WeightOnlyConfig, quantize_

    torch.manual_seed(0)
    model = (
        torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 32))
        .to(DEV)
        .to(torch.bfloat16)
    )
    quantize_(model, Int8WeightOnlyConfig())
    x = torch.randn(8, 64, device=DEV, dtype=torch.bfloat16)
    return model, x


# atenlens: int8(*int8_setup())
def int8(model, x):
    with torch.no_grad():
        out = model(x)
    print(type(model[0].weight).__name__, tuple(out.shape), out.dtype)
