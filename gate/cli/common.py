"""What every entry point shares: expected errors as one line on stderr (exit code 2), never a traceback.

A traceback is shown only with ``GATE_DEBUG=1`` (or Hydra's ``HYDRA_FULL_ERROR=1``). Entry points call the
library inside :func:`run_cli`, inside their ``@hydra.main`` function (Hydra's own handler would print a
trimmed traceback otherwise).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

# Errors whose message is written for the user: bad config or input, missing files, refused downloads.
EXPECTED = (ValueError, TypeError, KeyError, LookupError, OSError, RuntimeError, ImportError)


# True while HYDRA_FULL_ERROR=1 was set by :func:`hydra_entry` (so that Hydra raises its own errors to gate), not
# by the user asking for tracebacks.
_hydra_errors_raised = False


def debug_enabled() -> bool:
    return os.environ.get("GATE_DEBUG", "") not in ("", "0") or (
        os.environ.get("HYDRA_FULL_ERROR", "") == "1" and not _hydra_errors_raised)


def hydra_entry(cmd: str, hydra_main: Callable[[], Any]) -> Any:
    """Call a ``@hydra.main`` function so that Hydra's own errors, raised before the entry point runs (an
    override of a key the config does not have, an override Hydra cannot parse, an unknown config option), end
    as one line ``<cmd>: error: ...`` (exit code 2) instead of Hydra's multi-line report (exit code 1).

    Hydra raises those errors to its caller only under ``HYDRA_FULL_ERROR=1``: it is set here for the
    composition and taken back by :func:`prepare_process`, the entry point's first call, so neither the run
    nor the processes it starts see it."""
    global _hydra_errors_raised
    if debug_enabled():
        return hydra_main()
    os.environ["HYDRA_FULL_ERROR"] = "1"
    _hydra_errors_raised = True
    try:
        return hydra_main()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # noqa: BLE001 - Hydra's composition and parse errors, as one line
        fail(cmd, hydra_error(err, sys.argv[1:]))
    finally:
        _release_hydra_errors()


def _release_hydra_errors() -> None:
    global _hydra_errors_raised
    if _hydra_errors_raised:
        os.environ.pop("HYDRA_FULL_ERROR", None)
        _hydra_errors_raised = False


# Keys of the command line that are gone, each refused with what to write instead ({value}: the value given), never
# added or ignored.
RETIRED_KEYS = {
    "experiment": "it was renamed 'preset'; use preset={value}",  # the group of named run bundles (conf/preset/)
    "config_dirs": "gate-tier never read it; a config dir of your own (with tier/, dataset/, encoder/, ... folders) "
                   "is added with hydra.searchpath=[file://DIR]",
}


def hydra_error(err: BaseException, argv: Sequence[str] = ()) -> str:
    """One line for an error Hydra raised while reading the command line ``argv`` or composing the config."""
    return describe(err, argv)


def describe(err: BaseException, argv: Sequence[str] = ()) -> str:
    """One line for an exception: the innermost cause of wrapper exceptions (Hydra's instantiation and composition
    errors), a parse error with how to quote, an unknown key with the keys its level has (``argv``: the command
    line, for the value a renamed key was given)."""
    from hydra.errors import OverrideParseException

    while err.__cause__ is not None and type(err).__name__ in ("InstantiationException", "ConfigCompositionException"):
        err = err.__cause__
    if isinstance(err, OverrideParseException):
        where = str(err).splitlines()[0].strip() if str(err).strip() else "a syntax error"
        where = where.split(" See https://hydra.cc")[0]
        return (f"Hydra cannot parse an override ({where}); a list item or value holding '=', ',', spaces or "
                f"brackets must be quoted: the whole argument in single quotes and each such item in double "
                f"quotes, e.g. 'overrides=[\"trainer.max_steps=10\",\"image_size=32\"]'")
    unknown = unknown_key(err, argv)
    if unknown:
        return unknown
    text = str(err) if not isinstance(err, KeyError) or not err.args else str(err.args[0])
    text = " ".join(text.split()).split(" Config search path:")[0]  # one line; an unknown option: not Hydra's paths
    from gate.errors import GateError

    if isinstance(err, GateError) or (isinstance(err, EXPECTED) and text):
        return text
    return f"internal error ({type(err).__name__}: {text}); rerun with GATE_DEBUG=1 for the traceback"


def unknown_key(err: BaseException, argv: Sequence[str] = ()) -> str | None:
    """One line for an override of a key the config does not have (OmegaConf's "Key 'x' is not in struct", an
    AttributeError that would read as an internal error): the key, the keys that level has, and how to add one;
    for a key that is gone (:data:`RETIRED_KEYS`), what to write instead."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    if not isinstance(err, (ConfigAttributeError, ConfigKeyError)) or "not in struct" not in str(err):
        return None
    full_key = str(getattr(err, "full_key", None) or getattr(err, "key", None) or "?")
    if full_key in RETIRED_KEYS:
        given = [a.split("=", 1)[1] for a in argv if a.split("=", 1)[0].lstrip("+~") == full_key and "=" in a]
        return f"unknown config key {full_key!r}: " + RETIRED_KEYS[full_key].format(value=given[-1] if given else "<name>")
    parent = getattr(err, "parent_node", None)
    known = sorted(str(k) for k in parent.keys()) if parent is not None and hasattr(parent, "keys") else []
    level = full_key.rsplit(".", 1)[0] if "." in full_key else "the top level"
    return (f"unknown config key {full_key!r}; {level} has: {', '.join(known) or '(no keys)'} "
            f"(a key the config does not have is added with +{full_key}=<value>)")


