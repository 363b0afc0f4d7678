"""Task visualisations at every validation: what the model predicts on a few validation examples.

Renderers (:data:`RENDERERS`, by renderer name) draw the first validation batch's first examples into a
matplotlib :class:`~matplotlib.figure.Figure` (no pyplot state, no backend switch). Each task family names its
renderer in its registry entry (:attr:`gate.families.TaskFamily.renderer`; None: no figure):

* ``class_grid`` (classification): an image grid titled predicted / true class (green when right, red when wrong);
* ``episode_grid`` (few-shot): the episode's query images with predicted / true class;
* ``multilabel_grid``: images with the top predicted classes (probability) and the true ones;
* ``mask_triptych`` (segmentation): image, true mask and predicted mask side by side (ignored pixels in black);
* ``retrieval`` (zero-shot): each image with its top retrieved captions among its candidates (the right ones marked);
* ``question_answer`` (relational): image, question, predicted and true answer;
* ``clip_label`` / ``clip_value`` (video): a clip's frames with predicted / true label or value.

The predictions are the validation step's own (a forward hook on the model for the first batch): no extra
forward, nothing that could change a recorded number. With a W&B logger the figure is logged as a
``wandb.Image`` (key ``media/val_<task>``); otherwise (``logger=csv`` or no logger) it is saved as
``<run dir>/media/<step>/val_<task>.png``. Inputs are shown un-normalised with the encoder's mean and std.

Add a renderer with ``@renderer("my_figure")`` on a function ``(VisualBatch) -> Figure`` and name it in the
family's entry (``renderer="my_figure"``).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from matplotlib.figure import Figure

from ...registry import Registry

RIGHT, WRONG = "#1a7f37", "#cf222e"
#: Input modalities the renderers can draw (a video clip is drawn frame by frame).
DRAWN_MODALITIES = ("image", "video")


@dataclasses.dataclass
class VisualBatch:
    """What a renderer draws from: a validation batch (on the CPU) and the model's predictions for it.

    spec: the dataset's task spec (class names, options) or None.
    denormalise: (..., C, H, W) model inputs -> images in [0, 1].
    raw: the raw values of a dataset column for the batch's first examples (captions, questions), or None
        where the batch's examples cannot be traced to rows.
    """

    batch: Mapping[str, Any]
    predictions: torch.Tensor
    spec: Any = None
    max_examples: int = 8
    denormalise: Callable[[torch.Tensor], torch.Tensor] | None = None
    raw: Callable[[str, int], list | None] | None = None

    def images(self, key: str = "image") -> torch.Tensor:
        """The batch's ``key`` input as displayable (..., H, W, C) float images in [0, 1]."""
        x = self.batch[key].detach().float().cpu()
        x = self.denormalise(x) if self.denormalise is not None else min_max(x)
        return x.clamp(0, 1).movedim(-3, -1)

    def class_name(self, index: int) -> str:
        names = getattr(self.spec, "class_names", ()) or ()
        return str(names[index]) if 0 <= index < len(names) else str(index)

    def column(self, kind: str, default: str) -> str:
        try:
            return self.spec.column(kind)
        except (ValueError, AttributeError):
            return default


RENDERERS: Registry[Callable[[VisualBatch], Figure]] = Registry("renderer")


def renderer(*names: str):
    """Register a renderer under ``names`` (a task family names the one it uses: ``TaskFamily.renderer``)."""
    def register(fn: Callable[[VisualBatch], Figure]) -> Callable[[VisualBatch], Figure]:
        for name in names:
            RENDERERS.register(name, fn)
        return fn

    return register


def renderer_of(task: str) -> Callable[[VisualBatch], Figure] | None:
    """The renderer task family ``task`` names, or None when it names none; a ValueError when it names one that
    is not registered (a typo must not silently drop every figure)."""
    from ...families import family

    name = family(task).renderer
    if name is None:
        return None
    if name not in RENDERERS:
        raise ValueError(f"task family {task!r} names renderer {name!r}, which is not registered; known: "
                         f"{list(RENDERERS.names())}")
    return RENDERERS[name]


def render(task: str, visual: VisualBatch) -> Figure:
    """The validation figure of task family ``task``."""
    draw = renderer_of(task)
    if draw is None:
        raise ValueError(f"task family {task!r} has no visualisation (its renderer is None)")
    return draw(visual)


