"""Checkpoint write time: gate's SafeCheckpointIO (torch.save into a file beside the target, renamed into place)
against Lightning's TorchCheckpointIO (serialise into memory, then copy the bytes out), on the checkpoint of a
model with its AdamW state. Prints the median of each and their ratio.

    python measurements/bench_checkpoint_write.py [--model resnet18] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torchvision
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from gate.engine.training.trainer import SafeCheckpointIO


def checkpoint_of(name: str) -> dict:
    model = getattr(torchvision.models, name)()
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(2, 3, 64, 64)).sum().backward()
    optimizer.step()  # the moments exist: a checkpoint holds weights and twice their size of optimizer state
    return {"state_dict": model.state_dict(), "optimizer_states": [optimizer.state_dict()]}


def median_seconds(io, checkpoint: dict, folder: Path, repeats: int) -> float:
    times = []
    for i in range(repeats):
        path = folder / f"{type(io).__name__}-{i}.ckpt"
        start = time.perf_counter()
        io.save_checkpoint(checkpoint, path)
        times.append(time.perf_counter() - start)
        path.unlink()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    checkpoint = checkpoint_of(args.model)
    with tempfile.TemporaryDirectory() as folder:
        size = Path(folder) / "size.ckpt"
        torch.save(checkpoint, size)
        mb = size.stat().st_size / 1e6
        lightning = median_seconds(TorchCheckpointIO(), checkpoint, Path(folder), args.repeats)
        gate = median_seconds(SafeCheckpointIO(), checkpoint, Path(folder), args.repeats)
    print(f"{args.model} checkpoint, {mb:.0f} MB, median of {args.repeats} writes:")
    print(f"  lightning TorchCheckpointIO  {lightning:.3f} s")
    print(f"  gate SafeCheckpointIO        {gate:.3f} s")
    print(f"  ratio gate / lightning       {gate / lightning:.2f}")


if __name__ == "__main__":
    main()
