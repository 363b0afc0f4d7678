"""Logging callbacks and model metadata, unit by unit: exact parameter and FLOP counts, depth groups and their
gradient norms, the data-wait fraction, the hardware info line, every task renderer, config checks."""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from torch import nn

from gate.data.spec import DatasetSpec
from gate.encoders.base import image_transform
from gate.engine.training import facts as facts_module
from gate.engine.training.facts import RunFacts, count_parameters, forward_flops, model_gflops
from gate.engine.training.gradnorms import GradNormLogger, depth_groups
from gate.engine.training.hardware import HardwareMonitor, NvmlMeter
from gate.engine.training.visuals import RENDERERS, VisualBatch, denormaliser, encoder_normalisation, figure_array, render
from gate.families import families, family_names


# ------------------------------------------------------------------------------------- model metadata
def test_linear_params_and_flops_are_exact():
    layer = nn.Linear(10, 5)
    assert count_parameters(layer) == (55, 55)
    assert forward_flops(lambda: layer(torch.zeros(1, 10))) == 2 * 10 * 5
    layer.bias.requires_grad_(False)
    assert count_parameters(layer) == (55, 50)


def test_shared_parameters_count_once():
    layer = nn.Linear(4, 4)
    assert count_parameters(nn.Sequential(layer, layer)) == (20, 20)


class Tiny(nn.Module):
    """A GATEModel-like module: ``forward(batch)``, an ``adapter`` with ``batch_size``."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Dropout(0.5), nn.Linear(10, 5))
        self.adapter = types.SimpleNamespace(batch_size=lambda batch: len(batch["label"]))

    def forward(self, batch):
        return self.encoder(batch["image"])


def test_model_gflops_is_per_input_example_and_restores_modes():
    model = Tiny()
    model.train()
    model.encoder[1].eval()  # a submodule deliberately in eval mode stays so
    gflops = model_gflops(model, {"image": torch.ones(4, 10), "label": torch.zeros(4)})
    assert gflops == pytest.approx(2 * 10 * 5 / 1e9, rel=0, abs=1e-15)
    assert model.training and model.encoder[0].training and not model.encoder[1].training


def test_a_runs_cost_counts_from_the_start_it_is_given():
    """gate-run builds its data before it imports the training stack, then hands the facts the start it took before
    the data: the run's CPU time counts its data as it did when the facts were made first."""
    import time

    from gate.engine.training.usage import cpu_seconds

    earlier = (cpu_seconds() - 5.0, time.monotonic() - 5.0)
    assert RunFacts(count_flops=False, since=earlier).facts(resumed=False)["cpu_seconds"] >= 5.0
    assert RunFacts(count_flops=False).facts(resumed=False)["cpu_seconds"] < 5.0


def test_facts_carry_model_metadata_and_cost_keys():
    run = RunFacts()
    run.on_fit_start(None, nn.Linear(10, 5))
    out = run.facts(resumed=False, wall_seconds=7200.0, gpus=2)
    assert out["params"] == 55 and out["trainable_params"] == 55
    assert out["gpu_hours"] == 4.0 and out["energy_kwh"] is None and out["gflops"] is None
    assert out["cpu_seconds"] >= 0 and out["data_wait_fraction"] is None
    assert RunFacts().facts(resumed=False, wall_seconds=3600.0, gpus=0)["gpu_hours"] == 0.0
    assert out["weights_revision"] is None  # a module without an encoder (no hub weights)
    with_encoder = nn.Module()
    with_encoder.encoder = nn.Linear(2, 2)
    with_encoder.encoder.weights_revision = "0123abcd" * 5
    run.on_fit_start(None, with_encoder)
    assert run.facts(resumed=False)["weights_revision"] == "0123abcd" * 5


