"""A tier file: plain YAML a user copies and edits (``conf/tier/<name>.yaml``).

```yaml
name: demo
seeds: [0]                       # the GATE paper averages three: [0, 1, 2]
score: true                      # gate-tier runs gate-score on the tier's classification datasets afterwards
use_paper_protocol: false        # true: each dataset's own `paper_protocol` (image size, batch) first (paper tiers)
overrides: {logger: csv, image_size: 32}   # gate-run overrides for every entry (the tier's protocol)
score_overrides: {max_samples: 500}         # gate-score overrides (image_size follows the entry's)
benchmarks:
  - fashion_mnist                              # a dataset key: its default adapter, the tier's protocol
  - dataset: fmnist_seg                        # or a mapping:
    adapter: segmentation                      #   optional (default: the dataset's own)
    overrides: {image_size: 64, trainer.max_steps: 80}   # this entry's protocol (wins over the tier's)
```

Override values are written as Hydra overrides (``key=value``; lists as ``[a,b]``); a key may also be a
config group (``preset: paper_finetune``). The recipe follows the encoder's architecture
(encoder configs choose it), so entries do not name one.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from gate.errors import ConfigError

ENTRY_KEYS = ("dataset", "adapter", "overrides", "note")
#: Keys of older tier files, refused with the new name (a silently ignored key would run another protocol).
RENAMED_TIER_KEYS = {"use_protocol": "use_paper_protocol"}
# The keys of the file itself (their types, and use_protocol's new name) are declared in gate.settings.TIER_FILE.
#: Keys that say which experiment a run is (its label in the plan and every summary): set in one place each, never
#: by overrides, which gate-tier puts before its own ``encoder=``/``seed=`` (dropped) or after an entry's
#: ``dataset=`` (a digits entry would record another dataset). Key → where it is set instead.
IDENTITY_KEYS = {
    "dataset": "an entry's dataset is its 'dataset:' key (write another entry for another dataset)",
    "dataset.name": "an entry's dataset is its 'dataset:' key (write another entry for another dataset)",
    "encoder": "encoders are set by gate-tier/gate-rank encoder=a,b",
    "encoder.name": "encoders are set by gate-tier/gate-rank encoder=a,b",
    "seed": "seeds are set by the tier's seeds: [...] or seeds=[...] on the command line",
}


@dataclasses.dataclass(frozen=True)
class Entry:
    dataset: str
    adapter: str | None = None
    overrides: tuple[str, ...] = ()
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Tier:
    name: str
    entries: tuple[Entry, ...]
    seeds: tuple[int, ...] = (0,)
    score: bool = False
    overrides: tuple[str, ...] = ()
    score_overrides: tuple[str, ...] = ()
    use_paper_protocol: bool = False  # each dataset's own paper_protocol before the tier's overrides (gate.tiers.expand)


def render_value(value: Any) -> str:
    """A plain value as the right-hand side of a Hydra override."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(render_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{render_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if text == "" or any(ch in text for ch in " ,[]{}()='\"\\:"):
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return text


def render_overrides(overrides: Any, where: str) -> tuple[str, ...]:
    """A mapping ``{key: value}`` (or a list of ``key=value`` strings) as Hydra override strings."""
    if overrides is None:
        return ()
    if isinstance(overrides, Mapping):
        return tuple(f"{k}={render_value(v)}" for k, v in overrides.items())
    if isinstance(overrides, (list, tuple)) and all(isinstance(o, str) and "=" in o for o in overrides):
        return tuple(overrides)
    raise ConfigError(f"{where}: overrides={overrides!r} is invalid: expected a mapping of key: value "
                      f"(or a list of 'key=value' strings)")


def override_key(override: str) -> str:
    """The config key a Hydra override sets (``+key=v``, ``~key``, ``key@pkg=v`` → ``key``)."""
    return override.split("=", 1)[0].lstrip("+~").split("@", 1)[0].strip()


def identity_override_problems(overrides: Sequence[str], where: str) -> list[str]:
    """One clause per override of ``overrides`` that sets a key of :data:`IDENTITY_KEYS`; ``where`` names them."""
    return [f"{where} set {o.lstrip('+~')}: {IDENTITY_KEYS[override_key(o)]}, not by overrides"
            for o in overrides if override_key(o) in IDENTITY_KEYS]


#: Hydra's keys that make a config node code to run (``_target_`` names a callable; the others shape its call).
CODE_KEY = re.compile(r"^_(target|partial|args|recursive|convert)_$")


