"""gate: a benchmark engine for pretrained encoders."""

__version__ = "0.1.0"
