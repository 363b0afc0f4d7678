"""Relational reasoning (visual question answering) benchmarks: CLEVR v1.0 and CLEVR-Math, read from local
copies laid out as their sources. Columns: ``image`` (the scene, an ``Image`` feature holding the file path),
``question`` (text), ``answer`` (the answer id within its answer type) and ``answer_type`` (the type id), as
:class:`gate.adapters.relational.RelationalReasoner` reads them with the dataset's ``options.answer_types``, and
``image_filename`` (the scene's file, e.g. ``CLEVR_train_000042.png``): every scene has about ten questions, so
the split step carves val from train by image (``splits.group_column``), never by question.

Question files follow CLEVR_v1.0's README (QUESTION FILE FORMAT: ``{"info", "questions": [{split, image_index,
image_filename, question, answer, program, question_family_index}]}``; the generator, facebookresearch/
clevr-dataset-gen ``question_generation/generate_questions.py``, writes the same keys plus ``template_filename``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._dense import bad_copy, require

#: CLEVR's answer vocabulary per answer type (the order is the answer-type id; answer id = index in its list).
CLEVR_ANSWER_TYPES = {
    "count": [str(i) for i in range(11)],
    "exists": ["no", "yes"],
    "colour": ["gray", "red", "blue", "green", "brown", "purple", "cyan", "yellow"],
    "shape": ["cube", "sphere", "cylinder"],
    "size": ["small", "large"],
    "material": ["rubber", "metal"],
}
CLEVR_MATH_ANSWER_TYPES = {"count": [str(i) for i in range(11)]}


def _answer_index(answer_types: Mapping[str, Sequence[str]]) -> dict[str, tuple[int, int]]:
    """answer text -> (answer type id, answer id)."""
    out = {}
    for type_id, answers in enumerate(answer_types.values()):
        for answer_id, answer in enumerate(answers):
            if str(answer) in out:
                raise ValueError(f"answer {answer!r} is listed under two answer types")
            out[str(answer)] = (type_id, answer_id)
    return out


def _vqa_split(dataset: str, questions: list[dict], image_dir: Path, where: Path,
               answer_types: Mapping[str, Sequence[str]], image_of=None):
    import datasets

    index = _answer_index(answer_types)
    images, filenames, texts, answers, kinds = [], [], [], [], []
    for i, q in enumerate(questions):
        missing = [k for k in ("image_filename", "question", "answer") if k not in q]
        if missing:
            raise bad_copy(dataset, f"{where} question {i}", f"no field(s) {missing}",
                           "use the labelled question files (the test questions have no answers)")
        answer = str(q["answer"]).strip().lower()
        if answer not in index:
            raise bad_copy(dataset, f"{where} question {i}", f"answer {q['answer']!r} is in no answer type of "
                           f"{ {t: list(a) for t, a in answer_types.items()} }", "check dataset.options.answer_types")
        path = image_of(q) if image_of else image_dir / q["image_filename"]
        images.append({"path": str(path), "bytes": None})
        filenames.append(str(q["image_filename"]))
        texts.append(str(q["question"]))
        kind, answer_id = index[answer]
        kinds.append(kind)
        answers.append(answer_id)
    if not images:
        raise bad_copy(dataset, where, "holds no questions")
    first = Path(images[0]["path"])
    if not first.is_file():
        raise bad_copy(dataset, first, f"missing (the image of the first question in {where.name})",
                       "extract the image archive into dataset.data_dir")
    features = datasets.Features({"image": datasets.Image(), "image_filename": datasets.Value("string"),
                                  "question": datasets.Value("string"), "answer": datasets.Value("int64"),
                                  "answer_type": datasets.Value("int64")})
    return datasets.Dataset.from_dict({"image": images, "image_filename": filenames, "question": texts,
                                       "answer": answers, "answer_type": kinds}, features=features)


def _questions(dataset: str, path: Path) -> list[dict]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise bad_copy(dataset, path, f"not readable JSON ({type(err).__name__}: {err})") from err
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise bad_copy(dataset, path, "has no 'questions' list")
    return data["questions"]


def clevr(data_dir: str, source: Mapping[str, Any], answer_types: Mapping[str, Sequence[str]] | None = None,
          split_map: Mapping[str, str] | None = None, max_questions: int | None = None):
    """CLEVR v1.0 (Johnson et al. 2017), official layout (CLEVR_v1.0.zip extracted): ``CLEVR_v1.0/images/<split>/
    CLEVR_<split>_<n>.png`` and ``CLEVR_v1.0/questions/CLEVR_<split>_questions.json``. The official test
    answers are withheld, so the paper tests on ``val`` (``split_map``); val comes from ``dataset.splits``, carved
    by ``image_filename`` (the official val questions ask about other images than the train questions do).
    ``max_questions`` keeps the first n questions of each split (null: all; 700k train questions)."""
    answer_types = dict(answer_types or CLEVR_ANSWER_TYPES)
    split_map = dict(split_map or {"train": "train", "val": "test"})
    root = require(data_dir, "clevr", [f"CLEVR_v1.0/questions/CLEVR_{s}_questions.json" for s in split_map],
                   source)
    import datasets

    out = {}
    for source, ours in split_map.items():
        path = root / "CLEVR_v1.0" / "questions" / f"CLEVR_{source}_questions.json"
        questions = _questions("clevr", path)[: max_questions or None]
        out[ours] = _vqa_split("clevr", questions, root / "CLEVR_v1.0" / "images" / source, path, answer_types)
    return datasets.DatasetDict(out)


def clevr_math(data_dir: str, source: Mapping[str, Any],
               answer_types: Mapping[str, Sequence[str]] | None = None, split_map: Mapping[str, str] | None = None,
               max_questions: int | None = None):
    """CLEVR-Math (Lindström & Abraham 2022), the files of ``dali-does/clevr-math`` as its loading script
    (``clevr-math.py``) reads them: ``clevr-math-{train,val,test}.json`` (data/clevr-math.zip extracted into
    ``data_dir``), each ``{"questions": [{split, image_filename, question, answer, template_filename}]}``; the
    image of a question at ``CLEVR_v1.0/images/<its split>/<image_filename>`` under the extracted CLEVR v1.0
    (CLEVR_v1.0.zip) for train and val, and under ``test_images/`` (data/clevr-math-test-images.zip) for test.
    Answers are the integers 0..10."""
    answer_types = dict(answer_types or CLEVR_MATH_ANSWER_TYPES)
    split_map = dict(split_map or {"train": "train", "val": "val", "test": "test"})
    root = require(data_dir, "clevr_math", [f"clevr-math-{s}.json" for s in split_map], source)
    import datasets

    out = {}
    for source, ours in split_map.items():
        path = root / f"clevr-math-{source}.json"
        base = root / "test_images" if source == "test" else root

        def image_of(q, base=base, source=source):
            return base / "CLEVR_v1.0" / "images" / str(q.get("split", source)) / q["image_filename"]

        questions = _questions("clevr_math", path)[: max_questions or None]
        out[ours] = _vqa_split("clevr_math", questions, base, path, answer_types, image_of)
    return datasets.DatasetDict(out)
