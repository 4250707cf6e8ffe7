"""What grain does to each record of the JAX engine's input (bench/data/grain_input.py), in its workers: the
record checked, decoded and cropped (``Preprocess``), and under --skip-corrupt the bad ones dropped and counted
(``SkipCounted``). No TensorFlow.

For a device that decodes the JPEGs itself (the torch engine's --gpu-decode: nvJPEG), ``Preprocess(encoded=True)``
leaves a training record encoded and draws its crop and flip only, from the same random numbers the decoding path
draws them from (jpeg.train_crop): both paths crop the same windows of the same records. ``pack_encoded`` batches
such records: their JPEGs of different lengths end to end in one array, with their offsets.
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
    encoded: bool = False  # leave the JPEG encoded; draw its crop ("window": top, left, height, width) and flip

    def __call__(self, element: tuple[int, bytes, str, bool], rng: np.random.Generator | None = None) -> dict:
        record, payload, unreadable, skippable = element
        if unreadable:  # its line made by the source (record_index.TFRecordSource)
            return self._bad(unreadable, skippable)
        jpeg_bytes, label, problem = examine(payload, self.num_classes)
        if problem is None and self.encoded:
            try:
                return self._encoded(jpeg_bytes, label, rng)
            except ValueError as err:  # the header does not parse
                problem = f"JPEG does not decode ({err})"
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

    def _encoded(self, jpeg_bytes: bytes, label: int, rng: np.random.Generator | None) -> dict:
        """The JPEG as bytes, the crop and flip a decoding worker would have drawn (``rng`` None: the centre crop)."""
        shape = jpeg.image_shape(jpeg_bytes)
        window, flip = (jpeg.train_crop(*shape, self.image_size, rng) if rng is not None
                        else (jpeg.centre_window(*shape, self.image_size), False))
        return {"jpeg": np.frombuffer(jpeg_bytes, np.uint8), "window": np.array(window, np.int32),
                "flip": np.bool_(flip), "label": np.int32(label), "problem": "", "skippable": True}

    def _bad(self, message: str, skippable: bool) -> dict:
        if self.encoded:
            return {"jpeg": np.zeros(0, np.uint8), "window": np.zeros(4, np.int32), "flip": np.bool_(False),
                    "label": np.int32(0), "problem": message, "skippable": skippable}
        return {"image": np.zeros((self.image_size, self.image_size, 3), np.uint8), "label": np.int32(0),
                "problem": message, "skippable": skippable}


def pack_encoded(elements: list[dict]) -> dict:
    """A batch of ``Preprocess(encoded=True)``'s records (grain's batch_fn): the JPEGs end to end in "jpeg", the
    i-th from offsets[i] to offsets[i + 1]; the rest stacked as grain stacks them."""
    lengths = [len(e["jpeg"]) for e in elements]
    batch = {key: np.stack([e[key] for e in elements]) for key in elements[0] if key != "jpeg"}
    return {**batch, "jpeg": np.concatenate([e["jpeg"] for e in elements]),
            "offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)}


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
            kept = {key: value for key, value in element.items() if key != "skippable"}  # decoded, or encoded
            return {**kept, "problem": problem, "skipped": np.int32(skipped)}

    def get_state(self) -> dict:
        return self._parent.get_state()

    def set_state(self, state: dict) -> None:
        self._parent.set_state(state)
