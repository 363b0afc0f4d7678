"""Files written so that a kill at any moment leaves either the old content or the new, never half of one, and
damaged files set aside (kept for inspection, never read again) instead of failing every later run; files read
only when they are regular files.

* A write goes to a regular file, or to a new file (never through a device, a FIFO or a folder: ``out=/dev/full``
  is refused, not replaced by a file), gets the mode a plain ``open()`` would give it (``0666 & ~umask``, or the
  mode of the file it replaces), and a failed write is one line naming the file; a full disk says what to free
  (:func:`writing`).
* A file gate reads as records, a table, a tier or benchmarks file or a checkpoint must be a regular file
  (:func:`regular_file`, :func:`open_regular`): a link to ``/dev/zero`` would be read without end, a FIFO would
  block for ever.

The lowest layer of the package: it imports nothing from gate but its errors, so data, training, scoring and tiers
all use it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import secrets
import stat
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from .errors import GateError

#: errno values of a write refused for want of space (a full device, a user's disk quota).
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
#: errno values of a failed write that name no file when the kernel raises them (a bare ``[Errno 5]``).
WRITE_ERRORS = (errno.EIO, errno.EROFS, errno.EFBIG, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR,
                errno.ENXIO)


def file_kind(mode: int) -> str:
    """What a ``stat`` mode is, in words (for a refusal)."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _not_regular(path: str | os.PathLike, what: str, mode: int, verb: str) -> GateError:
    where = str(path)
    real = os.path.realpath(where)
    shown = f"{where} (a link to {real})" if real != os.path.abspath(where) else where
    return GateError(f"{what} {shown} is {file_kind(mode)}, not a regular file: gate {verb} regular files only; "
                     f"give the path of a file")


def regular_file(path: str | os.PathLike, what: str = "file") -> Path:
    """``path`` unchanged when it is a regular file (through links) or does not exist (the caller says what a
    missing file means); anything else (a device, a FIFO, a folder, a socket) is refused in one line naming it,
    before it is opened."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return path
    if not stat.S_ISREG(mode):
        raise _not_regular(path, what, mode, "reads")
    return path


def open_regular(path: str | os.PathLike, what: str = "file") -> IO[bytes]:
    """``open(path, "rb")`` of a regular file only: it is opened without blocking (a FIFO would wait for a writer)
    and checked on the open descriptor, so nothing can swap it after the check."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(path, what, mode, "reads")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def write_target(path: str | os.PathLike, what: str = "file", make_parents: bool = True) -> Path:
    """Where a write of ``path`` goes: the file itself, or the file a link names (as a plain ``open()`` writes
    through a link). Refused in one line: an existing path that is not a regular file (``/dev/full``, a FIFO, a
    folder), and, with ``make_parents=False`` (a file the user named), a new file whose folder does not exist."""
    path = Path(path).expanduser()
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        mode = os.stat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        raise _not_regular(path, what, mode, "writes")
    parent = target.parent
    if parent.exists() and not parent.is_dir():
        raise GateError(f"{what} {path}: {parent} is {file_kind(os.stat(parent).st_mode)}, not a folder")
    if not parent.exists() and not make_parents:
        raise GateError(f"{what} {path}: its folder {parent} does not exist; create it or give a path in an "
                        f"existing folder")
    return target


def read_config_yaml(path: str | os.PathLike) -> object:
    """A config YAML file as plain data (interpolations left as written), read by OmegaConf's rules — its loader's
    resolvers (``1e-3`` a float, no timestamps) and its refusal of a duplicate key — but with libyaml's parser where
    PyYAML has one: the same data as ``OmegaConf.to_container(OmegaConf.load(path))``, ≈ 15× sooner (the 42 dataset
    configs: 0.36 → 0.02 s), which gate-analysis and gate-rank's history pay when they read them, and the settings'
    defaults at import. YAML errors are PyYAML's (``yaml.YAMLError``)."""
    import yaml

    with open(path, encoding="utf-8") as stream:  # a stream: an error names the file
        return yaml.load(stream, Loader=_config_loader())


