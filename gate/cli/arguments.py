"""The command line before Hydra reads it: comma lists as lists (``encoder=a,b`` → ``encoders=[a,b]``: Hydra would
read it as a sweep), a tier file given by path, ``key=value`` items of an overrides list quoted. gate-tier's and
gate-rank's rows of :data:`gate.cli.commands.COMMANDS` name their list keys."""

from __future__ import annotations

from collections.abc import Mapping

from gate.errors import ConfigError


def normalise_args(argv: list[str], list_keys: dict[str, str]) -> list[str]:
    """``encoder=a,b`` → ``encoders=[a,b]``, ``seeds=0,1`` → ``seeds=[0,1]``, ``tier=x.yaml`` → ``tier_file=x.yaml``,
    ``overrides=[trainer.max_steps=10]`` → ``overrides=["trainer.max_steps=10"]`` (Hydra's parser takes an ``=``
    inside a list only quoted). A ConfigError for an empty name in a list (``encoder=a,,b``) or an unknown tier
    name (with the list of known ones). ``list_keys``: which keys take a comma list, and the key each becomes."""
    from gate.tiers.expand import known_tiers

    out = []
    has_searchpath = any(a.startswith("hydra.searchpath=") for a in argv)
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep:
            out.append(arg)
        elif key in list_keys:
            if value.startswith("["):
                out.append(f"{list_keys[key]}={value}")
                continue
            items = [v.strip() for v in value.split(",")]
            if not all(items):
                raise ConfigError(f"{key}={value!r} has an empty name: give {list_keys[key]} separated by single "
                                  f"commas ({key}=a,b)")
            out.append(f"{list_keys[key]}=[{','.join(items)}]")
        elif key == "overrides" and value.startswith("[") and value.endswith("]"):
            out.append(f"overrides={quote_items(value)}")
        elif key == "tier" and (value.endswith((".yaml", ".yml")) or "/" in value):
            out.append(f"tier_file={value}")
        elif key == "tier" and not has_searchpath and value not in known_tiers():
            raise ConfigError(f"tier={value!r} is unknown: known tiers are {known_tiers()} (or give the path of a "
                              f"tier YAML file, or add your config dir with hydra.searchpath=[file://DIR] for "
                              f"DIR/tier/{value}.yaml)")
        else:
            out.append(arg)
    return out


def quote_items(value: str) -> str:
    """``[a=1,b=[1,2]]`` → ``["a=1","b=[1,2]"]``: each top-level item of a list double-quoted (those already
    quoted, or holding a double quote, are kept as they are), so that Hydra reads ``key=value`` items as strings."""
    items, depth, current, quote = [], 0, "", ""
    for ch in value[1:-1]:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(current.strip())
            current = ""
            continue
        current += ch
    if current.strip():
        items.append(current.strip())
    quoted = [i if not i or i[0] in "'\"" or '"' in i else f'"{i}"' for i in items]
    return "[" + ",".join(quoted) + "]"


def retired_key(argv: list[str], replaced: Mapping[str, str]) -> str | None:
    """One line for a key of ``replaced`` on the command line (gate-rank's v1 keys ``seed=3``,
    ``cost_probe_steps=4``), naming what replaced it; an override Hydra cannot parse is left to Hydra's line."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    for arg in argv:
        key = arg.split("=", 1)[0].lstrip("+~")
        if key in replaced and "=" in arg:
            try:
                OverridesParser.create().parse_overrides([arg])
            except HydraException:
                continue
            return f"{key} was replaced by {replaced[key]}"
    return None
