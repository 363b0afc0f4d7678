"""Tier expansion: tier × encoders × seeds → experiments, each the exact ``gate-run`` it stands for.

:func:`expand_tier` composes every experiment with Hydra's compose API from ``conf/run.yaml`` — the same
composition ``gate-run`` does with the same overrides; each entry is composed once per kind of encoder and
each encoder of the kind set on a copy (:class:`EncoderSwap`), each entry × encoder resolved and validated once and
its seeds set on copies (:func:`with_seed`: the seed selects no config group; a config that interpolates it is
composed for each seed), the entries side by side in forked children where that is safe (:mod:`gate.forked`; what
each gives is taken in the tier's order, so the plan and its errors are the same either way) — and takes its id from
:func:`gate.results.experiment_id` of the resolved config, so the id the plan shows is the id the run
records. It trains nothing and writes nothing: it returns a :class:`Plan` with every experiment, the
entries an encoder cannot take (skipped, with a note) and every error found without training, collected
together (unknown dataset or encoder, an encoder no entry can take, a benchmark not prepared here, a config
``gate-run`` would refuse). :meth:`Plan.mark_done` then reads the results store once.

A tier with ``use_paper_protocol: true`` (the paper tiers) puts each benchmark's own ``paper_protocol`` (its dataset config:
the paper's image size and batch) on the command line before the tier's and the entry's overrides, which win
(:func:`paper_protocol_overrides`); they are read from the entry's first composition and set on each composition as Hydra
sets a command line's values (:func:`apply_values`), so the entry is not composed a second time for them.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from gate.engine.compose import files_read, hydra_compose_context
from gate.errors import ConfigError
from gate.files import regular_file
from gate.forked import map_forked
from gate.paths import path_part
from gate.results import ResultsStore, experiment_id, stable_hash
from gate.settings import TIER_FILE, default_path, target_of
from gate.tiers.spec import IDENTITY_KEYS, Entry, Tier, override_key, parse_tier

#: The longest a tier expansion stays silent (its progress lines).
PROGRESS_SECONDS = 15.0


@dataclasses.dataclass(frozen=True)
class Experiment:
    """One fine-tuning run of a tier: ``gate-run <overrides>``."""

    id: str
    tier: str
    dataset: str
    encoder: str
    seed: int
    overrides: tuple[str, ...]     # gate-run's command line, paths.root first
    config: Mapping[str, Any]      # the composed, resolved config (what gate-run will run)

    @property
    def label(self) -> str:
        return f"{self.encoder} × {self.dataset} (seed {self.seed})"


@dataclasses.dataclass
class Plan:
    tier: Tier
    encoders: tuple[str, ...]
    root: Path
    experiments: list[Experiment]
    skipped: list[str]                        # "<encoder> × <dataset>: why" — entries an encoder cannot take
    done: set[str] = dataclasses.field(default_factory=set)

    @property
    def pending(self) -> list[Experiment]:
        return [e for e in self.experiments if e.id not in self.done]

    @property
    def key(self) -> str:
        """``<tier>-<hash of its experiments>``: the tier run's folder name under ``<root>/tiers``."""
        return f"{path_part(self.tier.name, 'tier name')}-{stable_hash(sorted(e.id for e in self.experiments))[:8]}"

    @property
    def run_dir(self) -> Path:
        return self.root / "tiers" / self.key

    def store(self) -> ResultsStore:
        """The results store the tier's runs append to (``paths.results`` of their configs)."""
        results = {e.config["paths"]["results"] for e in self.experiments} or {str(default_path("results", self.root))}
        if len(results) > 1:
            raise ConfigError(f"tier {self.tier.name}: its experiments write to different results stores "
                              f"({sorted(results)}); give them one paths.results")
        return ResultsStore(results.pop())

    def mark_done(self, store: ResultsStore) -> Plan:
        """Note which experiments already have a complete record set in ``store`` (read once)."""
        ids = {e.id for e in self.experiments}
        self.done = {r["experiment"] for r in store.complete_records(kind="finetune")} & ids
        return self

    def describe(self) -> list[str]:
        n, d = len(self.experiments), len(self.done & {e.id for e in self.experiments})
        lines = [f"[gate] tier {self.tier.name}: {n} experiment(s) = {len({e.dataset for e in self.experiments})} "
                 f"benchmark(s) × {len(self.encoders)} encoder(s) × {len(self.tier.seeds)} seed(s); "
                 f"{d} already done (skipped), {n - d} to run"]
        lines += [f"  skipped: {s}" for s in self.skipped]
        return lines


