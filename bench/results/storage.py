"""Run directories to and from Google Cloud Storage (``gs://BUCKET/PREFIX``).

``podbench run --results-uri gs://b/p`` uploads its run directory to
``gs://b/p/<run_id>/`` when the run ends; ``podbench report gs://b/p`` reads the
runs under a prefix (or the single run at it) from a local copy.

Credentials come from Application Default Credentials (``gcloud auth
application-default login``, GOOGLE_APPLICATION_CREDENTIALS, or the VM's service
account); with STORAGE_EMULATOR_HOST set, the client talks to that emulator and
needs none. Errors become one-line UsageErrors built from fixed phrases, the
bucket and the HTTP status: never from the text of an authentication error,
which can quote a key file's path, and never with an environment value.

google.cloud.storage is imported inside the functions that need it: it takes
about a second to load, and `podbench run` checks its flags before anything slow.
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path, PurePosixPath
from typing import Callable, TextIO

from bench.results import rundir as results
from bench.results.gcs_errors import translate_errors
from bench.errors import UsageError

SCHEME = "gs://"
# Bucket names: lowercase letters, digits, '-', '_' and '.', starting and ending with a
# letter or digit; 3-63 characters, or up to 222 when dotted (each part at most 63).
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")
# Upload and download many files at once: each request waits mostly on the network.
MAX_WORKERS = 8
# How long transient failures (connection errors, 429, 5xx) are retried before giving up:
# long enough to ride out a network blip after an hours-long run; the check before a run
# gives up sooner, since nothing is lost by stopping then.
RETRY_TIMEOUT_S = 120.0
CHECK_RETRY_TIMEOUT_S = 20.0
# A run's JSON files: what `podbench report` reads (config, environment, steps, summary).
RUN_FILE_SUFFIXES = (".json", ".jsonl")
WRITE_PERMISSION = "storage.objects.create"


def parse_gs_uri(uri: str) -> tuple[str, str]:
    """Splits ``gs://BUCKET/PREFIX`` into the bucket and the prefix (pure).

    Args:
      uri: e.g. ``gs://my-bucket/podbench/runs/`` (trailing '/' optional; no prefix is fine).

    Returns:
      (bucket, prefix) without the prefix's trailing '/': ``("my-bucket", "podbench/runs")``.

    Raises:
      ValueError: not a gs:// URI, a malformed bucket name, or a prefix with empty,
        '.' or '..' parts.
    """
    if not uri.startswith(SCHEME):
        raise ValueError(f"{uri!r} is not a gs:// URI; give gs://BUCKET or gs://BUCKET/PREFIX")
    bucket, _, prefix = uri[len(SCHEME):].partition("/")
    if not bucket:
        raise ValueError(f"{uri!r} names no bucket; give gs://BUCKET or gs://BUCKET/PREFIX")
    if not _BUCKET_RE.fullmatch(bucket) or any(len(part) > 63 for part in bucket.split(".")) \
            or ".." in bucket:
        raise ValueError(f"{bucket!r} in {uri!r} is not a valid bucket name (3-63 lowercase letters, "
                         "digits, '-', '_' or '.', starting and ending with a letter or digit)")
    prefix = prefix.rstrip("/")
    if prefix and any(part in ("", ".", "..") for part in prefix.split("/")):
        raise ValueError(f"{uri!r} has an empty, '.' or '..' part in its path; give gs://BUCKET/PREFIX")
    return bucket, prefix


def format_gs_uri(bucket: str, *parts: str) -> str:
    """``gs://bucket/part/part`` from a bucket and path parts (empty parts dropped; pure)."""
    return SCHEME + "/".join([bucket, *(p.strip("/") for p in parts if p.strip("/"))])


def check_results_uri(uri: str, client=None, flag: str = "--results-uri", what: str = "upload results to") -> None:
    """Before a run: the URI is well formed and its bucket exists and takes new objects.

    A typo in the bucket or missing credentials then cost seconds, not a run's worth of
    training. Asks the bucket which permissions the caller holds (testIamPermissions:
    needs no permission of its own and writes nothing).

    Args:
      uri: the --results-uri value.
      client: a google.cloud.storage.Client; by default one from Application Default Credentials.
      flag, what: the flag that named it and what it is for (--checkpoint-dir: "write checkpoints to").

    Raises:
      UsageError: malformed URI, no credentials, no such bucket, or no permission to write.
    """
    try:
        bucket_name, _ = parse_gs_uri(uri)
    except ValueError as err:
        raise UsageError(f"{flag}: {err}") from None
    what = f"cannot {what} {uri}"
    with translate_errors(what, bucket_name):
        client = client or make_client()
        granted = client.bucket(bucket_name).test_iam_permissions(
            [WRITE_PERMISSION], retry=_retry(CHECK_RETRY_TIMEOUT_S))
    if WRITE_PERMISSION not in granted:
        raise UsageError(f"{what}: no permission to create objects in bucket {bucket_name} "
                         f"(needs roles/storage.objectCreator); fix {flag} or use another account")


