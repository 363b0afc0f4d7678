"""Step timing facts read on the device's own timeline: a fake asynchronous device (work queued by the host runs
later, as on CUDA) gives the device's step time and data wait, where host clocks would time the queueing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from gate.engine.training.facts import CudaTimeline, HostTimeline, RunFacts, timeline_for
from gate.engine.training.hardware import HardwareMonitor


class FakeDevice:
    """A host clock and a device that runs queued work in order, each piece starting no earlier than it was
    queued and no earlier than the previous piece ended (a CUDA stream)."""

    def __init__(self) -> None:
        self.host = 0.0
        self.free = 0.0  # when the device finishes what is queued

    def host_work(self, seconds: float) -> None:
        self.host += seconds

    def queue(self, seconds: float) -> None:
        self.free = max(self.free, self.host) + seconds


class FakeTimeline:
    """CUDA events on the fake device: a mark completes when the device reaches it."""

    def __init__(self, device: FakeDevice) -> None:
        self.device, self.synchronised = device, 0

    def mark(self) -> float:
        self.device.queue(0.0)
        return self.device.free

    def seconds(self, start: float, end: float) -> float:
        return end - start

    def synchronize(self) -> None:
        self.synchronised += 1
        self.device.host = max(self.device.host, self.device.free)


def run(facts: RunFacts, device: FakeDevice, steps: int, fetch: float, queue: float = 0.002, compute: float = 0.05,
        batch: int = 64) -> None:
    module = SimpleNamespace(adapter=SimpleNamespace(batch_size=lambda b: batch), device=torch.device("cpu"))
    trainer = SimpleNamespace(global_step=0, loggers=[])
    for i in range(steps):
        device.host_work(fetch)  # the loader hands over the next batch (host time, overlapping the device)
        facts.on_train_batch_start(trainer, module, {}, i)
        device.host_work(queue)  # Python queues the step's kernels...
        device.queue(compute)  # ...which the device runs later
        facts.on_train_batch_end(trainer, module, None, {}, i)


def test_the_device_timeline_counts_queued_work_not_the_time_to_queue_it():
    device = FakeDevice()
    facts = RunFacts(count_flops=False, timeline=FakeTimeline(device))
    run(facts, device, steps=20, fetch=0.010)
    out = facts.facts(resumed=False)
    # 20 steps of 50 ms on the device (the first also waits the 2 ms its kernels take to queue on an idle device):
    # about 1280 samples/s, never the 32,000 that timing the 2 ms of queueing on the host would give
    assert out["train_step_seconds"] == pytest.approx(20 * 0.05 + 0.002, rel=1e-6)
    assert out["train_samples_per_second"] == pytest.approx(20 * 64 / (20 * 0.05 + 0.002), abs=0.01)  # rounded
    # fetching (10 ms) overlaps the device's 50 ms: the device never waits for data
    assert out["data_wait_fraction"] == pytest.approx(0.0, abs=1e-9)


def test_a_slow_loader_shows_as_the_devices_wait_for_data():
    device = FakeDevice()
    timeline = FakeTimeline(device)
    facts = RunFacts(count_flops=False, timeline=timeline)
    run(facts, device, steps=11, fetch=0.080)
    facts.on_validation_start(None, None)  # validation between steps is no wait for data
    device.host_work(5.0)
    run(facts, device, steps=10, fetch=0.080)
    out = facts.facts(resumed=False)
    # the device is idle when each step starts: a step is its 2 ms of queueing and 50 ms of work, and the device
    # then waits fetch + queue - step = 30 ms for the next batch
    step, per_wait = 0.002 + 0.05, 0.080 + 0.002 - (0.002 + 0.05)
    assert out["train_step_seconds"] == pytest.approx(21 * step, rel=1e-6)
    assert facts.wait_seconds == pytest.approx(19 * per_wait, rel=1e-6)  # none before the first, none across validation
    assert facts.data_wait_fraction == pytest.approx(19 * per_wait / (19 * per_wait + 21 * step), rel=1e-6)
    assert timeline.synchronised >= 2  # read (and synchronised) at validation and for the facts only


def test_the_hardware_monitor_reads_the_same_timeline_when_it_logs():
    device = FakeDevice()
    logged = []
    monitor = HardwareMonitor(every_n_steps=5, count_flops=False, timeline=FakeTimeline(device))
    module = SimpleNamespace(adapter=SimpleNamespace(batch_size=lambda b: 64), device=torch.device("cpu"))
    logger = SimpleNamespace(log_metrics=lambda metrics, step: logged.append((step, metrics)))
    for i in range(10):
        device.host_work(0.01)
        monitor.on_train_batch_start(SimpleNamespace(global_step=i, loggers=[logger]), module, {}, i)
        device.host_work(0.002)
        device.queue(0.05)
        monitor.on_train_batch_end(SimpleNamespace(global_step=i + 1, loggers=[logger]), module, None, {}, i)
    assert [step for step, _ in logged] == [5, 10]
    assert logged[0][1]["hw/step_seconds"] == pytest.approx((5 * 0.05 + 0.002) / 5, rel=1e-6)
    # the synchronisation at the first log idles the device once: the next window's first step waits its queueing too
    assert logged[1][1]["hw/samples_per_second"] == pytest.approx(5 * 64 / (5 * 0.05 + 0.002), rel=1e-6)


def test_the_timeline_follows_the_device():
    assert isinstance(timeline_for(torch.device("cpu")), HostTimeline)
    assert isinstance(timeline_for(torch.device("cuda", 0)), CudaTimeline)  # built without touching CUDA