# ------------------------------------------------------------------------------------------- helpers
def min_max(x: torch.Tensor) -> torch.Tensor:
    """Each image (last three dims) rescaled to [0, 1] (when its normalisation is unknown)."""
    flat = x.flatten(-3)
    low, high = flat.min(-1).values[..., None, None, None], flat.max(-1).values[..., None, None, None]
    return (x - low) / (high - low).clamp_min(1e-8)


def denormaliser(mean: Sequence[float], std: Sequence[float]) -> Callable[[torch.Tensor], torch.Tensor]:
    m = torch.as_tensor(list(mean), dtype=torch.float32)[:, None, None]
    s = torch.as_tensor(list(std), dtype=torch.float32)[:, None, None]
    return lambda x: x * s + m


def encoder_normalisation(encoder) -> tuple[list[float], list[float]] | None:
    """The (mean, std) an image encoder normalises its inputs with: its ``mean``/``std`` attributes, else read
    off its image transform (a black and a white image through it). None when it cannot be told."""
    mean, std = getattr(encoder, "mean", None), getattr(encoder, "std", None)
    if mean is not None and std is not None:
        return [float(v) for v in mean], [float(v) for v in std]
    try:
        transform = encoder.transform("image", train=False)
        if getattr(transform, "mean", None) is not None and getattr(transform, "std", None) is not None:
            return [float(v) for v in transform.mean], [float(v) for v in transform.std]
        black = transform(np.zeros((8, 8, 3), dtype=np.uint8))["image"].float()
        white = transform(np.full((8, 8, 3), 255, dtype=np.uint8))["image"].float()
        b, w = black[:, 0, 0], white[:, 0, 0]
        if black.ndim != 3 or bool(((w - b).abs() < 1e-6).any()):
            return None
        s = 1.0 / (w - b)
        return (-b * s).tolist(), s.tolist()
    except (ValueError, TypeError, RuntimeError, KeyError, AttributeError):  # no image transform to read
        return None