def test_data_wait_fraction_counts_gaps_between_steps_but_not_validation(monkeypatch):
    clock = iter([0.0, 3.0,          # step 1: 3 s
                  4.0, 7.0,          # 1 s wait, step 2: 3 s
                  # validation in between (its start is timed): the next gap is not a wait for data
                  8.0,
                  20.0, 23.0,        # step 3: 3 s
                  25.0, 28.0])       # 2 s wait, step 4: 3 s
    monkeypatch.setattr(facts_module.time, "perf_counter", lambda: next(clock))
    run = RunFacts(count_flops=False)
    module = types.SimpleNamespace(adapter=types.SimpleNamespace(batch_size=lambda batch: 8))
    for step in range(4):
        if step == 2:
            run.on_validation_start(None, module)
        run.on_train_batch_start(None, module, {}, step)
        run.on_train_batch_end(None, module, None, {}, step)
    run.fold()  # marks become seconds where they are read (on a GPU, after a synchronisation)
    assert run.step_seconds == 12.0 and run.wait_seconds == 3.0
    out = run.facts(resumed=False)
    assert out["data_wait_fraction"] == pytest.approx(3 / 15)
    assert out["train_samples"] == 32 and out["train_samples_per_second"] == pytest.approx(32 / 12, abs=0.01)


# ------------------------------------------------------------------------------------------ hardware
def test_hardware_without_gpu_says_so_once(capsys):
    monitor = HardwareMonitor(every_n_steps=2, count_flops=False)
    trainer = types.SimpleNamespace(global_step=0)
    module = types.SimpleNamespace(device=torch.device("cpu"))
    monitor.on_train_start(trainer, module)
    monitor.on_train_start(trainer, module)  # a second fit (resume) says nothing new
    lines = [line for line in capsys.readouterr().out.splitlines() if "hardware" in line]
    assert lines == ["[gate] hardware: no GPU in use: GPU utilisation, power and energy are not logged "
                     "(energy_kwh is null)"]
    assert monitor.meter is None and monitor.facts(resumed=False)["energy_kwh"] is None


def test_nvml_meter_integrates_power_without_an_energy_counter(monkeypatch):
    class FakeNvml:
        class NVMLError(Exception):
            pass

        def nvmlDeviceGetTotalEnergyConsumption(self, handle):
            raise self.NVMLError("not supported")

        def nvmlDeviceGetPowerUsage(self, handle):
            return 100_000  # mW

    clock = iter([0.0, 36.0])
    monkeypatch.setattr("gate.engine.training.hardware.time.perf_counter", lambda: next(clock))
    meter = NvmlMeter(FakeNvml(), handle=None)
    meter.start()
    assert meter.energy_kwh() == pytest.approx(100 * 36 / 3.6e6)  # 100 W for 36 s = 1 Wh


def test_callback_arguments_are_checked():
    with pytest.raises(ValueError, match="every_n_steps must be >= 1, got 0"):
        HardwareMonitor(every_n_steps=0)
    with pytest.raises(ValueError, match="depth_groups must be >= 1, got 0"):
        GradNormLogger(depth_groups=0)


# ----------------------------------------------------------------------------------------- grad norms
class Encoder(nn.Module):
    def __init__(self, blocks: int = 8) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3)
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(blocks))
        self.norm = nn.LayerNorm(4)


class Model(nn.Module):
    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.adapter = nn.Linear(4, 2)


def test_depth_groups_bucket_the_block_stack():
    model = Model(Encoder(blocks=8))
    groups = depth_groups(model, 4)
    assert list(groups) == ["encoder/stem", "encoder/depth1", "encoder/depth2", "encoder/depth3", "encoder/depth4",
                            "encoder/top", "adapter"]
    assert groups["encoder/depth1"] == [*model.encoder.blocks[0].parameters(), *model.encoder.blocks[1].parameters()]
    assert groups["encoder/stem"] == list(model.encoder.stem.parameters())
    assert groups["encoder/top"] == list(model.encoder.norm.parameters())
    model.encoder.requires_grad_(False)  # a frozen encoder has no groups of its own
    assert list(depth_groups(model, 4)) == ["adapter"]


def test_depth_groups_of_a_text_model_put_its_embeddings_in_the_stem():
    from transformers import BertConfig, BertModel

    bert = BertModel(BertConfig(vocab_size=5000, hidden_size=8, num_hidden_layers=4, num_attention_heads=2,
                                intermediate_size=16))  # random init, nothing downloaded
    groups = depth_groups(Model(bert), 4)  # the embedding table holds most elements, not most layers
    assert groups["encoder/stem"] == list(bert.embeddings.parameters())
    assert groups["encoder/depth4"] == list(bert.encoder.layer[3].parameters())
    assert groups["encoder/top"] == list(bert.pooler.parameters())


