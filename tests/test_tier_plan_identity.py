"""A tier plan says what it runs (issue 27, "silent wrong plans"): an experiment listed twice, an entry whose
overrides change its dataset, and overrides that set the seed or the encoder (which gate-tier sets last, so they
were dropped) are each refused in one line naming the entry and where the key is set instead."""

import pytest

from gate.errors import ConfigError
from gate.tiers.expand import expand_tier
from gate.tiers.spec import parse_tier

BASE = {"name": "t", "seeds": [0], "overrides": {"logger": "csv", "image_size": 32}}


def anywhere(dataset):
    return None  # the plan only: whether a benchmark is prepared here is not what these tests are about


def plan(doc, encoders=("efficientnet_lite0",), **kwargs):
    return expand_tier(parse_tier({**BASE, **doc}, "t"), list(encoders), "/tmp/gate-plan-test",
                       check_prepared=anywhere, **kwargs)


def one_line(err) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


def test_a_benchmark_listed_twice_is_refused_naming_both_entries():
    """`benchmarks: [digits, digits]` was one experiment reported as "2 of 2 done"."""
    with pytest.raises(ConfigError) as err:
        plan({"benchmarks": ["digits", "digits"]})
    assert "entries 1 and 2 (digits) are the same experiment" in one_line(err)
    # an entry that differs only where the experiment does not (a note) is the same experiment too
    with pytest.raises(ConfigError, match=r"entries 1 and 2 \(digits\) are the same experiment"):
        plan({"benchmarks": ["digits", {"dataset": "digits", "note": "again"}]})
    # the same dataset under another protocol is another experiment: allowed
    assert len(plan({"benchmarks": ["digits", {"dataset": "digits", "overrides": {"image_size": 48}}]}).experiments) == 2


def test_an_entry_override_cannot_change_its_dataset():
    """`{dataset: digits, overrides: {dataset: fashion_mnist}}` was labelled digits and recorded fashion_mnist."""
    with pytest.raises(ConfigError) as err:
        parse_tier({**BASE, "benchmarks": [{"dataset": "digits", "overrides": {"dataset": "fashion_mnist"}}]}, "t")
    assert "entry 1 (digits): overrides set dataset=fashion_mnist" in one_line(err)
    assert "an entry's dataset is its 'dataset:' key" in one_line(err)
    with pytest.raises(ConfigError, match=r"entry 1 \(digits\): overrides set dataset.name=x"):
        parse_tier({**BASE, "benchmarks": [{"dataset": "digits", "overrides": ["dataset.name=x"]}]}, "t")


@pytest.mark.parametrize("where", ["overrides", "score_overrides"])
def test_tier_overrides_cannot_set_the_encoder_or_the_seed(where):
    """A tier-level `encoder:` was silently replaced by gate-tier's encoder=..., and `seed:` by the tier's seeds."""
    with pytest.raises(ConfigError) as err:
        parse_tier({**BASE, where: {"encoder": "resnet18_scratch", "+seed": 5}, "benchmarks": ["digits"]}, "t")
    text = one_line(err)
    assert f"tier {where} set encoder=resnet18_scratch" in text and "encoder=a,b" in text
    assert f"tier {where} set seed=5" in text and "the tier's seeds: [...]" in text


def test_command_line_overrides_cannot_set_the_seed_or_the_encoder():
    """gate-tier/gate-rank `overrides=[seed=5]` was dropped: the experiment ran with seed 0."""
    with pytest.raises(ConfigError) as err:
        plan({"benchmarks": ["digits"]}, overrides=["seed=5", "encoder.name=mine"])
    text = one_line(err)
    assert "overrides=[seed=5] is invalid: seeds are set by the tier's seeds: [...] or seeds=[...]" in text
    assert "overrides=[encoder.name=mine] is invalid" in text and "encoder=a,b" in text


def test_a_preset_that_would_change_an_entrys_dataset_is_caught_after_composition(tmp_path):
    """Whatever sets it, the composed dataset must be the entry's (a config group the tier's overrides pull in)."""
    presets = tmp_path / "conf" / "preset"
    presets.mkdir(parents=True)
    (presets / "other_data.yaml").write_text("# @package _global_\ndataset:\n  name: not_digits\n")
    with pytest.raises(ConfigError, match=r"1 problem\(s\): efficientnet_lite0 × digits \(seed 0\): the overrides "
                                          r"compose dataset not_digits under the entry digits"):
        plan({"benchmarks": ["digits"], "overrides": {"preset": "other_data"}},
             searchpath=[f"file://{tmp_path / 'conf'}"])


def test_gate_rank_refuses_a_dataset_listed_under_two_protocols():
    """gate-rank keys its benchmarks by dataset: the second protocol silently replaced the first."""
    from gate.ranking.request import proxy_entries

    two = plan({"benchmarks": ["digits", {"dataset": "digits", "overrides": {"image_size": 48}}]})
    with pytest.raises(ConfigError, match=r"gate-rank ranks each benchmark once, and digits \(entries 1, 2\) is listed"):
        proxy_entries(two, 0)
