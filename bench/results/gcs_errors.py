"""Cloud Storage, credential and network errors as one line each (for bench.results.storage).

The messages are fixed phrases plus the bucket and an HTTP status: an
authentication error's own text can name a key file's path, so it is never
shown. The Google libraries are imported only once an error is being sorted
out: they are already loaded by then, and `--help` never pays for them.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

from bench.errors import UsageError


@contextlib.contextmanager
def translate_errors(what: str, bucket: str, fix: str = "") -> Iterator[None]:
    """Turns storage, credential and network errors into one-line UsageErrors.

    The messages are fixed phrases plus the bucket and an HTTP status: an
    authentication error's own text can name a key file's path, so it is never shown.

    Args:
      what: the start of the message, e.g. "cannot upload results to gs://b/p".
      bucket: the bucket's name, for the not-found and permission messages.
      fix: appended to the message (e.g. "; fix --results-uri").

    Raises:
      UsageError: "<what>: <reason><fix>".
    """
    try:
        yield
    except UsageError:
        raise
    except Exception as err:  # noqa: BLE001 (sorted out by _reason; the rest re-raised)
        reason = _reason(err, bucket)
        if reason is None:
            raise
        raise UsageError(f"{what}: {reason}{fix}") from None


def _reason(err: Exception, bucket: str) -> str | None:
    """One phrase for a storage/auth/network error; None for anything else (a bug: re-raised)."""
    import requests  # noqa: PLC0415 (loaded with google.cloud.storage anyway)
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth

    if isinstance(err, auth.DefaultCredentialsError):
        return ("no usable Google Cloud credentials (Application Default Credentials): run "
                "`gcloud auth application-default login`, or point GOOGLE_APPLICATION_CREDENTIALS "
                "at a valid service-account key file")
    if isinstance(err, (auth.RefreshError, api.Unauthorized)):
        return ("the credentials were refused (expired, revoked or not valid for Cloud Storage); "
                "renew them with `gcloud auth application-default login` or check the key file")
    if isinstance(err, api.NotFound):
        return f"bucket {bucket} does not exist (HTTP 404); check the bucket name"
    if isinstance(err, api.Forbidden):
        return (f"permission denied on bucket {bucket} (HTTP 403); the account needs "
                "roles/storage.objectCreator to write or roles/storage.objectViewer to read")
    if isinstance(err, api.RetryError):
        cause = type(err.cause).__name__ if err.cause is not None else "timeout"
        return f"cannot reach Cloud Storage (gave up retrying: {cause}); check the network"
    if isinstance(err, (auth.TransportError, requests.RequestException, ConnectionError, TimeoutError)):
        return f"cannot reach Cloud Storage ({type(err).__name__}); check the network"
    if isinstance(err, api.GoogleAPICallError):
        return f"Cloud Storage answered HTTP {err.code}: {_first_line(err.message)}"
    if isinstance(err, auth.GoogleAuthError):
        return f"the credentials cannot be used ({type(err).__name__})"
    if isinstance(err, OSError):
        return f"{err.filename or 'a file'}: {err.strerror or err}"
    return None


def _first_line(text: str, limit: int = 200) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else "no message"
    return line if len(line) <= limit else line[:limit] + "…"
