"""Trainer assembly, loggers, checkpoint ensembling and the fine-tuning runner."""