def _grid(n: int, cols: int, size: float = 1.8, extra_height: float = 0.5) -> tuple[Figure, np.ndarray]:
    cols = max(1, min(cols, n))
    rows = max(1, math.ceil(n / cols))
    fig = Figure(figsize=(size * cols, (size + extra_height) * rows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    for ax in axes:
        ax.set_axis_off()
    return fig, axes


def _show(ax, image: torch.Tensor) -> None:
    image = image.numpy()
    ax.imshow(image[..., 0] if image.shape[-1] == 1 else image, cmap="gray" if image.shape[-1] == 1 else None)


def _labelled_grid(images: torch.Tensor, predicted: Sequence[str], true: Sequence[str], ok: Sequence[bool],
                   title: str) -> Figure:
    fig, axes = _grid(len(images), cols=4)
    for ax, image, p, t, right in zip(axes, images, predicted, true, ok):
        _show(ax, image)
        ax.set_title(f"pred: {p}\ntrue: {t}", fontsize=7, color=RIGHT if right else WRONG)
    fig.suptitle(title, fontsize=9)
    return fig


def _wrap(text: str, width: int = 28) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(str(text), width)) or "(empty)"


# ------------------------------------------------------------------------------------------ renderers
@renderer("class_grid")
def classification(v: VisualBatch) -> Figure:
    n = min(v.max_examples, len(v.predictions))
    # Several heads (spec.heads): the primary head's logits come first and its labels sit under its column.
    classes = int(getattr(v.spec, "num_classes", 0) or v.predictions.shape[-1])
    predicted = v.predictions[:n, :classes].argmax(-1).tolist()
    true = (v.batch["label"] if "label" in v.batch else v.batch[v.spec.label_column])[:n].tolist()
    return _labelled_grid(v.images()[:n], [v.class_name(p) for p in predicted], [v.class_name(t) for t in true],
                          [p == t for p, t in zip(predicted, true)], "classification: predicted vs true")


@renderer("episode_grid")
def few_shot(v: VisualBatch) -> Figure:
    n_support = len(v.batch["support_label"])
    classes = v.batch["classes"].tolist()
    n = min(v.max_examples, len(v.predictions))
    predicted = v.predictions[:n].argmax(-1).tolist()
    true = v.batch["query_label"][:n].tolist()

    def name(i: int) -> str:  # episode class i -> its dataset class name
        return v.class_name(classes[i]) if 0 <= i < len(classes) else str(i)

    images = v.images()[n_support:n_support + n]
    return _labelled_grid(images, [name(p) for p in predicted], [name(t) for t in true],
                          [p == t for p, t in zip(predicted, true)],
                          f"few-shot episode: {len(classes)} ways, {n_support} support images; queries")


@renderer("multilabel_grid")
def multilabel(v: VisualBatch) -> Figure:
    n = min(v.max_examples, len(v.predictions))
    probs = v.predictions[:n].float().sigmoid()
    target = v.batch[v.column("multi_hot", "labels")][:n]
    fig, axes = _grid(n, cols=4, extra_height=0.9)
    for ax, image, p, t in zip(axes, v.images()[:n], probs, target):
        _show(ax, image)
        top = p.topk(min(3, len(p)))
        predicted = ", ".join(f"{v.class_name(int(i))} {float(s):.2f}" for s, i in zip(top.values, top.indices))
        true = ", ".join(v.class_name(int(i)) for i in torch.nonzero(t > 0.5).flatten()) or "none"
        hits = {int(i) for i, s in zip(top.indices, top.values) if s >= 0.5}
        right = hits == {int(i) for i in torch.nonzero(t > 0.5).flatten()}
        ax.set_title(f"pred: {_wrap(predicted, 30)}\ntrue: {_wrap(true, 30)}", fontsize=6,
                     color=RIGHT if right else WRONG)
    fig.suptitle("multi-label: top predicted (probability) vs true", fontsize=9)
    return fig


def _mask_image(mask: torch.Tensor, num_classes: int, ignore_index: int | None) -> np.ndarray:
    from matplotlib import colormaps

    cmap = colormaps["tab20"].resampled(max(num_classes, 2))
    m = mask.long().numpy()
    rgb = cmap(np.clip(m, 0, max(num_classes - 1, 0)) % cmap.N)[..., :3]
    if ignore_index is not None:
        rgb[m == ignore_index] = 0.0
    return rgb


@renderer("mask_triptych")
def segmentation(v: VisualBatch) -> Figure:
    n = min(v.max_examples, len(v.predictions), 4)
    num_classes = int(getattr(v.spec, "num_classes", 0) or v.predictions.shape[1])
    ignore = getattr(v.spec, "ignore_index", None)
    predicted = v.predictions[:n].argmax(1)
    true = v.batch["mask"][:n]
    images = v.images()[:n]
    fig = Figure(figsize=(5.4, 1.9 * n), layout="constrained")
    axes = fig.subplots(n, 3, squeeze=False)
    for row in range(n):
        valid = true[row] != ignore if ignore is not None else torch.ones_like(true[row], dtype=torch.bool)
        acc = float((predicted[row] == true[row])[valid].float().mean()) if bool(valid.any()) else float("nan")
        for ax, picture, title in zip(axes[row], (images[row].numpy(), _mask_image(true[row], num_classes, ignore),
                                                 _mask_image(predicted[row], num_classes, ignore)),
                                      ("input", "true mask", f"predicted (pixel acc {acc:.2f})")):
            ax.imshow(picture[..., 0] if picture.shape[-1] == 1 else picture, interpolation="nearest")
            ax.set_title(title, fontsize=7)
            ax.set_axis_off()
    fig.suptitle("segmentation: true vs predicted masks", fontsize=9)
    return fig


@renderer("retrieval")
def zero_shot(v: VisualBatch) -> Figure:
    """Each shown image with its top 3 captions among its own candidates (the retrieval adapter's candidate group),
    marked right by the adapter's target: a caption is right when the match matrix says so, i.e. the row's own
    caption, the same caption text, or a caption of the same image (an ``image_group``, e.g. an NYCC cartoon)."""
    from ...adapters.contrastive import retrieval_target
    from ...adapters.retrieval import candidates as candidate_mask

    logits = v.predictions.float()  # (B images, B captions)
    target = retrieval_target(v.batch)
    match, allowed = target["match"].cpu(), candidate_mask(target).cpu()
    shown = [int(i) for i in target["queries"].cpu()][: v.max_examples]  # rows ranked as queries (no repeats)
    rows = v.batch.get("row")  # the split row of each batch position (a row repeated as a candidate is shown once)
    rows = [int(r) for r in rows] if rows is not None else list(range(logits.shape[1]))
    raw = v.raw(v.column("caption", "caption"), max(rows) + 1) if v.raw is not None else None

    def caption(j: int) -> str:
        return str(raw[rows[j]]) if raw is not None and rows[j] < len(raw) else f"caption #{rows[j]}"

    fig, axes = _grid(len(shown), cols=4, size=2.2, extra_height=1.3)
    images = v.images()
    for ax, i in zip(axes, shown):
        _show(ax, images[i])
        scores = logits[i].masked_fill(~allowed[i], float("-inf"))
        top = scores.topk(min(3, int(allowed[i].sum()))).indices.tolist()
        right = [bool(match[i, j]) for j in top]
        lines = [f"{'✓' if r else '✗'} {_wrap(caption(j), 30)}" for j, r in zip(top, right)]
        ax.set_title("\n".join(lines), fontsize=6, color=RIGHT if right[0] else WRONG)
    counts = sorted({int(allowed[i].sum()) for i in shown})
    fig.suptitle(f"image-to-text retrieval among each image's {'/'.join(map(str, counts))} candidate captions: top 3",
                 fontsize=9)
    return fig


def _answer_names(spec) -> list[tuple[str, list[str]]]:
    declared = dict(getattr(spec, "options", {}).get("answer_types", {}) or {})
    out = []
    for kind, answers in declared.items():
        names = ([str(a) for a in answers] if isinstance(answers, Sequence) and not isinstance(answers, str)
            else [str(i) for i in range(int(answers))])
        out.append((str(kind), names))
    return out


@renderer("question_answer")
def relational(v: VisualBatch) -> Figure:
    types = _answer_names(v.spec)
    counts = [len(names) for _, names in types]
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int) if counts else np.zeros(0, int)
    n = min(v.max_examples, len(v.predictions))
    column = str(getattr(v.spec, "options", {}).get("question_column", "question"))
    questions = (v.raw(column, n) if v.raw is not None else None) or ["(question)"] * n
    fig, axes = _grid(n, cols=4, size=2.2, extra_height=1.0)
    for i, ax in enumerate(axes[:n]):
        _show(ax, v.images()[i])
        kind, answer = int(v.batch["answer_type"][i]), int(v.batch["answer"][i])
        if 0 <= kind < len(types):
            name, answers = types[kind]
            own = v.predictions[i, offsets[kind]:offsets[kind] + counts[kind]]
            predicted = int(own.argmax())
            text = f"pred: {answers[predicted]}  true: {answers[answer] if answer < len(answers) else answer}"
        else:
            name, predicted, text = str(kind), -1, f"true: {answer}"
        ax.set_title(f"{_wrap(questions[i], 32)}\n[{name}] {text}", fontsize=6,
                     color=RIGHT if predicted == answer else WRONG)
    fig.suptitle("relational: question, predicted and true answer", fontsize=9)
    return fig