# ---------------------------------------------------------------------------------------------- tiers


def packaged_tier_dir() -> Path:
    import gate.conf

    return Path(gate.conf.__file__).resolve().parent / "tier"


def known_tiers(search_dirs: Iterable[str | Path] = ()) -> list[str]:
    names = {p.stem for d in [packaged_tier_dir(), *[Path(s) / "tier" for s in search_dirs]] if Path(d).is_dir()
             for p in Path(d).glob("*.yaml")}
    return sorted(names)


def load_tier(name_or_path: str | Mapping[str, Any], search_dirs: Iterable[str | Path] = ()) -> Tier:
    """A tier by name (``conf/tier/<name>.yaml``, or ``<dir>/tier/<name>.yaml`` of a config dir), by path to a
    YAML file, or from an already-loaded mapping."""
    if isinstance(name_or_path, Mapping):
        return parse_tier(name_or_path, str(name_or_path.get("name", "tier")))
    text = str(name_or_path)
    candidates = ([Path(text).expanduser()] if text.endswith((".yaml", ".yml")) or "/" in text else
                  [Path(d) / "tier" for d in search_dirs][::-1] + [packaged_tier_dir()])
    if candidates and candidates[0].suffix in (".yaml", ".yml"):
        path = regular_file(candidates[0], "tier file")  # a FIFO or a device: refused, not "no such file"
        if not path.is_file():
            raise ConfigError(f"tier={text!r}: no such tier file")
    else:
        path = next((d / f"{text}.yaml" for d in candidates if (d / f"{text}.yaml").is_file()), None)
        if path is None:
            raise ConfigError(f"tier={text!r} is unknown: known tiers are {known_tiers(search_dirs)} "
                              f"(or give the path of a tier YAML file)")
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"tier file {path} is not a text file (not UTF-8): give a tier YAML file "
                          f"(e.g. a copy of conf/tier/demo.yaml)") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"tier file {path} is not valid YAML: {' '.join(str(err).split())}") from None
    return parse_tier(doc, path.stem)


# ------------------------------------------------------------------------------------------ expansion


def searchpath_override(searchpath: Sequence[str]) -> list[str]:
    """``hydra.searchpath=[...]`` for gate-run (entries as Hydra takes them: file://DIR, pkg://module)."""
    if not searchpath:
        return []
    entries = []
    for s in searchpath:
        s = str(s)
        if s.startswith("file://") and not Path(s[7:]).is_absolute():
            s = "file://" + str(Path(s[7:]).expanduser().resolve())
        entries.append(s)
    return ["hydra.searchpath=[" + ",".join(entries) + "]"]


def cannot_take(config: Mapping[str, Any]) -> str | None:
    """Why this encoder cannot take this entry at all (modality, or what the adapter needs), or None.

    Known without building anything: the encoder class's declared ``modalities`` (its ``accepts``; an encoder
    config with a ``stem`` is assumed to take what its stem takes) and the adapter class's ``needs`` against what
    the encoder class declares it provides (its ``missing_needs``)."""
    enc, ds, ad = config.get("encoder") or {}, config.get("dataset") or {}, config.get("adapter") or {}
    ecls, acls = target_of(enc), target_of(ad)
    modality = ds.get("modality")
    if (getattr(ecls, "modalities", None) and hasattr(ecls, "accepts") and modality and not enc.get("stem")
            and not ecls.accepts(modality)):
        return f"{modality} dataset, the encoder takes {sorted(ecls.modalities)} (no stem)"
    missing = acls.missing_needs(ecls) if ecls is not None and hasattr(acls, "missing_needs") else set()
    if missing:
        return f"adapter {ad.get('name')} needs {sorted(missing)}, which the encoder does not provide"
    return None