def test_depth_groups_without_a_block_stack_follow_parameter_order():
    encoder = nn.Module()
    encoder.a, encoder.b, encoder.c = nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 2)
    groups = depth_groups(Model(encoder), 3)
    assert groups["encoder/depth1"] == list(encoder.a.parameters())
    assert groups["encoder/depth3"] == list(encoder.c.parameters())


class Recorder:
    def __init__(self) -> None:
        self.logged: list[tuple[int, dict]] = []

    def log_metrics(self, metrics, step):
        self.logged.append((step, dict(metrics)))


def test_grad_norms_are_group_norms_every_n_steps():
    model = Model(Encoder(blocks=4))
    x = torch.randn(2, 3, 5, 5)
    features = model.encoder.stem(x).mean(dim=(2, 3))
    for block in model.encoder.blocks:
        features = block(features).relu()
    model.adapter(model.encoder.norm(features)).pow(2).sum().backward()
    recorder = Recorder()
    callback = GradNormLogger(every_n_steps=2, depth_groups=2)
    callback.on_fit_start(None, model)
    for step in range(5):
        callback.on_before_optimizer_step(types.SimpleNamespace(global_step=step, loggers=[recorder]), model, None)
    assert [step for step, _ in recorder.logged] == [0, 2, 4]
    metrics = recorder.logged[0][1]
    expected = torch.cat([p.grad.flatten() for p in model.encoder.blocks[2:].parameters()]).norm()
    assert metrics["grad_norm/encoder/depth2"] == pytest.approx(float(expected), rel=1e-5)
    everything = torch.cat([p.grad.flatten() for p in model.parameters()]).norm()
    assert metrics["grad_norm/total"] == pytest.approx(float(everything), rel=1e-5)
    assert set(metrics) == {"grad_norm/encoder/stem", "grad_norm/encoder/depth1", "grad_norm/encoder/depth2",
                            "grad_norm/encoder/top", "grad_norm/adapter", "grad_norm/total"}