def check_readable_prefix(uri: str, what: str, client=None) -> None:
    """Before TensorFlow loads: ``uri`` names a valid bucket, the credentials work, and objects are there.

    Each failure gets its own message: an invalid bucket name, missing or refused
    credentials, a bucket that does not exist, or nothing under the prefix.

    Args:
      uri: gs://BUCKET/PREFIX.
      what: how the message names it, e.g. "--data-dir gs://b/imagenet".
      client: a google.cloud.storage.Client; by default one from Application Default Credentials.

    Raises:
      UsageError: one line saying which of these is wrong.
    """
    try:
        bucket_name, prefix = parse_gs_uri(uri)
    except ValueError as err:
        raise UsageError(f"{what}: {err}") from None
    with translate_errors(f"cannot read {uri}", bucket_name, f"; fix {what.split()[0]}"):
        client = client or make_client()
        base = f"{prefix}/" if prefix else ""
        blobs = client.list_blobs(bucket_name, prefix=base, max_results=1, retry=_retry(CHECK_RETRY_TIMEOUT_S))
        found = next(iter(blobs), None)
    if found is None:
        raise UsageError(f"nothing under {uri}: bucket {bucket_name} exists but holds no object under "
                         f"{base or 'its root'}; check the path ({what.split()[0]})")


def upload_dir(local_dir: Path, uri: str, client=None) -> list[str]:
    """Uploads every file under ``local_dir`` to ``uri`` + its relative path, byte for byte.

    Args:
      local_dir: the directory (subdirectories included, e.g. a run's events/).
      uri: ``gs://BUCKET/PREFIX``; an object is PREFIX/RELATIVE_PATH.
      client: a google.cloud.storage.Client; by default one from Application Default Credentials.

    Returns:
      The object names written, sorted.

    Raises:
      ValueError: malformed ``uri``.
      UsageError: no credentials, no such bucket, no permission, network failure, or a
        local file that cannot be read.
    """
    bucket_name, prefix = parse_gs_uri(uri)
    with translate_errors(f"cannot upload {local_dir} to {uri}", bucket_name):
        return _upload(Path(local_dir), bucket_name, prefix, client)


def upload_run(run_dir: Path, results_uri: str, run_id: str, client=None, stream: TextIO = sys.stderr,
               failure: UsageError | None = None) -> list[str]:
    """`podbench run --results-uri`: uploads the run directory to ``<results_uri>/<run_id>/``.

    Prints ``uploaded N files to gs://…/<run_id>/`` on ``stream``.

    Args:
      run_dir: the finished run's directory (it has summary.json).
      results_uri: ``gs://BUCKET/PREFIX``, already checked by check_results_uri.
      run_id: the run's id, the last part of the objects' prefix.
      client: a google.cloud.storage.Client; by default one from Application Default Credentials.
      stream: where the progress line goes.
      failure: the run's own error when it failed mid-run; an upload error is then
        appended to it, so that both reach the user in one line.

    Returns:
      The object names written.

    Raises:
      UsageError: the upload failed; the message says where the local results are kept.
    """
    bucket_name, prefix = parse_gs_uri(results_uri)
    target = format_gs_uri(bucket_name, prefix, run_id) + "/"
    try:
        with translate_errors(f"cannot upload results to {target}", bucket_name,
                              fix=f"; the results are kept in {run_dir}"):
            names = _upload(Path(run_dir), bucket_name, f"{prefix}/{run_id}" if prefix else run_id, client)
    except UsageError as err:
        raise UsageError(f"{failure}; and {err}" if failure else str(err)) from None
    print(f"uploaded {len(names)} files to {target}", file=stream, flush=True)
    return names


