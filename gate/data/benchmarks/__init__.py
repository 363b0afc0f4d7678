"""Loaders of the GATE benchmarks: one module per family, each a function (data_dir, ...) -> DatasetDict."""
