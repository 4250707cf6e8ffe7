"""The CLI's exit codes, and the one exception type it turns into ``error: ...``."""

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C


class UsageError(Exception):
    """Bad input from the user: a flag, a combination, a path or a file.

    The message is one line that names the problem and the fix. The CLI prints
    it as ``error: <message>`` on stderr and exits with code 2, no traceback.
    """
