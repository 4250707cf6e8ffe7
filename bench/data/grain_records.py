"""What grain does to each record of the JAX engine's input (bench/data/grain_input.py), in its workers: the
record checked, decoded and cropped (``Preprocess``), and under --skip-corrupt the bad ones dropped and counted
(``SkipCounted``). No TensorFlow.
"""
from __future__ import annotations

from dataclasses import dataclass

import grain
import numpy as np

from bench.data import jpeg
from bench.data.record_index import RecordIndex
from bench.data.record_problems import SKIP_FIX, examine, fix_for


@dataclass(frozen=True)
class Preprocess:
    """A record -> {"image", "label", "problem", "skippable"}: checked, decoded, cropped (grain's map, in the workers).

    A bad record is not raised here but carried, as its one-line message, to
    ``SkipCounted`` (which drops it under --skip-corrupt) and on to the training
    process, which raises it: an exception in a grain worker ends the worker
    (record_index.TFRecordSource says why that is avoided).
    """

    index: RecordIndex
    image_size: int
    num_classes: int

    def __call__(self, element: tuple[int, bytes, str, bool], rng: np.random.Generator | None = None) -> dict:
        record, payload, unreadable, skippable = element
        if unreadable:  # its line made by the source (record_index.TFRecordSource)
            return self._bad(unreadable, skippable)
        jpeg_bytes, label, problem = examine(payload, self.num_classes)
        if problem is None:
            try:
                image = (jpeg.train_image(jpeg_bytes, self.image_size, rng) if rng is not None
                         else jpeg.eval_image(jpeg_bytes, self.image_size))
            except ValueError as err:
                problem = f"JPEG does not decode ({err})"
        if problem is None:
            return {"image": image, "label": np.int32(label), "problem": "", "skippable": True}
        return self._bad(f"bad input data: {self.index.bad_record(record, problem).message()}; "
                         f"{fix_for(problem, self.num_classes, SKIP_FIX)}",
                         skippable=True)

    def _bad(self, message: str, skippable: bool) -> dict:
        return {"image": np.zeros((self.image_size, self.image_size, 3), np.uint8), "label": np.int32(0),
                "problem": message, "skippable": skippable}


class SkipCounted(grain.IterDataset):
    """Under --skip-corrupt, drops the skippable bad records and puts how many into the next record ("skipped").

    A worker's count thus travels with its batches to the training process. The
    iterator holds no state of its own between records (the count resets with each
    record it passes on), so its parent's position is its state. Without
    --skip-corrupt, and for what cannot be skipped (a broken frame), bad records
    pass on with their problem.
    """

    def __init__(self, parent: grain.IterDataset, skip: bool, share_records: int):
        super().__init__(parent)
        self._skip, self._share_records = skip, share_records

    def __iter__(self) -> grain.DatasetIterator:
        return SkipCountedIterator(self._parent.__iter__(), self._skip, self._share_records)


class SkipCountedIterator(grain.DatasetIterator):
    def __init__(self, parent: grain.DatasetIterator, skip: bool, share_records: int):
        super().__init__(parent)
        self._skip, self._share_records = skip, share_records

    def __next__(self) -> dict:
        skipped = 0
        while True:
            element = next(self._parent)
            problem = element["problem"]
            if self._skip and problem and element["skippable"]:
                skipped += 1
                if skipped <= self._share_records:
                    continue
                # Every record of an endless share is bad: say so rather than spin.
                problem = (f"every one of this process's {self._share_records} records fails the checks "
                           "(--skip-corrupt skipped them all); check the data with `podbench data inspect`")
            return {"image": element["image"], "label": element["label"], "problem": problem,
                    "skipped": np.int32(skipped)}

    def get_state(self) -> dict:
        return self._parent.get_state()

    def set_state(self, state: dict) -> None:
        self._parent.set_state(state)
