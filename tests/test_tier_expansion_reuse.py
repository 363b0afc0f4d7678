"""Tier expansion composes each entry × encoder once and sets the seeds on copies (gate.tiers.expand.with_seed):
the ids and the gate-run command lines stay those of composing every experiment on its own. The reference
(tests/data/tier_expansion.json) was written by that earlier expansion for every packaged tier and three encoders;
here the small tier (its paper protocol included) is checked in full, and measurements/tier_expansion.py checks
every tier (and times them)."""

from __future__ import annotations

import json

from helpers import load_script


def _measurement():
    return load_script("measurements/tier_expansion.py")


def test_the_small_tiers_ids_and_commands_are_those_of_composing_each_experiment():
    m = _measurement()
    reference = json.loads(m.REFERENCE.read_text())
    assert set(reference) == {"demo", "small", "base", "big", "full"}
    got = m.digest("small")
    assert len(got["experiments"]) == 72 and got == reference["small"]


def test_a_seed_set_on_a_copy_is_the_seed_composed():
    from hydra import compose

    from gate.engine.compose import hydra_compose_context
    from gate.engine.validate import resolved_config
    from gate.tiers.expand import with_seed

    with hydra_compose_context():
        base = compose("run", overrides=["dataset=digits", "encoder=resnet18_scratch", "seed=0"])
        direct = compose("run", overrides=["dataset=digits", "encoder=resnet18_scratch", "seed=7"])
    copied = with_seed(base, 7)
    assert resolved_config(copied) == resolved_config(direct) and base.seed == 0
    resolved = resolved_config(base)  # what the expansion copies: resolved once, the seed set on each copy
    assert with_seed(resolved, 7) == resolved_config(direct) and resolved["seed"] == 0


def test_no_packaged_config_interpolates_the_seed():
    """with_seed sets the seed on a resolved copy: right only while no config value is computed from it."""
    from pathlib import Path

    import gate.conf

    conf = Path(gate.conf.__file__).resolve().parent
    users = [str(p.relative_to(conf)) for p in conf.rglob("*.yaml") if "${seed}" in p.read_text()
             or "${..seed}" in p.read_text()]
    assert not users, f"configs that interpolate the seed (set it by composing instead): {users}"


def _composed_alone(overrides):
    from hydra import compose

    from gate.engine.compose import hydra_compose_context
    from gate.engine.validate import resolved_config
    from gate.results import experiment_id

    with hydra_compose_context():
        return experiment_id(resolved_config(compose("run", overrides=list(overrides))), "finetune")


def test_an_entry_that_writes_into_the_encoder_node_is_composed_encoder_by_encoder(tmp_path):
    """Encoders of one kind share an entry's composition (EncoderSwap); a preset that sets encoder keys
    (bbc_news_minilm sets encoder.max_length=64) would be lost on a swapped copy, so such an entry is composed for
    each encoder: the ids are those of composing each experiment alone."""
    from gate.tiers.expand import expand_tier, load_tier

    tier = load_tier({"name": "t", "seeds": [0], "benchmarks": [
        {"dataset": "bbc_news", "overrides": ["preset=bbc_news_minilm"]}, {"dataset": "bbc_news"}]})
    encoders = ("minilm", "mpnet_base")  # one kind: the same recipe override
    plan = expand_tier(tier, encoders, tmp_path, check_prepared=lambda _: None)
    assert len(plan.experiments) == 4
    for e in plan.experiments:
        assert e.id == _composed_alone(e.overrides), e.label
    with_preset = {e.encoder: e.config["encoder"]["max_length"] for e in plan.experiments if "preset" in str(e.overrides)}
    assert with_preset == {"minilm": 64, "mpnet_base": 64}


def test_the_paper_protocol_set_on_a_composition_is_the_paper_protocol_composed(tmp_path):
    """A paper tier's protocol (cifar100: 224 px, batch 64) is set on each composition as Hydra sets a command
    line's values (gate.tiers.expand.apply_values); an entry whose override lies above a paper key (``data={...}``
    after ``data.batch_size=64``) is composed with the protocol on its command line, where Hydra's order decides.
    Either way the ids are those of composing each experiment alone."""
    from gate.tiers.expand import expand_tier, load_tier

    tier = load_tier({"name": "t", "seeds": [0], "use_paper_protocol": True, "benchmarks": [
        {"dataset": "cifar100"}, {"dataset": "cifar100", "overrides": ["data={batch_size:8}"]}]})
    plan = expand_tier(tier, ("resnet18_scratch", "vit_base_scratch"), tmp_path, check_prepared=lambda _: None)
    assert len(plan.experiments) == 4
    for e in plan.experiments:
        assert e.id == _composed_alone(e.overrides), e.label
        assert e.config["image_size"] == 224 and "image_size=224" in e.overrides
    assert sorted(e.config["data"]["batch_size"] for e in plan.experiments) == [8, 8, 64, 64]