@functools.cache
def _config_loader() -> type:
    import yaml
    from omegaconf._utils import get_yaml_loader  # what OmegaConf.load itself reads with

    rules = get_yaml_loader()  # OmegaConf's loader (pure Python): its resolvers and its duplicate-key refusal
    if not hasattr(yaml, "CSafeLoader"):  # PyYAML built without libyaml
        return rules

    class ConfigLoader(yaml.CSafeLoader):
        def construct_mapping(self, node, deep=False):  # a key given twice is an error, as in OmegaConf's loader
            seen = set()
            for key, _ in node.value:
                if key.tag == yaml.resolver.BaseResolver.DEFAULT_SCALAR_TAG:
                    if key.value in seen:
                        raise yaml.constructor.ConstructorError("while constructing a mapping", node.start_mark,
                                                                f"found duplicate key {key.value}", key.start_mark)
                    seen.add(key.value)
            return super().construct_mapping(node, deep=deep)

    ConfigLoader.yaml_implicit_resolvers = rules.yaml_implicit_resolvers
    return ConfigLoader


def output_folder(path: str | os.PathLike, key: str = "out") -> Path:
    """``path`` as a folder outputs can go into: a folder, or nothing yet (made later); anything else (``out=/dev/null``,
    a file, a FIFO) is refused in one line naming ``key``, before any work."""
    path = Path(path).expanduser()
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        for parent in path.parents:
            if parent.exists():
                if not parent.is_dir():
                    raise GateError(f"{key}={path} is inside {parent}, which is "
                                    f"{file_kind(os.stat(parent).st_mode)}: give a folder for the outputs") from None
                break
        return path
    if not stat.S_ISDIR(mode):
        kind = "a regular file" if stat.S_ISREG(mode) else file_kind(mode)
        raise GateError(f"{key}={path} is {kind}, not a folder: give a folder for the outputs (it is created when "
                        f"missing)")
    return path


def disk_full(path: str | os.PathLike, what: str = "a file") -> str:
    """The one line for a write refused for want of space: where, and what to free."""
    folder = Path(path).parent if not Path(path).is_dir() else Path(path)
    return (f"no space left on the device holding {path} (writing {what}): free space there (`df -h {folder}` says "
            f"how much is left; checkpoints of finished runs under paths.runs and caches under paths.cache may be "
            f"deleted) or point paths.root at a larger disk")


@contextlib.contextmanager
def no_space(path: str | os.PathLike, what: str) -> Iterator[None]:
    """Around a stage that writes many files under ``path`` (a run: checkpoints, logs, records): a full disk (or
    quota) anywhere in it becomes one line naming the file (``path`` where the error names none) and what to
    free. Other errors pass unchanged."""
    try:
        yield
    except GateError:
        raise
    except OSError as err:
        if err.errno in NO_SPACE:
            raise GateError(disk_full(err.filename or path, what)) from err
        raise


@contextlib.contextmanager
def writing(path: str | os.PathLike, what: str = "a file") -> Iterator[None]:
    """Around a write of ``path``: a full disk (or quota) becomes one line naming the path and what to free, and
    an OS error that names no file names ``path`` (a bare ``[Errno 28]`` says neither)."""
    try:
        with no_space(path, what):
            yield
    except GateError:
        raise
    except OSError as err:
        if err.errno in WRITE_ERRORS and err.filename is None:
            raise GateError(f"cannot write {what} to {path}: {err.strerror or err}") from err
        raise  # a network error of a download written here, or one that names its file already


def _temp_beside(target: Path) -> str:
    """A new empty file in ``target``'s folder, created as a plain ``open()`` would create ``target`` (mode
    ``0666 & ~umask``: the kernel applies the umask), or with the mode of the file it will replace."""
    try:
        keep = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        keep = None
    while True:
        tmp = target.parent / f".{target.name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except FileExistsError:
            continue
        try:
            if keep is not None:
                os.fchmod(fd, keep)
        finally:
            os.close(fd)
        return str(tmp)


