"""The CLI's exit codes, and the exception types it turns into one ``error: ...`` line."""

EXIT_OK = 0
EXIT_FAILED = 1  # a run that failed for a reason other than the user's input
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
EXIT_TERMINATED = 143  # 128 + SIGTERM: docker stop, Slurm, Kubernetes, a Spot VM's shutdown


class UsageError(Exception):
    """Bad input from the user: a flag, a combination, a path or a file.

    The message is one line that names the problem and the fix. The CLI prints
    it as ``error: <message>`` on stderr and exits with code 2, no traceback.
    """


class RunFailed(Exception):
    """A run that failed for another reason (out of memory, a TensorFlow error, a dead worker).

    The message is one line naming the cause; the run's summary.json says
    ``"status": "failed"`` and its directory keeps the traceback (error.log).
    The CLI prints ``error: <message>`` and exits with code 1.
    """