def test_a_value_that_interpolates_the_encoder_is_resolved_for_each_encoder(tmp_path):
    """Another encoder of a kind resolves only its own ``encoder`` node in the kind's composition (the rest was
    resolved for the kind's first encoder) — unless a value outside the node interpolates the encoder: then the
    whole config is resolved again. Reusing the first resolution here would give resnet18_scratch's experiment the
    note ``efficientnet_lite0`` (tried: it does)."""
    from gate.tiers.expand import expand_tier, load_tier, reads_swapped

    assert reads_swapped({"a": ["${oc.select:encoder.x,0}"]}) and reads_swapped("${.encoder}") and reads_swapped("${recipe.lr}")
    assert not reads_swapped("${oc.select:dataset.run_defaults.freeze_encoder,false}")
    tier = load_tier({"name": "t", "seeds": [0], "benchmarks": [
        {"dataset": "digits", "overrides": ["+dataset.notes_vs_gate=${encoder.name}"]}]})
    encoders = ("efficientnet_lite0", "resnet18_scratch")  # one kind: the conv recipe
    plan = expand_tier(tier, encoders, tmp_path, check_prepared=lambda _: None)
    assert len(plan.experiments) == 2
    for e in plan.experiments:
        assert e.id == _composed_alone(e.overrides), e.label
    notes = {e.encoder: e.config["dataset"]["notes_vs_gate"] for e in plan.experiments}
    assert notes == {"efficientnet_lite0": "efficientnet_lite0", "resnet18_scratch": "resnet18_scratch"}


def test_an_entry_that_writes_the_first_encoders_own_value_is_still_composed_for_each_encoder(tmp_path):
    """Whether an entry writes into the encoder's node is read from the files it brings, not guessed from the
    composed node: here the first encoder's own ``max_length`` is 64, the value the preset writes, so its composed
    node equals its own; a swapped copy would give mpnet_base its own 128 where composing it gives the preset's 64."""
    from gate.tiers.expand import expand_tier, load_tier

    (tmp_path / "conf" / "encoder").mkdir(parents=True)
    (tmp_path / "conf" / "encoder" / "minilm64.yaml").write_text(
        "defaults:\n  - minilm\n  - _self_\nname: minilm64\nmax_length: 64\n")
    tier = load_tier({"name": "t", "seeds": [0], "benchmarks": [
        {"dataset": "bbc_news", "overrides": ["preset=bbc_news_minilm"]}]})
    searchpath = [f"file://{tmp_path / 'conf'}"]
    plan = expand_tier(tier, ("minilm64", "mpnet_base"), tmp_path / "root", searchpath=searchpath,
                       check_prepared=lambda _: None)
    assert [e.encoder for e in plan.experiments] == ["minilm64", "mpnet_base"]
    for e in plan.experiments:
        assert e.id == _composed_alone(e.overrides), e.label
    assert {e.encoder: e.config["encoder"]["max_length"] for e in plan.experiments} == {"minilm64": 64,
                                                                                        "mpnet_base": 64}


def test_a_value_that_interpolates_the_seed_is_resolved_for_each_seed(tmp_path):
    """Each seed is set on a copy of the resolved config only where nothing interpolates it; a tier of your own may
    (here digits' split seed follows the run seed, a protocol that redraws the split per seed): then each seed's
    config is resolved from its own composition, as gate-run composes it. Reusing the first seed's resolution gave
    seed 1 the split of seed 0 and seed 0's experiment id."""
    from gate.tiers.expand import expand_tier, load_tier

    tier = load_tier({"name": "t", "seeds": [0, 1], "benchmarks": [
        {"dataset": "digits", "overrides": ["+dataset.splits.seed=${seed}"]}, {"dataset": "fashion_mnist"}]})
    plan = expand_tier(tier, ("efficientnet_lite0", "resnet18_scratch"), tmp_path, check_prepared=lambda _: None)
    assert len(plan.experiments) == 8 and len({e.id for e in plan.experiments}) == 8
    for e in plan.experiments:
        assert e.id == _composed_alone(e.overrides), e.label
    split_seeds = {(e.encoder, e.seed): e.config["dataset"]["splits"]["seed"] for e in plan.experiments
                   if e.dataset == "digits"}
    assert split_seeds == {(enc, s): s for enc in ("efficientnet_lite0", "resnet18_scratch") for s in (0, 1)}