# ------------------------------------------------------------------------------------------ visuals
def test_normalisation_is_read_off_the_image_transform():
    class Encoder:
        def transform(self, modality, train):
            return image_transform(8, (0.5, 0.4, 0.3), (0.2, 0.25, 0.5), train=False)

    mean, std = encoder_normalisation(Encoder())
    assert mean == pytest.approx([0.5, 0.4, 0.3], abs=1e-5) and std == pytest.approx([0.2, 0.25, 0.5], abs=1e-5)
    x = torch.rand(3, 4, 4)
    normalised = (x - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    assert torch.allclose(denormaliser(mean, std)(normalised), x, atol=1e-5)


def _spec(task: str, **kw) -> DatasetSpec:
    return DatasetSpec(name=f"hand_made_{task}", modality=kw.pop("modality", "image"), task=task,
                       num_classes=kw.pop("num_classes", 3), class_names=("cat", "dog", "owl"), **kw)


B, H = 4, 16


def _batches() -> dict[str, VisualBatch]:
    g = torch.Generator().manual_seed(0)
    image = torch.randn(B, 3, H, H, generator=g)
    labels = torch.tensor([0, 1, 2, 1])
    answer_types = {"count": ["1", "2", "3"], "exists": ["no", "yes"]}
    clips = torch.randn(2, 5, 3, H, H, generator=g)
    return {
        "classification": VisualBatch({"image": image, "label": labels}, torch.randn(B, 3, generator=g),
                                      _spec("classification")),
        "few_shot": VisualBatch({"image": torch.randn(6, 3, H, H, generator=g), "support_label": torch.tensor([0, 1]),
                                 "query_label": torch.tensor([0, 1, 1, 0]), "classes": torch.tensor([2, 0]),
                                 "num_ways": torch.tensor(2)}, torch.randn(4, 2, generator=g), _spec("few_shot")),
        "multilabel": VisualBatch({"image": image, "labels": torch.tensor([[1, 0, 1], [0, 1, 0], [0, 0, 0], [1, 1, 1.]])},
                                  torch.randn(B, 3, generator=g), _spec("multilabel", targets={"labels": "multi_hot"})),
        "segmentation": VisualBatch({"image": image, "mask": torch.randint(0, 3, (B, H, H), generator=g).index_fill_(
            1, torch.tensor([0]), 255)}, torch.randn(B, 3, H, H, generator=g), _spec("segmentation", ignore_index=255,
                                                                          targets={"mask": "mask"})),
        "zero_shot": VisualBatch({"image": image, "caption_id": torch.tensor([7, 8, 7, 9])},
                                 torch.randn(B, B, generator=g), _spec("zero_shot", targets={"caption": "caption"}),
                                 raw=lambda column, n: ["a cat", "a dog on the left of an owl", "a cat", "owl"][:n]),
        "relational": VisualBatch({"image": image, "answer": torch.tensor([2, 1, 0, 1]),
                                   "answer_type": torch.tensor([0, 1, 0, 1])}, torch.randn(B, 5, generator=g),
                                  _spec("relational", targets={"answer": "answer", "answer_type": "answer_type"},
                                        options={"answer_types": answer_types})),
        "temporal_classification": VisualBatch({"video": clips, "label": torch.tensor([0, 2])},
                                               torch.randn(2, 3, generator=g),
                                               _spec("temporal_classification", modality="video",
                                                     targets={"label": "clip_label"})),
        "temporal_regression": VisualBatch({"video": clips, "speed": torch.tensor([0.5, 1.5])},
                                           torch.randn(2, 1, generator=g),
                                           _spec("temporal_regression", modality="video", num_classes=1,
                                                 targets={"speed": "clip_value"})),
    }


TASKS = tuple(n for n in family_names() if families()[n].renderer)  # the packaged families with a figure


def test_every_task_family_has_a_renderer():
    named = {f.renderer for f in families().values()} - {None}  # None: a family without a figure
    assert named <= set(RENDERERS)  # each names a registered renderer
    assert set(_batches()) == set(TASKS)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_renderer_draws_a_hand_made_batch(task):
    fig = render(task, _batches()[task])
    assert isinstance(fig, Figure) and fig.axes
    pixels = figure_array(fig)
    assert pixels.ndim == 3 and pixels.shape[-1] == 3 and pixels.dtype == np.uint8
    assert pixels.std() > 0  # something was drawn


def test_unknown_task_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown task family 'nope'; known: \['classification'"):
        render("nope", _batches()["classification"])


# ------------------------------------------------------------------------------------------- config
def test_callbacks_are_run_only_and_checked(tmp_path):
    from gate.engine.validate import validate_run_config
    from gate.errors import ConfigError
    from gate.results import experiment_id

    from helpers import compose_run

    base = validate_run_config(compose_run(tmp_path))
    quiet = validate_run_config(compose_run(tmp_path, ["callbacks=none", "callbacks.hardware.every_n_steps=7"]))
    assert base["callbacks"]["grad_norms"]["every_n_steps"] == 100 and quiet["callbacks"]["visuals"]["enabled"] is False
    assert experiment_id(base, "finetune") == experiment_id(quiet, "finetune")
    with pytest.raises(ConfigError, match=r"callbacks.grad_norms.every_n_steps=0 is invalid: must be >= 1"):
        validate_run_config(compose_run(tmp_path, ["callbacks.grad_norms.every_n_steps=0"]))


def test_a_text_dataset_draws_nothing_and_warns_nothing():
    """The renderers draw pictures: a text classification run (BBC News through MiniLM) used to end each run with
    'visualisation skipped: KeyError: image'; now it is simply not drawn."""
    from types import SimpleNamespace

    from gate.data.spec import DatasetSpec
    from gate.engine.training.visuals import VisualLogger

    spec = DatasetSpec(name="bbc", modality="text", task="classification", num_classes=5)
    trainer = SimpleNamespace(datamodule=SimpleNamespace(spec=spec, splits={}), global_step=0)
    visuals = VisualLogger()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert visuals._log(trainer, SimpleNamespace(adapter=None), {"text": ["a"], "label": torch.tensor([0])},
                            torch.zeros(1, 5)) is None
    assert visuals.saved == []