def download_prefix(uri: str, local_dir: Path, client=None,
                    select: Callable[[str], bool] | None = None) -> list[Path]:
    """Downloads the objects under ``uri`` into ``local_dir``, keeping their relative paths.

    Args:
      uri: ``gs://BUCKET/PREFIX``.
      local_dir: where to write (created if needed).
      client: a google.cloud.storage.Client; by default one from Application Default Credentials.
      select: keeps only objects whose path relative to the prefix it accepts; all by default.

    Returns:
      The local paths written, in object-name order.

    Raises:
      ValueError: malformed ``uri``.
      UsageError: no credentials, no such bucket, no permission, or network failure.
    """
    bucket_name, prefix = parse_gs_uri(uri)
    with translate_errors(f"cannot read {uri}", bucket_name):
        client = client or make_client()
        names = [n for n in _relative_names(client, bucket_name, prefix) if select is None or select(n)]
        return _download(client, bucket_name, prefix, names, Path(local_dir))


def download_runs(uri: str, local_dir: Path, client=None, stream: TextIO = sys.stderr) -> list[Path]:
    """`podbench report gs://…`: the runs' JSON files, downloaded; returns the local run directories.

    ``uri`` is either one run (``<uri>/summary.json`` exists) or a prefix holding
    runs (``<uri>/<run_id>/summary.json``). Prints one progress line on ``stream``.

    Args:
      uri: ``gs://BUCKET/PREFIX``.
      local_dir: where to put them: ``local_dir/BUCKET/PREFIX[/<run_id>]``.
      client: a google.cloud.storage.Client; by default one from Application Default Credentials.
      stream: where the progress line goes.

    Returns:
      One local directory per run, sorted.

    Raises:
      UsageError: a malformed URI, no run under it, or a storage error.
    """
    try:
        bucket_name, prefix = parse_gs_uri(uri)
    except ValueError as err:
        raise UsageError(str(err)) from None
    root = Path(local_dir, bucket_name, *prefix.split("/") if prefix else ())
    with translate_errors(f"cannot read {uri}", bucket_name):
        client = client or make_client()
        names = _relative_names(client, bucket_name, prefix)
        run_dirs = _run_dirs(names)
        if not run_dirs:
            raise UsageError(f"no runs under {uri}: found no {results.SUMMARY_FILE} at "
                             f"{uri.rstrip('/')}/{results.SUMMARY_FILE} or {uri.rstrip('/')}/RUN_ID/"
                             f"{results.SUMMARY_FILE}; check the URI")
        wanted = [n for n in names if _run_file_dir(n) in run_dirs]
        print(f"downloading {len(run_dirs)} run(s) ({len(wanted)} files) from {uri} to {root}…",
              file=stream, flush=True)
        _download(client, bucket_name, prefix, wanted, root)
    return sorted(root / d if d else root for d in run_dirs)


def local_run_dirs(args: list[str], stream: TextIO = sys.stderr) -> list[Path]:
    """`podbench report`'s RUN_DIR arguments as local directories: gs:// ones are downloaded.

    Downloads go to one temporary directory, removed when the process exits.

    Args:
      args: run directories and gs:// URIs, in the order given.
      stream: where download progress goes.

    Returns:
      Local run directories, in the order given (a prefix's runs sorted).

    Raises:
      UsageError: a gs:// argument that cannot be read or holds no run.
    """
    dirs, downloads = [], None
    for arg in args:
        if not arg.startswith(SCHEME):
            dirs.append(Path(arg))
            continue
        if downloads is None:
            downloads = Path(tempfile.mkdtemp(prefix="podbench-report-"))
            atexit.register(shutil.rmtree, downloads, ignore_errors=True)
        dirs += download_runs(arg, downloads, stream=stream)
    return dirs


def make_client():
    """A google.cloud.storage.Client from Application Default Credentials (or the emulator).

    No project is needed to read and write objects in a named bucket, so none is
    looked up: credentials without a default project work too.

    Raises:
      google.auth.exceptions.DefaultCredentialsError: no usable credentials
        (translate_errors turns it into a UsageError).
    """
    try:
        from google.cloud import storage  # noqa: PLC0415 (slow import, only when talking to GCS)
    except ImportError:  # a machine set up for JAX alone (a GPU image, a TPU VM's Python) may lack it
        raise UsageError("gs:// needs the Google Cloud Storage client, which is not installed here: pip install "
                         "google-cloud-storage (podbench's own install has it), or use a local directory") from None
    check_credentials_file(os.environ)
    return storage.Client(project=None)


