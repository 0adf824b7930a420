"""Lightning with manual optimization and gradient accumulation."""

import os

import lightning as L
import torch
import torchvision_ops  # noqa: F401  (tests/fixtures/models/torchvision_ops.py, on PYTHONPATH)

DEV = os.environ.get("SWEEP_DEV", "cuda")


class Manual(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.layer = torch.nn.Linear(8, 4)

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        loss = self.layer(batch).pow(2).mean() / 2
        self.manual_backward(loss)
        if (batch_idx + 1) % 2 == 0:
            self.clip_gradients(opt, gradient_clip_val=1.0, gradient_clip_algorithm="norm")
            opt.step()
            opt.zero_grad()
        self.log("loss", loss, prog_bar=False)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.01)


# atenlens: fit()
def fit():
    torch.manual_seed(0)
    data = torch.utils.data.DataLoader(torch.randn(8, 8), batch_size=2)
    trainer = L.Trainer(
        accelerator="gpu" if DEV == "cuda" else "cpu",
        devices=1,
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    model = Manual()
    trainer.fit(model, data)
    print(trainer.global_step, model.layer.weight.device.type)
