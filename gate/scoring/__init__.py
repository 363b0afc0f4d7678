"""Scoring without fine-tuning: frozen features and their cache (features), the gate-score stage (stage) and the
transferability scores (transferability)."""
