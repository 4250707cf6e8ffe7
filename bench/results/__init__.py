"""What a run writes and how it is read back. No TensorFlow.

``rundir``: the run directory and its file names; ``jsonl``: the JSON-lines raw
data (steps, evaluations, lifecycle); ``summary``: the one summary.json schema
and ``read_summary``; ``eventfile``: TensorBoard event files; ``mllog``: the
MLPerf log; ``storage``: gs:// upload and download.
"""
