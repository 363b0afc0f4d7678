"""``fmnist_relational``: an offline visual question answering stand-in for relational reasoning (GATE's
CLEVR and CLEVR-Math family).

How an example is made: 1 to 4 Fashion-MNIST items of distinct classes (real item images) are pasted into
distinct random cells of a 2x2 grid of 28-px cells (a 56x56 canvas, :func:`.canvas.place`), and one question
of one of three answer types is asked about it (:data:`ANSWER_TYPES`, the order of the answer-type ids):

* ``count``: "how many items are there?" -> "1".."4" (answer id = count - 1; 1..4 items drawn uniformly);
* ``exists``: "is there a bag?" -> "no"/"yes" (a present or an absent class, yes and no equally often);
* ``spatial``: "is the bag left of the sneaker?" (left of / right of / above / below, by the items' cells:
  "left of" means a smaller column, whatever the rows) -> "no"/"yes" (2..4 items; yes and no equally often).

Answer types are equally frequent (a seeded permutation), and the answers within a type are balanced as
above, so the majority answer of every type is at its chance rate (count 25 %, exists and spatial 50 %).
Answering needs the image and the question together: which item, where, how many.

Seeded and deterministic: ``seed`` fixes every draw (each split has its own generator). Items come from
Fashion-MNIST's train images for ``train`` and from the two halves of its test images for ``val`` and
``test`` (no item image is shared between splits). Sizes are builder parameters (CPU defaults 3000 / 300 /
300). Columns: ``image`` (56x56 uint8), ``question`` (string), ``answer`` (int, within its type) and
``answer_type`` (int, the index in :data:`ANSWER_TYPES`). Built once under ``<cache_dir>/standins/``.
"""

from __future__ import annotations

import numpy as np

from .canvas import cached, class_name, place
from .pairs import SPLITS, ItemPool, article, image_dataset

GRID = (2, 2)
VERSION = 1  # part of the cache key: bump when the generation changes
#: answer type -> its answer names (answer id = index); declared identically in conf/dataset/fmnist_relational.yaml
ANSWER_TYPES = {"count": ["1", "2", "3", "4"], "exists": ["no", "yes"], "spatial": ["no", "yes"]}
RELATIONS = ("left of", "right of", "above", "below")


def holds(rel: str, a: np.ndarray, b: np.ndarray) -> bool:
    """Whether the item in cell ``a`` (row, col) is ``rel`` the item in cell ``b``."""
    return {"left of": a[1] < b[1], "right of": a[1] > b[1], "above": a[0] < b[0], "below": a[0] > b[0]}[rel]


def make_question(rng: np.random.Generator, pool: ItemPool, kind: str) -> tuple[np.ndarray, str, int]:
    """One canvas, a question of answer type ``kind`` about it, and the answer id."""
    low = 2 if kind == "spatial" else 1
    k = int(rng.integers(low, 5))
    classes = rng.choice(10, size=k, replace=False)
    canvas = place(rng, pool.draw(rng, classes), classes, grid=GRID)
    if kind == "count":
        return canvas["image"], "how many items are there?", k - 1
    answer = int(rng.integers(2))  # yes (1) or no (0), drawn first so both are equally frequent
    if kind == "exists":
        candidates = classes if answer else np.setdiff1d(np.arange(10), classes)
        return canvas["image"], f"is there {article(class_name(rng.choice(candidates)))}?", answer
    cells = canvas["cells"]
    # every (first, second, relation) with the drawn answer; both answers always exist (two distinct cells
    # differ in a row or a column, so some relation holds and its opposite does not)
    options = [(i, j, rel) for i in range(k) for j in range(k) if i != j for rel in RELATIONS
               if holds(rel, cells[i], cells[j]) == bool(answer)]
    i, j, rel = options[int(rng.integers(len(options)))]
    return canvas["image"], f"is the {class_name(classes[i])} {rel} the {class_name(classes[j])}?", answer


def build_relational(sizes: dict[str, int], seed: int):
    import datasets

    kinds = list(ANSWER_TYPES)
    out = {}
    for index, split in enumerate(SPLITS):
        rng = np.random.default_rng([seed, index])
        pool = ItemPool(split)
        types = rng.permutation(np.arange(sizes[split]) % len(kinds))
        images, questions, answers = zip(*(make_question(rng, pool, kinds[t]) for t in types))
        out[split] = image_dataset(np.stack(images), question=list(questions), answer=list(answers),
                                   answer_type=types.tolist())
    return datasets.DatasetDict(out)


def fmnist_relational(cache_dir: str | None = None, seed: int = 0, train_size: int = 3000, val_size: int = 300,
                      test_size: int = 300):
    """The ``fmnist_relational`` stand-in (module docstring): a DatasetDict with ``train``, ``val``, ``test`` of
    ``image`` (56x56 uint8), ``question``, ``answer`` and ``answer_type``."""
    sizes = {"train": int(train_size), "val": int(val_size), "test": int(test_size)}
    if min(sizes.values()) < 1:
        raise ValueError(f"fmnist_relational: every split needs at least 1 example, got sizes {sizes}")
    return cached("fmnist_relational", {"version": VERSION, "seed": int(seed), **sizes}, cache_dir,
                  lambda: build_relational(sizes, int(seed)))
