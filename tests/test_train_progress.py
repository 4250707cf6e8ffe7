"""bench/train/progress.py: the progress line from raw records."""
import io

from bench.train.progress import ProgressCallback, progress_line
from bench.train.timer import StepTimerCallback
from methodology.throughput import StepRecord

RECORDS = [StepRecord(0, 0.0), StepRecord(1, 10.0), StepRecord(2, 11.0),
           StepRecord(3, 12.0), StepRecord(4, 14.0)]


def test_warmup_line_shows_elapsed_time():
    line = progress_line(RECORDS[:2], None, global_batch_size=8, train_steps=4)
    assert line.startswith("step 1/4  warm-up") and "10.0 s elapsed (excluded)" in line


def test_end_of_warmup_is_still_warmup():
    line = progress_line(RECORDS[:3], 2, global_batch_size=8, train_steps=4)
    assert "warm-up" in line


def test_measured_line_by_hand():
    # window from step 2 (t=11) to step 4 (t=14): 2 steps x 8 / 3 s = 5.33 img/s;
    # interval speeds 8 and 4: standard error 2.00, MAD 2 -> jitter 2.97
    line = progress_line(RECORDS, 2, global_batch_size=8, train_steps=4)
    assert line == "step 4/4  images/sec       5.33 ± 2.00 (jitter 2.97)  step 1.500 s"


def test_logger_prints_every_log_steps():
    stream = io.StringIO()
    timer = StepTimerCallback(10, clock=iter(float(t) for t in range(100)).__next__)
    logger = ProgressCallback(timer, 8, 2, 10, log_steps=3, stream=stream)
    timer.on_train_begin()
    timer.on_epoch_begin(0)
    for batch in range(10):
        timer.on_train_batch_end(batch)
        logger.on_train_batch_end(batch)
    lines = stream.getvalue().splitlines()
    assert [line.split()[1] for line in lines] == ["3/10", "6/10", "9/10"]
    # warm-up of 2 steps: the boundary is the record of step 2, found once
    assert "warm-up" not in lines[0] and logger._start == 2