def _frames(v: VisualBatch, n: int, label: Callable[[int], tuple[str, bool]], title: str) -> Figure:
    video = v.images("video")  # (B, T, H, W, C)
    frames = min(video.shape[1], 8)
    pick = np.linspace(0, video.shape[1] - 1, frames).round().astype(int)
    fig = Figure(figsize=(1.3 * frames, 1.6 * n), layout="constrained")
    axes = fig.subplots(n, frames, squeeze=False)
    for row in range(n):
        text, right = label(row)
        for col, t in enumerate(pick):
            ax = axes[row, col]
            _show(ax, video[row, t])
            ax.set_axis_off()
            ax.set_title(f"t={t}", fontsize=6)
        axes[row, 0].set_title(f"{text}   t={pick[0]}", fontsize=7, color=RIGHT if right else WRONG, loc="left")
    fig.suptitle(title, fontsize=9)
    return fig


def _clip_targets(v: VisualBatch, kind: str, default: str) -> torch.Tensor:
    return v.batch[v.column(kind, default)]


@renderer("clip_label")
def temporal_classification(v: VisualBatch) -> Figure:
    n = min(v.max_examples, len(v.predictions), 4)
    predicted = v.predictions[:n].argmax(-1).tolist()
    true = _clip_targets(v, "clip_label", "label")[:n].tolist()
    return _frames(v, n, lambda i: (f"pred: {v.class_name(predicted[i])}  true: {v.class_name(int(true[i]))}",
                                    predicted[i] == int(true[i])), "video: frames, predicted vs true class")


@renderer("clip_value")
def temporal_regression(v: VisualBatch) -> Figure:
    n = min(v.max_examples, len(v.predictions), 4)
    predicted = v.predictions[:n].float().reshape(n, -1)[:, 0].tolist()
    true = _clip_targets(v, "clip_value", "value")[:n].float().reshape(n, -1)[:, 0].tolist()
    scale = max(float(np.std(true)) if len(true) > 1 else 0.0, 1e-8)
    return _frames(v, n, lambda i: (f"pred: {predicted[i]:.3g}  true: {true[i]:.3g}",
                                    abs(predicted[i] - true[i]) <= scale), "video: frames, predicted vs true value")