def paper_protocol_overrides(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The gate-run overrides that apply a composed experiment's dataset ``paper_protocol``:
    ``image_size`` -> ``image_size``; ``batch_size`` -> the adapter class's ``batch_key`` (``data.batch_size``,
    ``adapter.clips_per_batch`` for the temporal adapters) when the paper protocol's ``batch_unit`` (default
    ``example``) is what the adapter's batch counts (its ``batch_unit``). Nothing else: few-shot episodes are
    sized by their ways and shots, and a batch of one volume (ACDC) has no counterpart in an adapter that
    batches slices, so those keep the tier's batch size."""
    dataset, adapter = config.get("dataset") or {}, config.get("adapter") or {}
    paper = dataset.get("paper_protocol") or {}
    out = []
    if paper.get("image_size") is not None:
        out.append(f"image_size={paper['image_size']}")
    cls = target_of(adapter)
    key = getattr(cls, "batch_key", None)
    if (paper.get("batch_size") is not None and key and
            paper.get("batch_unit", "example") == getattr(cls, "batch_unit", None)):
        out.append(f"{key}={paper['batch_size']}")
    return tuple(out)


def expand_tier(tier: Tier, encoders: Sequence[str], root: str | Path, *, seeds: Sequence[int] | None = None,
                overrides: Sequence[str] = (), searchpath: Sequence[str] = (),
                check_prepared: Callable[[Mapping[str, Any]], str | None] | None = None,
                unprepared_is_error: bool = True, progress: Callable[[str], None] | None = None) -> Plan:
    """Every experiment of ``tier`` for ``encoders`` × seeds (the tier's, unless ``seeds``), with ``overrides``
    (gate-run overrides for all, after the tier's and the entry's). Raises one :class:`ConfigError` listing every
    problem found without training. ``check_prepared`` (default: the data stage's
    :func:`gate.engine.prepare.why_not_prepared`) says why a benchmark cannot run here; with ``unprepared_is_error``
    false (jobs described for another machine) that is a warning, not a problem. ``progress`` gets a line at most
    every :data:`PROGRESS_SECONDS` while the benchmarks are composed (a paper-sized tier takes minutes)."""
    if check_prepared is None:
        from gate.engine.prepare import why_not_prepared as check_prepared
    root = Path(root).expanduser().resolve()
    encoders = tuple(dict.fromkeys(encoders))
    seeds = tuple(seeds) if seeds is not None else tier.seeds
    problems: list[str] = []
    try:
        path_part(tier.name, "tier name")  # it names the tier's run folder (Plan.key) and report folder
    except ConfigError as err:
        problems.append(str(err))
    if not encoders:
        problems.append("encoders=[] is invalid: name at least one encoder (encoder=a or encoder=a,b)")
    problems += [f"overrides=[{o}] is invalid: {IDENTITY_KEYS[override_key(o)]}, not by overrides"
                 for o in overrides if override_key(o) in IDENTITY_KEYS]
    if not TIER_FILE.settings["seeds"].valid(list(seeds)):
        problems.append(f"seeds={list(seeds)} is invalid: expected a non-empty list of integers >= 0")
    if problems:
        raise ConfigError(f"tier {tier.name}: " + "; ".join(problems))
    experiments: list[Experiment] = []
    skipped: list[str] = []
    taken: dict[str, int] = {e: 0 for e in encoders}
    elsewhere: list[str] = []  # not prepared here, for jobs described for another machine
    with hydra_compose_context() as gh, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # validation warnings (small image sizes) are gate-run's to print
        from hydra import compose

        loader = gh.config_loader()
        sp = searchpath_override(searchpath)
        known = {g: set(loader.get_group_options(g, config_name="run", overrides=sp))
                 for g in ("dataset", "encoder", "adapter")}
        for enc in encoders:
            if enc not in known["encoder"]:
                problems.append(f"encoder={enc!r} is unknown: known encoders are {sorted(known['encoder'])}")
        unknown = [f"{e.dataset!r} (entry {i})" for i, e in enumerate(tier.entries, 1) if e.dataset not in known["dataset"]]
        if unknown:
            problems.append(f"dataset {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not registered (no "
                            f"conf/dataset/<name>.yaml); known datasets are {sorted(known['dataset'])}")
        for i, entry in enumerate(tier.entries, 1):
            if entry.adapter and entry.adapter not in known["adapter"]:
                problems.append(f"entry {i} ({entry.dataset}): adapter {entry.adapter!r} is unknown; known adapters "
                                f"are {sorted(known['adapter'])}")
        if problems:
            raise ConfigError(f"tier {tier.name}: {len(problems)} problem(s): " + "; ".join(problems))
        swap = EncoderSwap(gh, compose, encoders, sp)
        entries = list(enumerate(tier.entries, 1))
        said = {"at": time.monotonic(), "done": 0}
        started = said["at"]

        def composed(_index: int, _events: Any) -> None:  # a progress line at most every PROGRESS_SECONDS
            said["done"] += 1
            if (progress is not None and said["done"] < len(entries) and
                    time.monotonic() - said["at"] >= PROGRESS_SECONDS):
                said["at"] = time.monotonic()
                progress(f"[gate]   {said['done']} of {len(entries)} benchmarks composed × {len(encoders)} "
                         f"encoder(s) ({said['at'] - started:.0f} s)")

        # Each benchmark in a forked child where there are cores for them (gate.forked); what each gives is then taken
        # in the tier's order, here, so the plan and every line are the same either way.
        per_entry = map_forked(functools.partial(_entry_events, tier, encoders, seeds, root, overrides, sp, swap),
                               entries, lost="a tier expansion process ended without its benchmarks",
                               on_result=composed)
        prepared_seen: set[str] = set()
        first_entry: dict[str, int] = {}  # experiment id → the entry that gave it first
        twins: dict[tuple[int, int], str] = {}  # (first entry, later entry) → their dataset(s)
        for (number, entry), events in zip(entries, per_entry):
            for event in events:
                what = event[0]
                if what == "problem":
                    problems.append(event[1])
                elif what == "skipped":
                    skipped.append(event[1])
                elif what == "taken":
                    taken[event[1]] += 1
                elif what == "dataset" and event[1] not in prepared_seen:
                    prepared_seen.add(event[1])
                    why_not = check_prepared(event[2])
                    if why_not and unprepared_is_error:
                        problems.append(why_not)
                    elif why_not:
                        elsewhere.append(why_not)
                elif what == "experiment":
                    exp = event[1]
                    if first_entry.setdefault(exp.id, number) != number:  # listed twice: one experiment, run once
                        earlier = tier.entries[first_entry[exp.id] - 1].dataset
                        twins[(first_entry[exp.id], number)] = (
                            entry.dataset if earlier == entry.dataset else f"{earlier}, {entry.dataset}")
                        continue
                    experiments.append(exp)
    problems += [f"entries {a} and {b} ({names}) are the same experiment: list it once (an entry differs from "
                 f"another by its dataset, adapter or overrides that change the run)" for (a, b), names in twins.items()]
    for enc, n in taken.items():
        if n == 0 and any(s.startswith(enc + " × ") for s in skipped):  # (an entry that failed is a problem itself)
            problems.append(f"encoder {enc} can take no entry of tier {tier.name} "
                            f"({'; '.join(s.split(': ', 1)[1] for s in skipped if s.startswith(enc + ' × '))})")
    if problems:
        raise ConfigError(f"tier {tier.name}: {len(problems)} problem(s): " + "; ".join(problems))
    for why_not in elsewhere:
        warnings.warn(f"{why_not} (the jobs are described for another machine: prepare it there)", stacklevel=2)
    return Plan(tier, encoders, root, experiments, skipped)


