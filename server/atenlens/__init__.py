"""atenlens: what a PyTorch function really runs, per source line."""

__version__ = "0.1.0"
