"""gate-data: list the datasets, prepare one (fetch when online, verify, write its split manifest), verify one.

    gate-data list [dataset=cifar100,food101]
    gate-data prepare dataset=cifar100 [dataset.data_dir=/scratch/cifar100] [force=true]
    gate-data verify dataset=cifar100

``prepare`` fetches a copy that is missing, incomplete (an interrupted fetch) or damaged (a recorded file gone or
resized), and with ``force=true`` online any hub or URL copy; offline it never downloads a copy that is on disk and
only recomputes the manifest. ``verify`` re-hashes the files prepare recorded (gate/data/hub.py: the completion
record), then checks the manifest against the data.

The command is the one wrapper's (gate/cli/common.py ``gate_command``); :func:`front` takes the action word and the
datasets off the command line first; the rest are Hydra overrides of ``conf/data.yaml`` (the same config groups as
gate-run, so ``paths.root=...`` and ``dataset.*`` work alike). The work is gate/engine/prepare.py's stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gate.cli.common import gate_command
from gate.engine.prepare import ACTIONS, dataset_keys
from gate.errors import ConfigError


def front(argv: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
    """gate-data's command line before Hydra reads it: the action (its first word) and the ``dataset=`` keys, each
    checked; what Hydra composes (prepare, verify: the one dataset's config; list: the rest, its ``dataset.*``
    overrides kept for each dataset's own composition); and what the parse is given besides the config."""
    flags, argv = hydra_flags(argv)
    if flags and not argv:  # --help, --hydra-help, --info: Hydra answers them
        return flags, {"action": "list"}
    done, parse = words(argv)
    return [*flags, *done], parse


# Hydra's own flags that take the next word (``--cfg job``); ``--info`` takes it only when it is one of its topics.
FLAG_VALUES = {"--cfg", "-c", "--package", "-p", "--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd",
               "--experimental-rerun", "--shell-completion", "-sc"}
INFO_TOPICS = {"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"}


def hydra_flags(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Hydra's flags (with their values) wherever they stand, and gate-data's own words in their order:
    ``gate-data --cfg job list`` is ``list`` with ``--cfg job``."""
    flags, rest, argv = [], [], list(argv)
    i = 0
    while i < len(argv):
        arg = argv[i]
        takes = arg in FLAG_VALUES or (arg in ("--info", "-i") and i + 1 < len(argv) and argv[i + 1] in INFO_TOPICS)
        if arg.startswith("-"):  # (an override never does: key=value, +key=, ++key=, ~key; --cfg=job takes no word)
            flags += argv[i:i + 2] if takes else [arg]
            i += 2 if takes else 1
            continue
        rest.append(arg)
        i += 1
    return flags, rest


def words(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    """The action word and the rest of gate-data's command line (Hydra's flags taken off)."""
    if not argv or argv[0] not in ACTIONS:
        got = f"; got {argv[0]!r}" if argv else ""
        raise ConfigError(f"the first word says what gate-data does: {', '.join(ACTIONS)} (gate-data list, gate-data "
                          f"prepare dataset=<key>){got}")
    action, rest = argv[0], argv[1:]
    names = dataset_names(rest)
    if action == "list":
        others = [o for o in rest if not o.startswith("dataset=")]
        each = [o for o in others if o.split("=", 1)[0].lstrip("+~").startswith("dataset.")]
        return [o for o in others if o not in each], {"action": action, "datasets": names, "overrides": others}
    if len(names) != 1:
        raise ConfigError(f"gate-data {action} needs one dataset=<key>; known: {', '.join(dataset_keys())}")
    return rest, {"action": action}


def dataset_names(overrides: Sequence[str]) -> list[str]:
    """The ``dataset=<key>`` overrides (comma-separated keys allowed), each checked against the known keys."""
    names = [n for o in overrides if o.startswith("dataset=") for n in o.split("=", 1)[1].split(",")]
    for name in names:
        if name not in dataset_keys():
            raise ConfigError(f"dataset={name} is not a known dataset; known: {', '.join(dataset_keys())}")
    return names


main = gate_command("gate-data")

if __name__ == "__main__":
    main()