def code_override_problems(overrides: Any, where: str) -> list[str]:
    """One clause per override that would reach a ``_target_`` (or another key that makes a node a call): a tier file
    is data that gate-tier runs for whoever hands it over, and ``dataset.builder._target_: shutil.rmtree`` would
    delete files when its job builds the dataset (Hydra's blocklist stops os.system, not shutil). A config that
    runs code of your own goes in a config dir of your own (``hydra.searchpath``) and is selected by name."""
    def named(node: Any) -> bool:
        if isinstance(node, Mapping):
            return any(CODE_KEY.match(str(k)) or named(v) for k, v in node.items())
        if isinstance(node, (list, tuple)):
            return any(named(v) for v in node)
        return isinstance(node, str) and any(f"_{word}_" in node for word in ("target", "partial", "args"))

    if isinstance(overrides, Mapping):
        items = list(overrides.items())
    elif isinstance(overrides, (list, tuple)):
        items = [tuple(str(o).split("=", 1)) if "=" in str(o) else (str(o), None) for o in overrides]
    else:
        return []
    found = []
    for key, value in items:
        parts = override_key(str(key)).split(".")
        if any(CODE_KEY.match(part) for part in parts) or named(value):
            found.append(f"{where}: override {override_key(str(key))} names code to run (a _target_ is a Python "
                         f"callable): a tier file may not set {'/'.join(('_target_', '_partial_', '_args_'))} keys; put "
                         f"such a config in a config dir of your own (hydra.searchpath=[file://DIR]) and select it by name")
    return found


def parse_tier(doc: Any, source: str) -> Tier:
    """A :class:`Tier` from a tier file's content; every problem is reported together."""
    if not isinstance(doc, Mapping):
        raise ConfigError(f"tier {source}: expected a mapping with name, seeds and benchmarks, got {type(doc).__name__}")
    from gate.settings import TIER_FILE, Str, check

    name = str(doc.get("name") or source)
    problems = check(doc, TIER_FILE)  # the keys a tier file has, their types (gate/settings.py)
    for old, new in RENAMED_TIER_KEYS.items():
        if old in doc:
            problems.append(f"{old} was renamed {new} (a dataset's paper_protocol; 'protocol' is the run settings that "
                            f"decide a number): write {new}: {render_value(doc[old])}")
    seeds = doc.get("seeds", [0])
    seeds = [seeds] if TIER_FILE.settings["seeds"].valid(seeds) and not isinstance(seeds, list) else seeds
    if not TIER_FILE.settings["seeds"].valid(seeds):
        seeds = [0]
    elif len(set(seeds)) != len(seeds):
        problems.append(f"seeds={seeds!r} is invalid: a seed is listed twice (its experiments would run twice)")
    entries: list[Entry] = []
    items = doc.get("benchmarks") if TIER_FILE.settings["benchmarks"].valid(doc.get("benchmarks")) else []
    for i, item in enumerate(items):
        where = f"entry {i + 1}"
        if isinstance(item, str):
            entries.append(Entry(item))
            continue
        if not Str().valid(item.get("dataset") if isinstance(item, Mapping) else None):
            problems.append(f"{where}: {item!r} is invalid: expected a dataset key or a mapping with a 'dataset' key")
            continue
        extra = sorted(set(item) - set(ENTRY_KEYS))
        if extra:
            problems.append(f"{where} ({item['dataset']}): unknown key(s) {extra}: an entry has {list(ENTRY_KEYS)}")
        try:
            ovs = render_overrides(item.get("overrides"), f"{where} ({item['dataset']})")
        except ConfigError as err:
            problems.append(str(err))
            ovs = ()
        problems += identity_override_problems(ovs, f"{where} ({item['dataset']}): overrides")
        problems += code_override_problems(item.get("overrides"), f"{where} ({item['dataset']})")
        adapter = item.get("adapter")
        entries.append(Entry(item["dataset"], str(adapter) if adapter else None, ovs, str(item.get("note") or "")))
    try:
        overrides = render_overrides(doc.get("overrides"), "tier overrides")
        score_overrides = render_overrides(doc.get("score_overrides"), "tier score_overrides")
    except ConfigError as err:
        problems.append(str(err))
        overrides = score_overrides = ()
    problems += identity_override_problems(overrides, "tier overrides")
    problems += identity_override_problems(score_overrides, "tier score_overrides")
    problems += code_override_problems(doc.get("overrides"), "tier overrides")
    problems += code_override_problems(doc.get("score_overrides"), "tier score_overrides")
    if problems:
        raise ConfigError(f"tier {name}: " + "; ".join(problems))
    return Tier(name, tuple(entries), tuple(int(s) for s in seeds), bool(doc.get("score")), overrides,
                score_overrides, bool(doc.get("use_paper_protocol")))  # absent: false (no scores, the tier's sizes)