CREDENTIALS_ENV = "GOOGLE_APPLICATION_CREDENTIALS"
CREDENTIALS_MAX_BYTES = 1 * 2**20  # a service-account key is ~2 KiB


def check_credentials_file(environ) -> None:
    """The credentials file google.auth will read, if one is named, is a regular file of bounded size.

    google.auth reads it whole and unbounded: a FIFO waits for a writer forever, /dev/zero
    fills the memory until the kernel kills the process.

    Raises:
      UsageError: a FIFO, a device or a directory, or larger than a key file can be (a missing
        file is google.auth's to report).
    """
    path = environ.get(CREDENTIALS_ENV)
    if not path or not os.path.exists(path):
        return  # google.auth says "no usable credentials" (and the path, a secret's name, stays unsaid)
    try:
        results.regular_file(Path(path), CREDENTIALS_MAX_BYTES)
    except OSError as err:
        raise UsageError(f"{CREDENTIALS_ENV} cannot name the credentials file: it is {results.os_reason(err)}; "
                         "give a service-account key file, or unset it to use gcloud's login") from None


def _retry(timeout_s: float):
    """The library's retry policy (transient errors, backoff), giving up after ``timeout_s``."""
    from google.cloud.storage.retry import DEFAULT_RETRY  # noqa: PLC0415

    # Uploads are retried too (the library retries them only with a generation
    # precondition): rewriting an object with the same bytes is harmless.
    return DEFAULT_RETRY.with_timeout(timeout_s)


def _relative_names(client, bucket_name: str, prefix: str) -> list[str]:
    """Object names under ``prefix/``, relative to it, that are safe as local paths."""
    base = f"{prefix}/" if prefix else ""
    names = (b.name[len(base):] for b in client.list_blobs(bucket_name, prefix=base,
                                                           retry=_retry(RETRY_TIMEOUT_S)))
    # An object named "a/../../x" must not be written outside the download directory.
    return sorted(n for n in names if n and all(p not in ("", ".", "..") for p in n.split("/")))


def _run_dirs(names: list[str]) -> set[str]:
    """Relative run directories holding a summary.json: {""} for a single run at the prefix."""
    if results.SUMMARY_FILE in names:
        return {""}
    return {n.split("/")[0] for n in names if n.count("/") == 1 and n.endswith("/" + results.SUMMARY_FILE)}


def _run_file_dir(name: str) -> str | None:
    """The run directory a run's JSON file belongs to ("" at the prefix), or None if not one."""
    path = PurePosixPath(name)
    if path.suffix not in RUN_FILE_SUFFIXES or len(path.parts) > 2:
        return None
    return path.parts[0] if len(path.parts) == 2 else ""


def _upload(local_dir: Path, bucket_name: str, prefix: str, client) -> list[str]:
    """Every file under ``local_dir`` to ``prefix/RELATIVE_PATH``, many at once; the names written."""
    from google.cloud.storage import transfer_manager  # noqa: PLC0415 (slow import)

    if not local_dir.is_dir():
        raise UsageError(f"{local_dir} is not a directory")
    names = sorted(p.relative_to(local_dir).as_posix() for p in local_dir.rglob("*") if p.is_file())
    client = client or make_client()
    transfer_manager.upload_many_from_filenames(
        client.bucket(bucket_name), names, source_directory=str(local_dir),
        blob_name_prefix=f"{prefix}/" if prefix else "", raise_exception=True,
        upload_kwargs={"retry": _retry(RETRY_TIMEOUT_S)},
        worker_type=transfer_manager.THREAD, max_workers=MAX_WORKERS)
    return [f"{prefix}/{name}" if prefix else name for name in names]


def _download(client, bucket_name: str, prefix: str, names: list[str], local_dir: Path) -> list[Path]:
    """``prefix/NAME`` to ``local_dir/NAME`` for each (relative, checked) name, many at once."""
    from google.cloud.storage import transfer_manager  # noqa: PLC0415 (slow import)

    bucket = client.bucket(bucket_name)
    base = f"{prefix}/" if prefix else ""
    paths = [local_dir.joinpath(*name.split("/")) for name in names]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
    transfer_manager.download_many(
        [(bucket.blob(base + name), str(path)) for name, path in zip(names, paths)],
        download_kwargs={"retry": _retry(RETRY_TIMEOUT_S)}, raise_exception=True,
        worker_type=transfer_manager.THREAD, max_workers=MAX_WORKERS)
    return paths
