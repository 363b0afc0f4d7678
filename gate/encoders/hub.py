"""Hub weights that fail fast offline: one line naming the missing weights and how to give a local copy.

Without a network, ``from_pretrained`` and timm's hub download retry for about a minute before failing with a
long traceback. Before any download, :func:`require_hub` checks the local Hugging Face cache and, on a miss,
whether the hub answers at all (one TCP connection, 3 s timeout); when it cannot be reached the encoder
raises :class:`WeightsUnavailable` at once.
"""

from __future__ import annotations

import socket
from urllib.parse import urlparse

from ..errors import GateError

CONNECT_TIMEOUT_S = 3.0


class WeightsUnavailable(GateError, OSError):
    """Pretrained weights that are neither in the local cache nor reachable on the hub."""


def hub_offline() -> bool:
    """Whether huggingface_hub was told to stay offline (its own parsed HF_HUB_OFFLINE flag)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def hub_reachable(timeout: float = CONNECT_TIMEOUT_S) -> bool:
    """Whether the hub endpoint accepts a TCP connection within ``timeout`` seconds (and we are not offline)."""
    if hub_offline():
        return False
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def is_cached(repo_id: str, filenames: tuple[str, ...], revision: str | None = None) -> bool:
    """Whether one of ``filenames`` of ``repo_id`` (at ``revision``) is in the local HF cache."""
    from huggingface_hub import try_to_load_from_cache

    for filename in filenames:
        found = try_to_load_from_cache(repo_id, filename, revision=revision)
        if isinstance(found, str):
            return True
    return False


def hub_revision(repo_id: str, revision: str | None = None, filenames: tuple[str, ...] = ("config.json",),
                 cache_dir: str | None = None) -> str | None:
    """The commit of ``repo_id`` whose files the local HF cache holds (the snapshot a load just used): the
    folder name in ``.../models--org--name/snapshots/<commit>/``. None when not cached there. Recorded with every
    result as ``weights_revision``, so an unpinned run still says which weights it measured."""
    from pathlib import Path

    from huggingface_hub import try_to_load_from_cache

    for filename in filenames:
        found = try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir, revision=revision)
        if isinstance(found, str):
            parent = Path(found).parent
            if parent.parent.name == "snapshots":
                return parent.name
    return None


def require_hub(repo_id: str, revision: str | None, what: str, local_hint: str,
                filenames: tuple[str, ...] = ("config.json",)) -> bool:
    """Return True when ``repo_id`` is cached locally (load with ``local_files_only``), False when it is not
    cached but the hub is reachable (download), and raise :class:`WeightsUnavailable` otherwise."""
    if is_cached(repo_id, filenames, revision):
        return True
    if hub_reachable():
        return False
    at = f"@{revision}" if revision else ""
    raise WeightsUnavailable(
        f"{what}: the weights {repo_id}{at} are not in the local Hugging Face cache and the hub cannot be "
        f"reached; {local_hint}, or point HF_HOME at a cache that holds them")


def load_pretrained(model_cls, repo_id: str, revision: str | None, checkpoint_path: str | None, pretrained: bool,
                    what: str, config=None):
    """``model_cls.from_pretrained`` from ``checkpoint_path`` (a local copy of the hub repo) or the hub (cache
    first, failing fast when neither has it); ``pretrained=False`` builds the same architecture randomly
    initialised from the repo's config (or the given ``config``)."""
    import os

    if checkpoint_path is not None and not os.path.isdir(checkpoint_path):
        raise FileNotFoundError(f"encoder.checkpoint_path={checkpoint_path!r} is not a directory; give a local copy "
                                f"of {repo_id} (config.json and its weights)")
    if config is not None and not pretrained:
        return model_cls(config)
    source = checkpoint_path or repo_id
    local = checkpoint_path is not None or require_hub(
        repo_id, revision, what, "download it once elsewhere and pass encoder.checkpoint_path=<its directory>")
    where = dict(local_files_only=local, revision=None if checkpoint_path else revision)
    try:
        if pretrained:
            return model_cls.from_pretrained(source, **where)
        return model_cls(model_cls.config_class.from_pretrained(source, **where))
    except OSError as err:
        raise WeightsUnavailable(f"{what}: could not load {source} ({' '.join(str(err).split())[:200]}); pass "
                                 f"encoder.checkpoint_path=<a local copy>") from err
