"""Third-party libraries, third round, from small configs: Hugging Face DeBERTa-v2, BART with labels,
Qwen2 with sliding-window GQA, gradient checkpointing, beam search; timm MobileNetV3 and DeiT distilled;
diffusers DiT transformer and a scheduler loop; torchao int8 dynamic; Lightning with self.log."""

import os

import torch
import torchvision_ops  # noqa: F401  (tests/fixtures/models/torchvision_ops.py, on PYTHONPATH)

DEV = os.environ.get("SWEEP_DEV", "cuda")


def deberta_setup():
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

    torch.manual_seed(0)
    config = DebertaV2Config(
        vocab_size=96,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=32,
        relative_attention=True,
        position_buckets=8,
        pos_att_type=["p2c", "c2p"],
        num_labels=3,
    )
    model = DebertaV2ForSequenceClassification(config).to(DEV)
    ids = torch.randint(0, 96, (2, 12), device=DEV)
    labels = torch.tensor([0, 2], device=DEV)
    return model, ids, labels


# atenlens: deberta(*deberta_setup())
def deberta(model, ids, labels):
    out = model(input_ids=ids, labels=labels)
    out.loss.backward()
    print(tuple(out.logits.shape))


def bart_setup():
    from transformers import BartConfig, BartForConditionalGeneration

    torch.manual_seed(0)
    config = BartConfig(
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
        decoder_start_token_id=2,
    )
    model = BartForConditionalGeneration(config).to(DEV)
    ids = torch.randint(3, 96, (2, 10), device=DEV)
    mask = torch.ones(2, 10, dtype=torch.long, device=DEV)
    mask[1, 8:] = 0
    labels = torch.randint(3, 96, (2, 6), device=DEV)
    labels[1, 4:] = -100
    return model, ids, mask, labels


# atenlens: bart(*bart_setup())
def bart(model, ids, mask, labels):
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    out.loss.backward()
    print(tuple(out.logits.shape))


def qwen2_setup():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        use_sliding_window=True,
        sliding_window=4,
        max_window_layers=1,
        layer_types=["sliding_attention", "full_attention"],
    )
    model = Qwen2ForCausalLM(config).to(DEV)
    model.gradient_checkpointing_enable()
    model.train()
    ids = torch.randint(0, 96, (2, 12), device=DEV)
    return model, ids


# atenlens: qwen2(*qwen2_setup())
def qwen2(model, ids):
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    print(tuple(out.logits.shape))


def beam_setup():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=96, n_positions=32, n_embd=32, n_layer=2, n_head=4, eos_token_id=95)
    model = GPT2LMHeadModel(config).to(DEV).eval()
    ids = torch.randint(0, 90, (1, 5), device=DEV)
    return model, ids


# atenlens: beam(*beam_setup())
def beam(model, ids):
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=3, num_beams=2, do_sample=False, pad_token_id=0)
    print(tuple(out.shape))


def mobilenet_setup():
    import timm

    torch.manual_seed(0)
    model = timm.create_model("mobilenetv3_small_050", num_classes=5).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 3, 64, 64, device=DEV)
    y = torch.tensor([1, 3], device=DEV)
    return model, opt, x, y


# atenlens: mobilenet(*mobilenet_setup())
def mobilenet(model, opt, x, y):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    print(loss.dim())


def deit_setup():
    import timm

    torch.manual_seed(0)
    model = timm.create_model(
        "deit_tiny_distilled_patch16_224", num_classes=5, img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2
    ).to(DEV)
    model.set_distilled_training(True)
    x = torch.randn(2, 3, 32, 32, device=DEV)
    return model, x


# atenlens: deit(*deit_setup())
def deit(model, x):
    cls, dist = model(x)
    (cls.sum() + dist.sum()).backward()
    print(tuple(cls.shape), tuple(dist.shape))


def dit_setup():
    from diffusers import DiTTransformer2DModel

    torch.manual_seed(0)
    model = DiTTransformer2DModel(
        num_attention_heads=2,
        attention_head_dim=8,
        in_channels=4,
        num_layers=2,
        sample_size=8,
        patch_size=2,
        num_embeds_ada_norm=10,
        norm_num_groups=4,
    ).to(DEV)
    x = torch.randn(2, 4, 8, 8, device=DEV)
    t = torch.tensor([3, 7], device=DEV)
    labels = torch.tensor([1, 4], device=DEV)
    return model, x, t, labels


# atenlens: dit(*dit_setup())
def dit(model, x, t, labels):
    out = model(x, timestep=t, class_labels=labels).sample
    out.float().pow(2).mean().backward()
    print(tuple(out.shape))


def sched_setup():
    from diffusers import DDIMScheduler, UNet2DModel

    torch.manual_seed(0)
    unet = (
        UNet2DModel(
            sample_size=8,
            in_channels=3,
            out_channels=3,
            layers_per_block=1,
            block_out_channels=(8, 16),
            down_block_types=("DownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "UpBlock2D"),
            norm_num_groups=4,
        )
        .to(DEV)
        .eval()
    )
    sched = DDIMScheduler(num_train_timesteps=50)
    sched.set_timesteps(4)
    x = torch.randn(1, 3, 8, 8, device=DEV)
    return unet, sched, x


# atenlens: sched_loop(*sched_setup())
def sched_loop(unet, sched, x):
    with torch.no_grad():
        for t in sched.timesteps:
            eps = unet(x, t).sample
            x = sched.step(eps, t, x).prev_sample
    print(tuple(x.shape), len(sched.timesteps))


def int8dyn_setup():
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16)).to(DEV).eval()
    quantize_(model, Int8DynamicActivationInt8WeightConfig())
    x = torch.randn(4, 32, device=DEV)
    return model, x


# atenlens: int8dyn(*int8dyn_setup())
def int8dyn(model, x):
    with torch.no_grad():
        out = model(x)
    print(tuple(out.shape), out.dtype)


def ved_setup():
    from transformers import GPT2Config, VisionEncoderDecoderConfig, VisionEncoderDecoderModel, ViTConfig

    torch.manual_seed(0)
    encoder = ViTConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=32, patch_size=8
    )
    decoder = GPT2Config(vocab_size=96, n_positions=32, n_embd=32, n_layer=2, n_head=4, add_cross_attention=True)
    config = VisionEncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    config.decoder_start_token_id, config.pad_token_id = 0, 0
    model = VisionEncoderDecoderModel(config=config).to(DEV)
    pixels = torch.randn(2, 3, 32, 32, device=DEV)
    labels = torch.randint(1, 96, (2, 7), device=DEV)
    return model, pixels, labels


# atenlens: ved(*ved_setup())
def ved(model, pixels, labels):
    out = model(pixel_values=pixels, labels=labels)
    out.loss.backward()
    print(tuple(out.logits.shape))
