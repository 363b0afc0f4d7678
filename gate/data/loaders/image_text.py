"""Zero-shot image-text benchmarks: Flickr30K, the New Yorker Caption Contest and Winoground (hub parquet).
Each row is one (image, caption) pair. Where several rows belong together a group column keeps them on one side
of every split: Winoground's two pairs of an example (``id``), the rows of one NYCC cartoon (``contest_number``,
which also tells the retrieval adapter that those rows show the same image: target kind ``image_group``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...errors import GateError
from ..hub import load_parquet

if TYPE_CHECKING:
    import datasets


def flickr30k(data_dir: str | os.PathLike | None, source: Mapping[str, Any], name: str = "flickr30k",
              split_column: str = "split", cache_dir: str | None = None) -> datasets.DatasetDict:
    """``nlphuji/flickr30k`` (its parquet conversion: one ``test`` file set holding all 31,014 images, columns
    ``image``, ``caption`` (5 per image), ``sentids``, ``split``, ``img_id``, ``filename``). The ``split`` column
    carries Karpathy's published train / val / test assignment: those are the source's splits. The caption of a
    row is its first reference caption."""
    import datasets  # imported where used: reading a dataset config need not load it
    raw = load_parquet(name, source, data_dir, columns=["image", "caption", split_column], cache_dir=cache_dir,
                       image_columns=["image"])
    table = datasets.concatenate_datasets(list(raw.values()))
    assignment = table[split_column]
    names = sorted(set(assignment))
    if "train" not in names:
        raise GateError(f"dataset {name!r}: column {split_column!r} holds {names}, no 'train' rows")
    first = table.map(lambda b: {"caption": [c[0] if c else "" for c in b["caption"]]}, batched=True,
                      features=datasets.Features({**table.features, "caption": datasets.Value("string")}),
                      desc=f"{name}: first captions")
    return datasets.DatasetDict({s: first.select([i for i, a in enumerate(assignment) if a == s]) for s in names})


def nycc(data_dir: str | os.PathLike | None, source: Mapping[str, Any], name: str = "nycc",
         cache_dir: str | None = None, published_splits: bool = True) -> datasets.DatasetDict:
    """The New Yorker Caption Contest (``jmhessel/newyorker_caption_contest``, config ``matching``; columns from its
    dataset card: ``image``, ``contest_number``, ``caption_choices`` (five captions), ``label`` (the letter of the
    one written for this cartoon), ...). Each row becomes (cartoon, its true caption). A cartoon has several rows
    (several finalist captions), all with the same image: ``contest_number`` groups them.

    ``published_splits`` (default): train / validation / test as published (cross-validation split 0 of Hessel et
    al.), checked to keep every cartoon on one side; a copy whose splits share a cartoon is refused. False pools
    the three splits into one ``train`` pool, from which the split step carves val and test by cartoon
    (``splits.group_column: contest_number``)."""
    import datasets  # imported where used: reading a dataset config need not load it
    raw = load_parquet(name, source, data_dir, columns=["image", "caption_choices", "label", "contest_number"],
                       cache_dir=cache_dir, image_columns=["image"])

    def true_caption(batch):
        out = []
        for choices, letter in zip(batch["caption_choices"], batch["label"]):
            k = ord(str(letter).strip().upper()[:1] or "?") - ord("A")
            if not 0 <= k < len(choices):
                raise GateError(f"dataset {name!r}: label {letter!r} does not pick one of {len(choices)} caption choices")
            out.append(choices[k])
        return {"caption": out}

    out = datasets.DatasetDict({s: ds.map(true_caption, batched=True, desc=f"{name}: true captions")
                                for s, ds in raw.items()})
    if not published_splits:
        return datasets.DatasetDict({"train": datasets.concatenate_datasets([out[s] for s in sorted(out)])})
    seen: dict[int, str] = {}
    for split in sorted(out):
        for contest in sorted(set(out[split]["contest_number"])):
            if contest in seen:
                raise GateError(f"dataset {name!r}: cartoon contest_number={contest} is in both the {seen[contest]!r} "
                                f"and the {split!r} split of {data_dir}; a cartoon must stay on one side (set "
                                f"dataset.builder.published_splits=false to pool them and carve val/test by cartoon)")
            seen[contest] = split
    return out


def winoground(data_dir: str | os.PathLike | None, source: Mapping[str, Any], name: str = "winoground",
               cache_dir: str | None = None) -> datasets.DatasetDict:
    """``facebook/winoground`` (gated; 400 examples of two images and two captions, one ``test`` split). Each
    example becomes two (image, caption) rows, ``(image_0, caption_0)`` and ``(image_1, caption_1)``, grouped by
    the example ``id`` so that a split never separates them."""
    import datasets  # imported where used: reading a dataset config need not load it
    raw = load_parquet(name, source, data_dir, columns=["id", "image_0", "image_1", "caption_0", "caption_1"],
                       cache_dir=cache_dir, image_columns=["image_0", "image_1"])
    out = {}
    for split, ds in raw.items():
        ids, images, captions = [], [], []
        for k in (0, 1):
            part = ds.select_columns(["id", f"image_{k}", f"caption_{k}"])
            ids.extend(part["id"])
            captions.extend(part[f"caption_{k}"])
            images.append(part.cast_column(f"image_{k}", datasets.Image(decode=False))[f"image_{k}"])
        order = sorted(range(len(ids)), key=lambda i: (ids[i], i // len(ds)))
        flat = [*images[0], *images[1]]
        features = datasets.Features({"id": datasets.Value("int64"), "image": datasets.Image(),
                                      "caption": datasets.Value("string")})
        out[split] = datasets.Dataset.from_dict({"id": [int(ids[i]) for i in order], "image": [flat[i] for i in order],
                                                 "caption": [captions[i] for i in order]}, features=features)
    return datasets.DatasetDict(out)