def _entry_events(tier: Tier, encoders: Sequence[str], seeds: Sequence[int], root: Path, overrides: Sequence[str],
                  sp: Sequence[str], swap: EncoderSwap, numbered: tuple[int, Entry]) -> list[tuple]:
    """One benchmark of a tier for every encoder × seed, as the ordered events :func:`expand_tier` takes in the tier's
    order: ``("problem", line)``, ``("skipped", line)``, ``("taken", encoder)``, ``("dataset", name, section)`` (its
    first runnable config: whether it is prepared here is asked there, once per dataset) and ``("experiment",
    Experiment)`` (an experiment listed twice is told there, where every entry is seen)."""
    from hydra.errors import HydraException

    from gate.engine.validate import resolved_config, validate_run_config

    number, entry = numbered
    events: list[tuple] = []
    swap.start_entry((*tier.overrides, *entry.overrides, *overrides))
    paper: tuple[str, ...] = ()
    after: tuple[str, ...] = ()  # the paper protocol's values, set on each composition (not composed again)
    if tier.use_paper_protocol:
        try:
            first = entry_overrides(tier, entry, encoders[0], seeds[0], root, overrides, sp)
            paper = paper_protocol_overrides(resolved_config(swap.compose(encoders[0], first)))
        except (HydraException, ValueError, KeyError):
            pass  # the same composition fails below, where it is reported
        later = {override_key(o) for o in (*tier.overrides, *entry.overrides, *overrides)}
        paper = tuple(o for o in paper if override_key(o) not in later)
        if paper and not any(nested(override_key(o), k) for o in paper for k in later):
            after = paper
        elif paper:  # a later override inside (or above) a paper key: Hydra's order decides, so the entry
            # is composed with them on its command line: the composition kept above (without them) is dropped
            swap.start_entry((*tier.overrides, *entry.overrides, *overrides))
    dataset_said = False
    for enc in encoders:
        # The entry × encoder is resolved and validated once (composed once per entry and kind of encoder:
        # EncoderSwap); each seed is set on a copy of the resolved config (the seed selects no config group),
        # unless a value of it interpolates the seed: then each seed is composed (a split seed that follows it).
        resolved: Any = None
        invalid: str | None = None
        for seed in seeds:
            ovs = entry_overrides(tier, entry, enc, seed, root, overrides, sp, paper)
            where = f"{enc} × {entry.dataset} (seed {seed})"
            try:
                if resolved is None and after:
                    resolved = swap.resolved(enc, entry_overrides(tier, entry, enc, seed, root, overrides, sp), after)
                elif resolved is None:
                    resolved = swap.resolved(enc, ovs)
                if not swap.reads_seed or seed == seeds[0]:
                    config = with_seed(resolved, seed)
                else:  # a value interpolates the seed: this seed's own composition
                    config = swap.resolved(enc, entry_overrides(tier, entry, enc, seed, root, overrides, sp)
                                           if after else ovs, after, alone=True)
            except (HydraException, ValueError, KeyError) as err:
                events.append(("problem", f"{where}: {' '.join(str(err).split())}"))
                continue
            if config["dataset"]["name"] != entry.dataset:  # a config group the overrides pulled in
                events.append(("problem", f"{where}: the overrides compose dataset {config['dataset']['name']} under "
                                          f"the entry {entry.dataset}: {IDENTITY_KEYS['dataset']}"))
                continue
            if config.get("evaluate_test") is False:  # a tier compares test results: it needs them
                events.append(("problem", f"{where}: evaluate_test=false is invalid in a tier (its results are "
                                          f"compared on the test split); leave it at true"))
                continue
            why = cannot_take(config)
            if why is not None:
                if seed == seeds[0]:
                    events.append(("skipped", f"{enc} × {entry.dataset}: {why}"))
                continue
            events.append(("taken", enc))
            if not dataset_said:
                dataset_said = True
                events.append(("dataset", entry.dataset, config["dataset"]))
            if invalid is None or swap.reads_seed:  # (a config that reads the seed: each seed validated)
                try:
                    validate_run_config(config)
                    invalid = ""
                except ConfigError as err:
                    invalid = str(err)
            if invalid:
                events.append(("problem", f"{where}: {invalid}"))
                continue
            events.append(("experiment", Experiment(experiment_id(config, "finetune"), tier.name, entry.dataset, enc,
                                                    int(seed), tuple(ovs), config)))
    return events


