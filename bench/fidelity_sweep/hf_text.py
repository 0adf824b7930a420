"""Hugging Face text models from small configs."""

import os

import torch
import torchvision_ops  # noqa: F401  (tests/fixtures/models/torchvision_ops.py, on PYTHONPATH)

DEV = os.environ.get("SWEEP_DEV", "cuda")


def bert_setup():
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=96,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    model = BertForMaskedLM(config).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 96, (2, 12), device=DEV)
    labels = torch.full((2, 12), -100, device=DEV)
    labels[:, 3] = ids[:, 3]
    mask = torch.ones(2, 12, dtype=torch.long, device=DEV)
    return model, opt, ids, mask, labels


# atenlens: bert(*bert_setup())
def bert(model, opt, ids, mask, labels):
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    out.loss.backward()
    opt.step()
    opt.zero_grad()
    print(tuple(out.logits.shape))


def t5_setup():
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    config = T5Config(
        vocab_size=96, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0, pad_token_id=0
    )
    model = T5ForConditionalGeneration(config).to(DEV)
    ids = torch.randint(1, 96, (2, 10), device=DEV)
    labels = torch.randint(1, 96, (2, 6), device=DEV)
    return model, ids, labels


# atenlens: t5(*t5_setup())
def t5(model, ids, labels):
    out = model(input_ids=ids, labels=labels)
    out.loss.backward()
    print(tuple(out.logits.shape))


def gpt2_setup():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=96, n_positions=32, n_embd=32, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=95, pad_token_id=95
    )
    model = GPT2LMHeadModel(config).to(DEV).eval()
    ids = torch.randint(0, 90, (1, 5), device=DEV)
    return model, ids


# atenlens: gpt2_generate(*gpt2_setup())
def gpt2_generate(model, ids):
    out = model.generate(ids, max_new_tokens=3, do_sample=False, use_cache=True)
    print(tuple(out.shape))


def whisper_setup():
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(0)
    config = WhisperConfig(
        vocab_size=96,
        num_mel_bins=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        d_model=32,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_source_positions=20,
        max_target_positions=16,
        decoder_start_token_id=1,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        suppress_tokens=None,
        begin_suppress_tokens=None,
    )
    model = WhisperForConditionalGeneration(config).to(DEV)
    feats = torch.randn(2, 16, 40, device=DEV)
    labels = torch.randint(3, 96, (2, 6), device=DEV)
    return model, feats, labels


# atenlens: whisper(*whisper_setup())
def whisper(model, feats, labels):
    out = model(input_features=feats, labels=labels)
    out.loss.backward()
    print(tuple(out.logits.shape))


def clip_setup():
    from transformers import CLIPConfig, CLIPModel

    torch.manual_seed(0)
    config = CLIPConfig(
        text_config=dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=4,
            max_position_embeddings=16,
        ),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=4,
            image_size=32,
            patch_size=8,
        ),
        projection_dim=16,
    )
    model = CLIPModel(config).to(DEV)
    ids = torch.randint(0, 96, (3, 8), device=DEV)
    pixels = torch.randn(3, 3, 32, 32, device=DEV)
    return model, ids, pixels


# atenlens: clip(*clip_setup())
def clip(model, ids, pixels):
    out = model(input_ids=ids, pixel_values=pixels, return_loss=True)
    out.loss.backward()
    print(tuple(out.logits_per_image.shape))


def trainer_setup():
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=96, n_positions=32, n_embd=32, n_layer=1, n_head=4)
    model = GPT2LMHeadModel(config)
    args = TrainingArguments(
        output_dir="/tmp/fsweep/trainer_out",
        per_device_train_batch_size=2,
        report_to=[],
        use_cpu=(DEV == "cpu"),
        save_strategy="no",
        logging_strategy="no",
    )
    trainer = Trainer(model=model, args=args)
    trainer.current_gradient_accumulation_steps = 1
    ids = torch.randint(0, 96, (2, 8))
    batch = {"input_ids": ids, "labels": ids}
    return trainer, batch


# atenlens: trainer_step(*trainer_setup())
def trainer_step(trainer, batch):
    trainer.create_optimizer_and_scheduler(num_training_steps=1)
    loss = trainer.training_step(trainer.model, batch)
    print(float(loss) > 0, next(trainer.model.parameters()).device.type)
