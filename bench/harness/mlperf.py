"""The ``:::MLLOG`` lines of a training process, in the order MLPerf's rules ask, whichever engine trains.

``init_start`` is logged by the runner when it starts (bench/results/mllog.py
``log_run_config``); ``init_stop`` and ``run_start`` when training begins (a
resumed segment logs ``podbench_segment_start`` instead: the run started once);
``run_stop`` once (the writer keeps it to one), with status success only if
the target was reached. A stop notice ends the segment without ``run_stop``:
the run can be resumed. No framework.
"""
from __future__ import annotations

from bench.harness.stopping import StopRequest
from bench.results import mllog


class MLPerfSegment:
    """The MLPerf log of one training process (segment) of a run.

    Args:
      writer: the run's MLPerf log writer.
      request: the process's stop request (a stop ends the segment, not the run).
      segment: which process of a resumed run this is.
      initial_step: the step this process starts after.
    """

    def __init__(self, writer: mllog.MLLogWriter, request: StopRequest | None = None, segment: int = 0,
                 initial_step: int = 0):
        self._log, self._request, self._segment, self._initial_step = writer, request, segment, initial_step

    def train_begin(self) -> None:
        if self._segment:
            self._log.event(mllog.SEGMENT_START, metadata={"segment": self._segment,
                                                           "first_step": self._initial_step + 1})
            return
        self._log.end(mllog.INIT_STOP)
        self._log.start(mllog.RUN_START)

    def epoch_begin(self, epoch: int) -> None:
        """Epoch ``epoch``, counted from 1."""
        self._log.start(mllog.EPOCH_START, metadata={mllog.EPOCH_NUM: epoch})

    def eval_begin(self, epoch: int) -> None:
        self._log.start(mllog.EVAL_START, metadata={mllog.EPOCH_NUM: epoch})

    def eval_end(self, epoch: int) -> None:
        self._log.end(mllog.EVAL_STOP, metadata={mllog.EPOCH_NUM: epoch})

    def epoch_end(self, epoch: int, top_1: float | None = None) -> None:
        if top_1 is not None:
            self._log.event(mllog.EVAL_ACCURACY, float(top_1), metadata={mllog.EPOCH_NUM: epoch})
        self._log.end(mllog.EPOCH_STOP, metadata={mllog.EPOCH_NUM: epoch})

    def train_end(self, reached_target: bool) -> None:
        if self._request is not None and self._request.requested:
            self._log.stop_segment("interrupted", self._request.signal_name)
        else:
            self._log.stop_run(reached_target)
