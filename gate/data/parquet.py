"""datasets' Parquet builder over the files of a local copy, made without a network call.

``datasets.load_dataset_builder("parquet", data_files=...)`` first sends a HEAD request to count a download of
"parquet" (``datasets.load.increase_load_count``) unless the hub is marked offline (``HF_DATASETS_OFFLINE``): a run
reading a local copy looked a host name up at run time. :func:`parquet_builder` makes the same builder from the
same arguments (so the same Arrow cache folder: converted copies stay valid) without that request.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path


def parquet_builder(files: Mapping[str, Sequence[str | os.PathLike]], cache_dir: str | os.PathLike | None):
    """The ``datasets`` Parquet builder of ``files`` (``{split: [path, ...]}``), its Arrow cache under ``cache_dir``
    (datasets' default cache when None), as ``load_dataset_builder("parquet", ...)`` returns it."""
    from datasets.data_files import DataFilesDict, sanitize_patterns
    from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES
    from datasets.packaged_modules.parquet.parquet import Parquet

    _, module_hash = _PACKAGED_DATASETS_MODULES["parquet"]
    patterns = sanitize_patterns({split: [str(p) for p in paths] for split, paths in files.items()})
    data_files = DataFilesDict.from_patterns(patterns, base_path=str(Path().resolve()))
    return Parquet(cache_dir=str(cache_dir) if cache_dir is not None else None, dataset_name="parquet",
                   data_files=data_files, hash=module_hash)
