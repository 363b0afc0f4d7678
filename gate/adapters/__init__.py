"""Task adapters: head + loss + metrics, one file per task family."""

from .base import Adapter
from .classification import LinearClassifier

__all__ = ["Adapter", "LinearClassifier"]