_BOTH_WAYS = r"""
import json, re, sys, threading
import gate.adapters, gate.encoders  # the classes the checks read, imported once here (not in each child, each call)
import gate.forked as forked
import gate.tiers.expand as expand
from gate.errors import ConfigError

forks = []
real = forked._in_children
forked._in_children = lambda *a, **k: (forks.append(1), real(*a, **k))[1]
expand.PROGRESS_SECONDS = 0.0  # every benchmark composed is a progress line
good = {"name": "good", "seeds": [0, 1], "score": False, "overrides": {"image_size": 32},
        "benchmarks": ["digits", "bbc_news", {"dataset": "fashion_mnist", "overrides": {"data.batch_size": 16}}]}
bad = {"name": "bad", "seeds": [0, 1], "score": False, "benchmarks": [
    "digits", {"dataset": "fashion_mnist", "overrides": {"data.batch_size": -3}}, "bbc_news",
    {"dataset": "fmnist_seg", "overrides": {"trainer.max_steps": "many"}}]}
encoders = ["efficientnet_lite0", "resnet18_scratch"]

def run():
    lines = []
    plan = expand.expand_tier(expand.load_tier(good), encoders, "/tmp/gate-both-ways", check_prepared=lambda d: None,
                              progress=lines.append)
    try:
        expand.expand_tier(expand.load_tier(bad), encoders, "/tmp/gate-both-ways",
                           check_prepared=lambda d: f"not here: {d['name']}", progress=lines.append)
        error = None
    except ConfigError as err:
        error = str(err)
    experiments = [[e.id, e.dataset, e.encoder, e.seed, list(e.overrides), e.config] for e in plan.experiments]
    return experiments, plan.skipped, error, [re.sub(r"\(\d+ s\)$", "(s)", line) for line in lines]

forked_way = run()
used = len(forks)
stop = threading.Event()
threading.Thread(target=stop.wait, daemon=True).start()  # another thread: expanded here, one benchmark after another
here_way = run()
stop.set()
print(json.dumps([used, len(forks) - used, [a == b for a, b in zip(forked_way, here_way)], len(forked_way[0]),
                  forked_way[1], forked_way[2], forked_way[3]]))
"""


def test_benchmarks_expanded_in_forked_children_give_the_plan_problems_and_progress_of_expanding_them_here():
    """Two tiers expanded in forked children (a fresh interpreter: no other thread) and here (another thread running):
    one whose plan is made (a text benchmark skipped for the image encoders), the same experiments, configs and
    command lines; one whose entries fail in several ways, the same problems in the same order; the same progress
    lines."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    out = subprocess.run([sys.executable, "-c", _BOTH_WAYS], capture_output=True, text=True, timeout=600,
                         cwd=tests.parent)
    assert out.returncode == 0, out.stderr[-3000:]
    used, used_after, same, n, skipped, error, progress = json.loads(out.stdout.splitlines()[-1])
    assert used == (2 if len(os.sched_getaffinity(0)) > 1 else 0) and used_after == 0  # forked where it may
    assert same == [True, True, True, True] and n == 8  # 2 benchmarks × 2 encoders × 2 seeds
    assert skipped == ["efficientnet_lite0 × bbc_news: text dataset, the encoder takes ['image'] (no stem)",
                       "resnet18_scratch × bbc_news: text dataset, the encoder takes ['image'] (no stem)"], skipped
    assert error.startswith("tier bad: ") and error.index("not here: digits") < error.index("data.batch_size") \
        < error.index("trainer.max_steps"), error  # in the tier's order, the prepared check where it came
    assert [line.rsplit(" (", 1)[0] for line in progress] == \
        [f"[gate]   {n} of 3 benchmarks composed × 2 encoder(s)" for n in (1, 2)] + \
        [f"[gate]   {n} of 4 benchmarks composed × 2 encoder(s)" for n in (1, 2, 3)], progress