def atomic_write(path: str | os.PathLike, write: Callable[[str], object], what: str = "a file",
                 make_parents: bool = True) -> Path:
    """Create ``path`` by calling ``write(tmp)`` on a temporary file in the same folder, then ``os.replace`` it into
    place (atomic on POSIX): readers and twin writers see the old file or the new one, and a kill leaves no half
    file (only, at worst, a ``.tmp`` beside it). The one atomic write of the package (text, JSON, torch.save).
    ``path`` must be a regular file or new (:func:`write_target`); a failed write names it (:func:`writing`)."""
    path = Path(path)
    target = write_target(path, what, make_parents)
    with writing(target, what):
        if make_parents:
            target.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temp_beside(target)
        try:
            write(tmp)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return path


def atomic_write_text(path: str | os.PathLike, text: str, what: str = "a file", make_parents: bool = True) -> Path:
    """:func:`atomic_write` of a UTF-8 text."""
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"), what, make_parents)


class _KeepsWriteErrors:
    """A file object for ``torch.save`` that remembers the OSError a write raised: once a first write went through,
    torch's zip writer reports a later one as a RuntimeError ("unexpected pos ...") that names neither the disk nor
    the file; the saver raises the OSError itself instead."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh = fh
        self.error: OSError | None = None

    def write(self, data) -> int:
        try:
            return self.fh.write(data)
        except OSError as err:
            self.error = err
            raise

    def flush(self) -> None:
        self.fh.flush()


def atomic_torch_save(path: str | os.PathLike, obj: object, what: str = "a file") -> Path:
    """:func:`atomic_write` of ``torch.save(obj)``, written through a Python file object whose write errors are
    kept: torch reports a disk that fills mid-write as a RuntimeError ("unexpected pos ..."), saved to a file name
    even when the first write fails; the OSError it is (errno 28) is raised instead, which :func:`writing` names."""
    import torch

    def save(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            out = _KeepsWriteErrors(fh)
            try:
                torch.save(obj, out)
            except RuntimeError as err:
                if out.error is not None:
                    raise out.error from err
                raise

    return atomic_write(path, save, what)


def set_aside(path: str | os.PathLike, why: str, stacklevel: int = 3) -> Path:
    """Rename a damaged file or folder to ``<name>.corrupt-<time>`` with a warning saying why; it is never read
    again and stays there for inspection."""
    path = Path(path)
    target = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    path.replace(target)
    warnings.warn(f"{path} is {why}; moved aside to {target.name}", stacklevel=stacklevel)
    return target


def atomic_folder(path: str | os.PathLike, fill: Callable[[Path], object]) -> Path:
    """Create the folder ``path`` as one set of files: ``fill(staging)`` writes them into a new folder beside it,
    which then takes its place (an old folder there is renamed aside first and removed after). Readers see the old
    set or the new one, never a mix; a file the new set lacks does not survive from the old; a failure in ``fill``
    leaves the old folder as it was. A kill between the two renames leaves, at worst, the old folder aside as
    ``.<name>.<hex>.old`` with its files intact. The folder counterpart of :func:`atomic_write`."""
    import shutil

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise FileExistsError(f"{path} exists and is not a folder: gate writes a folder of files there; move it away")

    def beside(suffix: str) -> Path:
        return path.parent / f".{path.name}.{os.urandom(4).hex()}.{suffix}"

    staging = beside("tmp")
    os.mkdir(staging)  # 0777 & ~umask, as any folder the user creates
    try:
        fill(staging)
        for _ in range(10):
            old = None
            if path.exists():
                old = beside("old")
                os.replace(path, old)
            try:
                os.replace(staging, path)
            except OSError:
                if path.exists():  # a twin writer put its folder there between the two renames: set it aside too
                    if old is not None:
                        shutil.rmtree(old, ignore_errors=True)
                    continue
                if old is not None:
                    os.replace(old, path)  # the old folder back, as it was
                raise
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
            return path
        raise FileExistsError(f"{path} was replaced by another writer ten times while this one wrote it")
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
