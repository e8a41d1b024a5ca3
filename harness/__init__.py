"""compat: run tiny real fine-tunes across GPUs and library versions, record what happened."""

__version__ = "0.1.0"
