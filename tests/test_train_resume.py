"""bench/train/resume.py: how tf_keras is told where a resumed fit starts (its checkpoint restore is
tested with the run, tests/test_train_run.py)."""
from bench.train import resume


def test_a_resume_point_tells_tf_keras_where_to_start():
    assert resume.ResumePoint(3, 17).maybe_load_initial_counters_from_ckpt(100, 0) == (3, 17)
