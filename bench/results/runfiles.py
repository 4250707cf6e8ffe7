"""A run's files as one object: opened together, closed in one place, read back together. No TensorFlow.

``RunFiles`` owns every sink a run writes to (steps, evaluations, lifecycle,
TensorBoard events, the MLPerf log) and closes them whatever happens;
``read_run`` reads back everything a summary is computed from, so the
runner, `podbench summarize` and the tests all summarize the same bytes.
"""
from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from bench.plan.config import RunConfig
from bench.plan.config_json import config_from_dict
from bench.plan.resolve import ResolvedRun, resolved_from_dict
from bench.results import jsonl, mllog
from bench.results.eventfile import EventFileWriter
from bench.results.rundir import CONFIG_FILE, ENVIRONMENT_FILE, EVALS_FILE, EVENTS_DIR, LIFECYCLE_FILE, STEPS_FILE
from bench.results.rundir import read_json, write_json
from methodology.target import EvalRecord
from methodology.throughput import StepRecord


class RunFiles:
    """The sinks of one run (or of one segment of a resumed run).

    On entering, config.json is written (unless ``resume``) and every sink is
    opened for appending; on leaving, an ``end`` lifecycle event is recorded if
    the body did not record one (an exception escaped: the run failed), the
    MLPerf log gets its ``run_stop`` if fit never logged one, and every sink is
    closed, even if closing another failed.

    Args:
      run_dir: the run directory (it exists and is writable).
      run_id: the run's id.
      requested: what the user asked for (config.json's ``requested``).
      plan: what runs (config.json's ``resolved``).
      mllog_path: also append MLPerf-style lines here (None: no MLPerf log).
      resume: a resumed segment: config.json is already there and is kept.
    """

    def __init__(self, run_dir: Path, run_id: str, requested: RunConfig, plan: ResolvedRun,
                 mllog_path: str | None = None, resume: bool = False):
        self.run_dir, self.run_id, self.plan = Path(run_dir), run_id, plan
        self.requested, self.mllog_path, self._resume = requested, mllog_path, resume
        self._ended, self._ending = False, {}
        self.steps = self.evals = self.lifecycle = self.events = self.mllog = None

    def __enter__(self) -> "RunFiles":
        if not self._resume:
            write_json(self.run_dir / CONFIG_FILE, config_json(self.run_id, self.requested, self.plan))
        self.lifecycle = jsonl.LifecycleWriter(self.run_dir / LIFECYCLE_FILE)
        self.steps = jsonl.StepsWriter(self.run_dir / STEPS_FILE)
        if self.plan.eval_every_epochs:
            self.evals = jsonl.EvalsWriter(self.run_dir / EVALS_FILE)
        self.events = EventFileWriter(self.run_dir / EVENTS_DIR)
        if self.mllog_path:
            self.mllog = mllog.MLLogWriter(self.mllog_path)
        return self

    def write_environment(self, environment: dict) -> None:
        write_json(self.run_dir / ENVIRONMENT_FILE, environment)

    def end(self, status: str, **fields) -> None:
        """Records how the run (segment) ended: status, and error, signal, skipped_records ... when known."""
        self._ended, self._ending = True, {"status": status, **fields}
        self.lifecycle.event(jsonl.END, status=status, **fields)

    def __exit__(self, exc_type, exc, tb) -> None:
        with contextlib.ExitStack() as closing:  # every close runs, whatever an earlier one raised
            for sink in (self.steps, self.evals, self.events, self.mllog, self.lifecycle):
                if sink is not None:
                    closing.callback(sink.close)
            if self.mllog is not None:  # no-op when fit logged run_stop or the segment's stop
                closing.callback(self._stop_mllog)
            if not self._ended and self.lifecycle is not None:
                closing.callback(self.end, "failed",
                                 error=f"{exc_type.__name__}: {exc}" if exc_type else "ended without a status")


    def _stop_mllog(self) -> None:
        # A segment that did not complete (interrupted, failed) can be resumed: its MLPerf run
        # is not over, so no run_stop (a resumed run's log must hold exactly one).
        status = self._ending.get("status", "failed")
        if status != "completed":
            self.mllog.stop_segment(status, self._ending.get("signal"))
        else:
            self.mllog.stop_run(False)


def config_json(run_id: str, requested: RunConfig, plan: ResolvedRun) -> dict:
    """config.json: the run id, what was asked for, and what runs."""
    return {"run_id": run_id, "requested": dataclasses.asdict(requested), "resolved": plan.to_json()}


@dataclass(frozen=True)
class RunRecord:
    """Everything a run directory holds that its summary is computed from.

    Attributes:
      run_dir: where it was read.
      run_id: from config.json.
      requested, plan: config.json's two halves.
      environment: environment.json ({} if the run stopped before writing it).
      steps, evals, lifecycle: the raw logs (torn last lines dropped).
    """

    run_dir: Path
    run_id: str
    requested: RunConfig
    plan: ResolvedRun
    environment: dict
    steps: list[StepRecord]
    evals: list[EvalRecord]
    lifecycle: list[dict]


def read_run(run_dir: str | Path) -> RunRecord:
    """Reads a run directory's config, environment and raw logs.

    Raises:
      FileNotFoundError: no config.json (not a run directory, or one that stopped before running).
      ValueError: a file that is not what it should be (the message names it).
    """
    run_dir = Path(run_dir)
    config_path = run_dir / CONFIG_FILE
    if not config_path.is_file():
        raise FileNotFoundError(f"{run_dir} has no {CONFIG_FILE}: not a podbench run directory, or the run "
                                "stopped before its configuration was known")
    try:
        config = read_json(config_path)
        requested = config_from_dict(config["requested"])
        plan = resolved_from_dict(config["resolved"])
        run_id = str(config["run_id"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{config_path} is not a podbench config ({err})") from None
    environment = {}
    if (run_dir / ENVIRONMENT_FILE).is_file():
        try:
            environment = read_json(run_dir / ENVIRONMENT_FILE)
        except (OSError, ValueError) as err:
            raise ValueError(f"{run_dir / ENVIRONMENT_FILE} is unreadable ({err})") from None
    steps = jsonl.read_steps(run_dir / STEPS_FILE) if (run_dir / STEPS_FILE).is_file() else []
    return RunRecord(run_dir, run_id, requested, plan, environment if isinstance(environment, dict) else {},
                     steps, jsonl.read_evals(run_dir / EVALS_FILE), jsonl.read_lifecycle(run_dir / LIFECYCLE_FILE))