#: The root nodes an encoder's config writes: its own, and its recipe's (``override /recipe@_global_.recipe: vit`` in
#: its defaults list). Every other node of a composition is the entry's and the run config's.
SWAPPED = frozenset({"encoder", "recipe"})
SEED = frozenset({"seed"})  # the root key the seeds of an entry × encoder differ by (:func:`with_seed`)


def _names(text: str | None) -> set[str]:
    """The node and group names in a key, package or config path (``recipe@_global_.recipe`` → recipe, _global_)."""
    return set(re.split(r"[./@+~]", text or "")) - {""}


def touches_swapped(override: str) -> bool:
    """Whether a command-line override may set a node an encoder's config writes (:data:`SWAPPED`)."""
    return bool(_names(override.split("=", 1)[0]) & SWAPPED)


def writes_swapped(path: str, loaded: Any) -> bool:
    """Whether a config file a composition read may write a node an encoder's config writes (:data:`SWAPPED`):
    it lies in one of their groups, its package header or a group or package of its defaults list names one, or
    one is among its top-level keys (whatever its package: the safe side)."""
    if loaded is None:  # an optional config that is not there (``preset: null``) writes nothing
        return False
    if _names(path.rpartition("/")[0]) & SWAPPED or _names((loaded.header or {}).get("package")) & SWAPPED:
        return True
    if any((_names(getattr(d, "group", None) or getattr(d, "path", None)) | _names(d.package)) & SWAPPED
           for d in loaded.defaults_list or ()):
        return True
    config = loaded.config
    return bool(set(config.keys() if hasattr(config, "keys") else ()) & SWAPPED)


