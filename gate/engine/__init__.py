"""The engine: compose a run (build), assemble the model, validate the config before any work, and fine-tune
(training)."""