def fail(cmd: str, message: str) -> NoReturn:
    print(f"{cmd}: error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def out_of_memory(err: BaseException) -> bool:
    """Python's MemoryError, torch's CPU allocator failing, or a CUDA out-of-memory error."""
    return isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError" or (
        isinstance(err, RuntimeError) and "can't allocate memory" in str(err))


def run_cli(cmd: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; any failure becomes ``<cmd>: error: <what>`` on stderr and exit code 2 (memory
    running out: which stage and what to lower, from the command's row of :data:`gate.cli.commands.COMMANDS`)."""
    try:
        return fn(*args, **kwargs)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # noqa: BLE001 - the whole point: no traceback for the user
        if debug_enabled():
            raise
        if out_of_memory(err):
            from gate.cli.commands import COMMANDS

            row = COMMANDS.get(cmd)
            doing = row.doing if row else getattr(fn, "__name__", "the command")
            lower = row.memory_hint if row else "the sizes this command holds at once"
            fail(cmd, f"memory ran out during {doing} ({type(err).__name__}); lower {lower}")
        fail(cmd, describe(err))


def gate_command(name: str) -> Callable[[], None]:
    """The console script of the command ``name`` (its row of :data:`gate.cli.commands.COMMANDS`), in one shape for
    every command: the command line normalised (comma lists, retired keys), Hydra's composition (its errors one
    line), the process prepared, **one parse** of the composed config into what the stage takes, the stage, and
    its result's ``report()`` (what it prints; the exit code it returns). Every failure is one line and exit 2."""
    import hydra

    from gate.cli.commands import COMMANDS

    row = COMMANDS[name]
    taken: dict[str, Any] = {}  # what the row's front took off the command line, for the parse

    @hydra.main(version_base=None, config_path="pkg://gate.conf", config_name=row.config)
    def compose(cfg: Any) -> None:
        prepare_process(cfg)
        request = run_cli(name, row.load("parse"), cfg, **taken)
        if getattr(request, "uses_lightning", False):
            quiet_lightning()
        result = run_cli(name, row.load("stage"), request)
        code = result.report()
        if code:
            sys.exit(code)

    def main(argv: Sequence[str] | None = None) -> None:
        """The command with ``argv`` (default: this process's command line)."""
        from gate.errors import ConfigError

        given, args = argv is not None, list(sys.argv[1:] if argv is None else argv)
        from gate.cli.arguments import normalise_args, retired_key

        taken.clear()
        try:
            if row.front is not None:
                args, more = row.load("front")(args)
                taken.update(more)
            if row.retired is not None and (line := retired_key(args, row.load("retired"))):
                fail(name, line)
            if row.list_keys:
                args = normalise_args(args, dict(row.list_keys))
        except ConfigError as err:
            fail(name, str(err))
        if not any(a.startswith("hydra.job.name=") for a in args):  # Hydra names the job after this module's
            args = [*args, f"hydra.job.name={name}"]  # file otherwise: `gate-run --help` said "common is powered by"
        saved, sys.argv = sys.argv, [sys.argv[0], *args]  # Hydra reads the command line from sys.argv
        try:
            hydra_entry(name, compose)  # an unknown key or an unparsable override: one line, not Hydra's report
        finally:
            if given:
                sys.argv = saved

    main.__doc__ = f"{name}: {row.doing}"
    return main


def prepare_process(cfg: Any) -> None:
    """Set up this process for one entry point (the CLI is the edge: library code never does this).

    * Quiet, honest output: Lightning's info chatter (device banners, tips, "Restoring states ...") is
      dropped; gate prints what matters itself. Deprecation noise from third-party internals is hidden.
    * Everything the run writes goes under ``paths.root``: temporary files, W&B's cache/config/data dirs and
      matplotlib's cache (unless the user set those explicitly), so ``$HOME`` and ``$TMPDIR`` stay untouched.
    * A stop signal (SIGTERM, SIGINT, SIGHUP, SIGUSR2) exits 128 + its number with one line (:mod:`gate.signals`).
    """
    import warnings

    from gate import signals

    signals.install()
    _release_hydra_errors()  # the config is composed: Hydra's errors need not be raised to gate any more
    warnings.formatwarning = _one_line_warning
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=r".*LeafSpec.*is deprecated")
    warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
    root = None
    try:
        root = cfg.paths.root if "paths" in cfg else None
    except Exception:  # noqa: BLE001 - a broken interpolation is reported by validation
        root = None
    if root is None:
        return
    from gate.errors import ConfigError

    try:
        _redirect_writes(str(root))
    except ConfigError:
        return  # validation reports the bad root together with every other problem



#: Lightning's loggers, which its import sets to INFO (device banners, tips, "Restoring states ...").
LIGHTNING_LOGGERS = ("lightning.pytorch", "lightning.fabric", "lightning")


def quiet_lightning() -> None:
    """Drop Lightning's info chatter. Its import sets its loggers to INFO, so their level is set once it is imported:
    now where it is, else right after the import (a finder that acts once, on ``lightning.pytorch``): the stages
    import Lightning only where they train, and a run answered without training (already stored, its data missing)
    never loads it."""
    if "lightning.pytorch" in sys.modules:
        _warnings_only()
    elif not any(isinstance(f, _QuietOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietOnImport())


def _warnings_only() -> None:
    import logging

    for name in LIGHTNING_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


class _QuietOnImport:
    """A meta-path finder that finds nothing itself: when ``lightning.pytorch`` is imported it takes the spec the
    other finders give and sets Lightning's loggers to WARNING once that module has run, then leaves."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "lightning.pytorch":
            return None
        import importlib.util

        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenQuiet(spec.loader)
        return spec


class _ThenQuiet:
    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        _warnings_only()

    def __getattr__(self, name: str) -> Any:  # the wrapped loader's other methods (get_code, get_source, ...)
        return getattr(self.loader, name)


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """A warning as one line (a library's own may span several: scikit-learn's convergence warning is six)."""
    return f"[gate] warning: {' '.join(str(message).split())}\n"


def _redirect_writes(root: str) -> None:
    import tempfile
    from pathlib import Path

    from gate.engine.validate import check_output_root

    base = check_output_root(root)
    tmp = base / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(tmp)
    tempfile.tempdir = str(tmp)
    cache = base / "cache"
    for var, path in (("MPLCONFIGDIR", cache / "matplotlib"), ("WANDB_CACHE_DIR", cache / "wandb"),
                      ("WANDB_CONFIG_DIR", base / "wandb" / "config"), ("WANDB_DATA_DIR", cache / "wandb-data"),
                      ("WANDB_ARTIFACT_DIR", cache / "wandb-artifacts")):
        if not os.environ.get(var):
            Path(path).mkdir(parents=True, exist_ok=True)
            os.environ[var] = str(path)
    os.environ.setdefault("GIT_OPTIONAL_LOCKS", "0")