# ------------------------------------------------------------------------------------------- callback
def figure_array(fig: Figure) -> np.ndarray:
    """The figure rendered as an (H, W, 3) uint8 array (Agg canvas; no pyplot, no backend switch)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def save_png(fig: Figure, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig).print_png(str(path))
    return path


def _sequential_rows(adapter) -> bool:
    """Whether the adapter serves evaluation splits as plain, unshuffled batches (row i of the split is
    example i of the first batch), so raw columns can be read for the shown examples."""
    from ...adapters.base import Adapter

    return type(adapter).dataloader is Adapter.dataloader or bool(getattr(adapter, "eval_rows_in_order", False))


class VisualLogger(L.Callback):
    """Renders the first validation batch every ``every_n_validations`` validations (see the module doc)."""

    def __init__(self, max_examples: int = 8, every_n_validations: int = 1) -> None:
        if int(max_examples) < 1:
            raise ValueError(f"callbacks.visuals.max_examples must be >= 1, got {max_examples}")
        if int(every_n_validations) < 1:
            raise ValueError(f"callbacks.visuals.every_n_validations must be >= 1, got {every_n_validations}")
        self.max_examples = int(max_examples)
        self.every_n_validations = int(every_n_validations)
        self.validations = 0
        self.saved: list[Path] = []
        self._handle = None
        self._captured: torch.Tensor | None = None
        self._denormalise = None
        self._warned = False

    def on_fit_start(self, trainer, pl_module) -> None:
        norm = encoder_normalisation(pl_module.encoder)
        self._denormalise = denormaliser(*norm) if norm is not None else None

    def on_validation_start(self, trainer, pl_module) -> None:
        self.validations += 1

    def _wanted(self, trainer, batch_idx: int, dataloader_idx: int) -> bool:
        return (batch_idx == 0 and dataloader_idx == 0 and not trainer.sanity_checking
                and (self.validations - 1) % self.every_n_validations == 0)

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
        if not self._wanted(trainer, batch_idx, dataloader_idx):
            return

        def capture(module, args, output):
            if self._captured is None and isinstance(output, torch.Tensor):
                self._captured = output.detach().float().cpu()

        self._captured = None
        self._handle = pl_module.register_forward_hook(capture)

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        if self._handle is None:
            return
        self._handle.remove()
        self._handle = None
        predictions, self._captured = self._captured, None
        if predictions is None:
            return
        try:
            self._log(trainer, pl_module, batch, predictions)
        except (ValueError, TypeError, RuntimeError, KeyError, IndexError, AttributeError, OSError) as err:
            # a drawing problem must not end a run; say so once
            if not self._warned:
                self._warned = True
                warnings.warn(f"visualisation skipped: {type(err).__name__}: {err}", stacklevel=2)

    def _log(self, trainer, pl_module, batch, predictions: torch.Tensor) -> None:
        """Draw the family's figure for the first validation batch of a dataset whose inputs are pictures."""
        from ...adapters.base import to_cpu

        datamodule = getattr(trainer, "datamodule", None)
        spec = getattr(datamodule, "spec", None)
        task = getattr(spec, "task", None)
        if task is None or renderer_of(task) is None:
            return
        if getattr(spec, "modality", "image") not in DRAWN_MODALITIES:
            return  # text or audio inputs: the renderers draw pictures (a stem's input is not one)
        raw = None
        if datamodule is not None and _sequential_rows(pl_module.adapter) and "val" in getattr(datamodule, "splits", {}):
            split = datamodule.splits["val"]

            def raw(column: str, n: int) -> list | None:
                if column not in split.column_names:
                    return None
                return list(split.select(range(min(n, len(split))))[column])

        visual = VisualBatch(batch=to_cpu(batch), predictions=predictions, spec=spec, max_examples=self.max_examples,
                             denormalise=self._denormalise, raw=raw)
        fig = render(task, visual)
        step, name = int(trainer.global_step), f"val_{task}"
        wandb = [lg for lg in trainer.loggers if type(lg).__name__ == "WandbLogger"]
        for logger in wandb:
            logger.log_image(key=f"media/{name}", images=[figure_array(fig)], step=step)
        if not wandb or len(wandb) < len(trainer.loggers):  # csv (or no logger): PNG files under the run dir
            self.saved.append(save_png(fig, Path(trainer.default_root_dir) / "media" / str(step) / f"{name}.png"))