class EncoderSwap:
    """Composes an entry once per *kind* of encoder and sets each encoder of that kind on a copy.

    An encoder's config writes the nodes of :data:`SWAPPED` only: its own ``encoder`` node, and the ``recipe`` its
    defaults list picks (``override /recipe@_global_.recipe: vit``). Encoders whose plain composition (``encoder=<name>``
    alone) is equal outside those nodes are one kind (the paper's 21 are one). For each entry the kind's first encoder is
    composed and every other encoder takes that composition with its own nodes (unresolved, so what interpolates them
    resolves on theirs) — where the entry writes none of those nodes, which is read from what it is made of, never
    guessed from the composed values (an entry may write the first encoder's own value): no override names them, and
    no config file the entry's composition reads beyond the encoder's plain one's (or leaves out) lies in their groups,
    packages them or has them as keys (:func:`writes_swapped`). Otherwise the entry is composed encoder by encoder, as
    gate-run would. :meth:`resolved` resolves the rest of a kind's composition once: another encoder of the kind
    resolves its own nodes in it, unless a value outside them interpolates one (then the whole config is resolved
    again). ``measurements/tier_expansion.py`` checks the ids and command lines against composing each experiment on
    its own."""

    def __init__(self, gh: Any, compose: Callable[..., Any], encoders: Sequence[str], searchpath: Sequence[str]) -> None:
        from hydra.errors import HydraException
        from omegaconf import OmegaConf

        self._gh, self._compose = gh, compose
        self._kind: dict[str, str] = {}
        self._nodes: dict[str, dict[str, Any]] = {}
        self._files: dict[str, dict[str, Any]] = {}  # the files an encoder's plain composition read, as loaded
        for enc in encoders if len(encoders) > 1 else ():  # one encoder: nothing to share, each entry composed once
            try:
                with files_read(gh) as read:
                    cfg = compose("run", overrides=[*searchpath, f"encoder={enc}"])
            except (HydraException, ValueError, KeyError):
                continue  # composed on its own for every entry: its error is reported there
            if read is None:
                continue  # what a composition is made of is not known here: each entry composed encoder by encoder
            plain = OmegaConf.to_container(cfg, resolve=False)
            self._nodes[enc] = {k: plain.pop(k) for k in sorted(SWAPPED) if k in plain}
            self._kind[enc] = stable_hash([plain, sorted(self._nodes[enc])])
            self._files[enc] = dict(read)
        self._entry: dict[str, Any] = {}
        self._resolved: dict[str, tuple[Any, dict[str, Any], bool, bool]] = {}
        self._own = True
        self.reads_seed = False

    def start_entry(self, overrides: Sequence[str]) -> None:
        self._entry, self._resolved = {}, {}
        self._own = any(touches_swapped(o) for o in overrides)

    def resolved(self, encoder: str, overrides: Sequence[str], after: Sequence[str] = (), *,
                 alone: bool = False) -> dict[str, Any]:
        """The entry's config for ``encoder`` (composed with ``overrides``, then ``after`` set as a command line's
        values: :func:`apply_values`), resolved: what ``resolved_config`` of composing it on its own gives.
        :attr:`reads_seed` then says whether a value of it interpolates the seed (:func:`with_seed` cannot set
        it on a copy). ``alone``: composed for this call only (another seed of a config that reads the seed)."""
        from omegaconf import OmegaConf, open_dict

        from gate.engine.validate import resolved_config

        if alone:
            cfg = self._compose("run", overrides=list(overrides))
            return resolved_config(apply_values(cfg, after) if after else cfg)
        if any(touches_swapped(o) for o in after):
            self._own = True
        kind = self._kind.get(encoder)
        if kind is not None and kind in self._resolved and not self._own:
            cfg, first, free, rest_reads_seed = self._resolved[kind]
            self.reads_seed = rest_reads_seed or reads(self._nodes[encoder], SEED)
            with open_dict(cfg):
                for key, node in self._nodes[encoder].items():
                    cfg[key] = copy.deepcopy(node)
            if free:  # nothing outside the nodes reads them: the rest resolves as it did for the kind's first
                return {**first, **{key: OmegaConf.to_container(cfg[key], resolve=True) for key in self._nodes[encoder]}}
            return resolved_config(cfg)
        cfg = self.compose(encoder, overrides)
        if after:
            apply_values(cfg, after)
        out = resolved_config(cfg)
        plain = OmegaConf.to_container(cfg, resolve=False)
        rest = {k: v for k, v in plain.items() if k not in SWAPPED and k not in SEED}
        self.reads_seed = reads(rest, SEED) or reads({k: plain.get(k) for k in SWAPPED}, SEED)
        if kind is not None and not self._own:
            self._resolved[kind] = (cfg, out, not reads_swapped(rest), reads(rest, SEED))
        return out

    def compose(self, encoder: str, overrides: Sequence[str]) -> Any:
        from omegaconf import OmegaConf

        kind = self._kind.get(encoder)
        if self._own or kind is None:
            return self._compose("run", overrides=list(overrides))
        if kind not in self._entry:
            with files_read(self._gh) as read:
                cfg = self._compose("run", overrides=list(overrides))
            plain = OmegaConf.to_container(cfg, resolve=False)
            files, alone = dict(read or ()), self._files[encoder]
            if (read is None or any(writes_swapped(path, files.get(path, alone.get(path)))
                                    for path in files.keys() ^ alone.keys())
                    or any(plain.get(k) != v for k, v in self._nodes[encoder].items())):
                self._own = True  # the entry writes an encoder's node: composed encoder by encoder
                return cfg
            self._entry[kind] = plain
            return cfg
        return OmegaConf.create({**self._entry[kind], **copy.deepcopy(self._nodes[encoder])})


