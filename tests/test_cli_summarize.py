"""bench/cli/summarize.py: `podbench summarize` rebuilds summary.json from the raw logs, without TensorFlow."""
import json

from console import run_cli
from run_fixture import write_run


def test_a_killed_run_is_summarized_as_killed_with_what_it_measured(tmp_path, capsys):
    run_dir = write_run(tmp_path, "20261123T100000Z-kill00", status="interrupted", ended=False,
                        write_summary=False)
    code, out, err = run_cli(capsys, "summarize", run_dir, "--json")
    assert code == 0 and "wrote" in err
    (summary,) = json.loads(out)
    assert summary["status"] == "killed" and summary["measured_steps"] == 8 and summary["images_per_sec"] > 0
    assert json.loads((run_dir / "summary.json").read_text()) == summary


def test_a_run_that_ended_summarizes_to_what_it_wrote(tmp_path, capsys):
    run_dir = write_run(tmp_path, "20261123T100000Z-done00")
    written = json.loads((run_dir / "summary.json").read_text())
    code, out, _ = run_cli(capsys, "summarize", run_dir, "--json")
    assert code == 0 and json.loads(out) == [written]


def test_the_text_names_how_it_ended(tmp_path, capsys):
    run_dir = write_run(tmp_path, "20261123T100000Z-kill01", status="interrupted", ended=False)
    code, out, _ = run_cli(capsys, "summarize", run_dir)
    assert code == 0 and "killed (no end was recorded; rebuilt from the raw logs)" in out


def test_not_a_run_directory_is_one_line(tmp_path, capsys):
    code, out, err = run_cli(capsys, "summarize", tmp_path)
    assert (code, out) == (2, "") and err.startswith("error: ") and "has no config.json" in err
