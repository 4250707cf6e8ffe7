"""bench/results/gcs_errors.py: each kind of Cloud Storage failure becomes its own line, never a secret."""
from __future__ import annotations

import pytest
import requests
from google.api_core import exceptions as api
from google.auth import exceptions as auth

from bench.errors import UsageError
from bench.results.gcs_errors import translate_errors

KEY_PATH = "/home/someone/keys/secret-key.json"


@pytest.mark.parametrize("err, fragment", [
    pytest.param(auth.DefaultCredentialsError(f"File {KEY_PATH} was not found."), "no usable Google Cloud credentials",
                 id="no_credentials"),
    pytest.param(auth.RefreshError(f"invalid_grant for {KEY_PATH}"), "the credentials were refused", id="refused"),
    pytest.param(api.NotFound("no such bucket"), "bucket b does not exist (HTTP 404)", id="not_found"),
    pytest.param(api.Forbidden("nope"), "permission denied on bucket b (HTTP 403)", id="forbidden"),
    pytest.param(api.RetryError("gave up", cause=ConnectionError()), "gave up retrying: ConnectionError",
                 id="retries_exhausted"),
    pytest.param(requests.ConnectionError("refused"), "cannot reach Cloud Storage (ConnectionError)", id="network"),
    pytest.param(api.TooManyRequests("slow down\nsecond line"), "answered HTTP 429: slow down", id="other_status"),
    pytest.param(FileNotFoundError(2, "No such file or directory", "/tmp/x"), "/tmp/x: No such file or directory",
                 id="local_file"),
])
def test_each_failure_is_one_line_without_the_errors_own_text(err, fragment):
    with pytest.raises(UsageError) as caught:
        with translate_errors("cannot read gs://b/p", "b", "; fix --data-dir"):
            raise err
    message = str(caught.value)
    assert message.startswith("cannot read gs://b/p: ") and message.endswith("; fix --data-dir")
    assert fragment in message and "\n" not in message and KEY_PATH not in message


def test_a_bug_is_not_dressed_up_as_a_storage_error():
    with pytest.raises(KeyError):
        with translate_errors("cannot read gs://b/p", "b"):
            raise KeyError("a programming error")


def test_a_usage_error_passes_through_unchanged():
    with pytest.raises(UsageError, match="^already one line$"):
        with translate_errors("cannot read gs://b/p", "b"):
            raise UsageError("already one line")