def reads(value: Any, names: frozenset[str] | set[str]) -> bool:
    """Whether any string in ``value`` (a plain, unresolved config) may interpolate a root node of ``names``:
    ``${encoder.x}``, ``${oc.select:recipe.x,0}``, ``${.seed}`` (not ``${dataset.run_defaults.freeze_encoder}``)."""
    if isinstance(value, str):
        return "${" in value and _interpolates(names).search(value) is not None
    if isinstance(value, dict):
        return any(reads(v, names) for v in value.values())
    if isinstance(value, list):
        return any(reads(v, names) for v in value)
    return False


@functools.cache
def _interpolates(names: frozenset[str]) -> re.Pattern:
    return re.compile(r"\$\{[^}]*(?<![\w])\.*(" + "|".join(sorted(names)) + r")(?![\w])")


def reads_swapped(value: Any) -> bool:
    """Whether any string in ``value`` (a plain, unresolved config) interpolates a node of :data:`SWAPPED`."""
    return reads(value, SWAPPED)


def nested(key: str, other: str) -> bool:
    """Whether two override keys name the same node or one lies inside the other (``data`` and ``data.batch_size``)."""
    return key == other or key.startswith(other + ".") or other.startswith(key + ".")


def apply_values(cfg: Any, overrides: Sequence[str]) -> Any:
    """``cfg`` with value overrides (``image_size=64``) set as Hydra sets a command line's plain ``key=value``: the
    value parsed by its override parser and merged into the composed config, after every config group was merged —
    so composing without them and setting them here equals composing with them, when no other override touches
    their keys. Only plain assignments (what :func:`paper_protocol_overrides` gives); a key the config lacks is an
    error, never added."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    OmegaConf.set_struct(cfg, True)  # as composed
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        if override.package is not None or override.is_delete() or override.is_add() or override.is_force_add():
            raise ValueError(f"{override.input_line}: only a plain key=value is set on a composed config")
        OmegaConf.update(cfg, override.key_or_group, override.value(), merge=True)
    return cfg


def with_seed(cfg: Any, seed: int) -> Any:
    """A copy of a composed (or resolved) run config with another ``seed``: what composing it with ``seed=<seed>``
    gives where no value of ``cfg`` interpolates the seed (it is one root key that selects no config group), without
    composing again (tier expansion composes each entry × encoder once, not once per seed)."""
    from omegaconf import OmegaConf, open_dict

    out = copy.deepcopy(cfg)
    if not OmegaConf.is_config(out):
        out["seed"] = seed
        return out
    with open_dict(out):
        out.seed = seed
    return out


def entry_overrides(tier: Tier, entry: Entry, encoder: str, seed: int, root: Path, extra: Sequence[str] = (),
                    searchpath: Sequence[str] = (), paper_protocol: Sequence[str] = ()) -> tuple[str, ...]:
    """gate-run's command line for one experiment: output root, dataset (+ adapter), the dataset's paper_protocol
    (``use_paper_protocol`` tiers), the tier's overrides, the entry's, the user's extra overrides, encoder and seed."""
    return (f"paths.root={root}", *searchpath, f"dataset={entry.dataset}",
            *([f"adapter={entry.adapter}"] if entry.adapter else []), *paper_protocol, *tier.overrides, *entry.overrides,
            *extra, f"encoder={encoder}", f"seed={seed}")
