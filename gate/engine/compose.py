"""Hydra's compose API over gate's packaged configs, for the stages that compose configs of their own (a tier's
experiments, gate-rank's runs, gate-data's datasets) — also from inside a ``@hydra.main`` command.

Inside the context each config file is read and parsed once (``LoadedOnce``): Hydra reads every file of a
composition again for each ``compose`` call (about half of a composition's time), and a tier composes a hundred."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def hydra_compose_context(kept: dict | None = None) -> Iterator[Any]:
    """Hydra's compose API over ``gate.conf``, usable inside a ``@hydra.main`` app (its state is restored).

    ``kept``: loaded files to share with later contexts, the caller's to hold (a test session composes hundreds of
    configs): only the files of compositions that search packaged configs alone go there (no ``file://`` search
    path: files a caller may change between two contexts); the others are kept for this context only."""
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    backup = get_gh_backup()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module("gate.conf", version_base=None):
            gh = GlobalHydra.instance()
            loader = getattr(gh.hydra, "config_loader", None)
            if loader is not None and hasattr(loader, "repository"):  # Hydra 1.3's loader (the range gate declares)
                loader.repository = _loaded_once_class()(loader.repository, shared=kept)
            yield gh
    finally:
        restore_gh_from_backup(backup)


@functools.cache
def _loaded_once_class() -> type:
    from hydra._internal.config_repository import IConfigRepository
    from hydra.core.object_type import ObjectType

    class LoadedOnce(IConfigRepository):
        """Hydra's config repository with one cache of loaded files for the whole context, keyed by the sources
        searched and the path. Each load returns a deep copy, as a fresh read would give: a composition merges the
        loaded nodes into its config without copying them, and overrides then change them. Hydra deep-copies its
        repository for each composition (it re-initialises the copy's sources for a ``hydra.searchpath``): the
        copy keeps a copy of the sources and shares the cache."""

        def __init__(self, delegate: Any, cache: dict | None = None, read: list | None = None,
                     shared: dict | None = None) -> None:
            self.delegate = delegate
            self.cache: dict[tuple, Any] = {} if cache is None else cache
            self.shared = shared
            self.read: list[tuple[str, Any]] = [] if read is None else read  # (path, loaded), in order of reading

        def __deepcopy__(self, memo: dict) -> LoadedOnce:
            return LoadedOnce(copy.deepcopy(self.delegate, memo), self.cache, self.read, self.shared)

        def load_config(self, config_path: str) -> Any:
            sources = tuple((s.provider, s.scheme(), s.path) for s in self.delegate.get_sources())
            packaged = all(scheme in ("pkg", "structured") for _, scheme, _ in sources)
            cache = self.shared if self.shared is not None and packaged else self.cache
            key = (sources, config_path)
            if key not in cache:
                cache[key] = self.delegate.load_config(config_path=config_path)
            kept = cache[key]
            self.read.append((config_path, kept))
            return None if kept is None else dataclasses.replace(
                kept, config=copy.deepcopy(kept.config), header=dict(kept.header),
                defaults_list=copy.deepcopy(kept.defaults_list))

        def get_schema_source(self) -> Any:
            return self.delegate.get_schema_source()

        def initialize_sources(self, config_search_path: Any) -> None:
            self.delegate.initialize_sources(config_search_path)

        def group_exists(self, config_path: str) -> bool:
            return self.delegate.group_exists(config_path=config_path)

        def config_exists(self, config_path: str) -> bool:
            return self.delegate.config_exists(config_path=config_path)

        def get_group_options(self, group_name: str, results_filter: Any = ObjectType.CONFIG) -> list[str]:
            return self.delegate.get_group_options(group_name=group_name, results_filter=results_filter)

        def get_sources(self) -> list[Any]:
            return self.delegate.get_sources()

    return LoadedOnce


@contextlib.contextmanager
def files_read(gh: Any) -> Iterator[list[tuple[str, Any]] | None]:
    """The config files the compositions inside the block read, as ``(config path, Hydra's ConfigResult)``: what a
    composition is made of, to tell which nodes its files may write (gate.tiers.expand). None where the context's
    repository is Hydra's own (a Hydra whose internals differ): nothing is known, and the caller assumes the worst."""
    repository = getattr(gh.config_loader(), "repository", None)
    read = getattr(repository, "read", None)
    if read is None:
        yield None
        return
    start = len(read)
    got: list[tuple[str, Any]] = []
    try:
        yield got
    finally:
        got.extend(read[start:])
        del read[start:]

