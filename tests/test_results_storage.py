"""bench/results/storage.py: run directories to and from Cloud Storage, against a real GCS-API server.

The server is gcp-storage-emulator on loopback (tests/gcs_emulator.py). One real
training run (`podbench run --preset smoke --results-uri ...`, module-scoped) serves
every test that needs a run directory; the rest call bench.storage in-process or run
`podbench report`, which loads no TensorFlow.

Credentials: the run is made with GOOGLE_APPLICATION_CREDENTIALS pointing at a fake
service-account key (a freshly generated RSA key), and nothing the key file holds, nor
its path, may appear in the output or in the uploaded files. Without the emulator the
same key is refused by its token endpoint (the emulator's URL, which does not issue
tokens), and the error line must not show it either.
"""
import hashlib
import json
import os
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bench.results import rundir as results
from bench.results import storage
from bench.errors import UsageError
from console import free_port
from console import podbench as podbench_child
from gcs_emulator import EMULATOR_ENV, gcs_emulator  # noqa: F401 (the fixture)

REPO = Path(__file__).resolve().parent.parent
PODBENCH = Path(sys.executable).parent / "podbench"
EXIT_USAGE = 2
RUNS_BUCKET = "podbench-runs"
RUNS_URI = f"gs://{RUNS_BUCKET}/runs"


def podbench(*args, env, timeout=300):
    """The console script with exactly ``env`` (no developer's credentials), running this checkout."""
    return podbench_child(*args, env={**env, "PYTHONPATH": str(REPO)}, timeout=timeout)


def base_env() -> dict:
    """This environment without any Cloud Storage or credentials settings of the developer's."""
    env = {k: v for k, v in os.environ.items()
           if k not in (EMULATOR_ENV, "GOOGLE_APPLICATION_CREDENTIALS", "API_ENDPOINT_OVERRIDE")}
    env["PATH"] = f"{PODBENCH.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env["CLOUDSDK_CONFIG"] = "/nonexistent-gcloud-config"  # no gcloud user credentials either
    return env


def write_fake_key(path: Path, token_uri: str) -> dict:
    """A service-account key file google-auth accepts; its token endpoint is ``token_uri``."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    info = {
        "type": "service_account", "project_id": "podbench-fake-project",
        "private_key_id": hashlib.sha1(pem.encode()).hexdigest(), "private_key": pem,
        "client_email": "podbench-fake@podbench-fake-project.iam.gserviceaccount.com",
        "client_id": "108001234567890123456", "token_uri": token_uri,
    }
    path.write_text(json.dumps(info))
    return info


def secrets_of(key_path: Path, info: dict) -> list[str]:
    """Strings that must never be shown or uploaded: the key's path, id, and key material."""
    body = [line for line in info["private_key"].splitlines() if "PRIVATE KEY" not in line]
    return [str(key_path), key_path.name, info["private_key_id"], *body[:3], body[-1]]


def files_under(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def run_json_files(uploaded_run) -> list[str]:
    """The files `podbench report` reads of a run: its top-level JSON files."""
    return [n for n in files_under(uploaded_run["run_dir"]) if n.endswith((".json", ".jsonl")) and "/" not in n]


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return errors[0]


@pytest.fixture(scope="module")
def uploaded_run(gcs_emulator, tmp_path_factory):
    """The one real training run of this module, uploaded to RUNS_URI with a fake key configured."""
    tmp = tmp_path_factory.mktemp("uploaded_run")
    gcs_emulator.create_bucket(RUNS_BUCKET)
    key_path = tmp / "podbench-fake-key.json"
    info = write_fake_key(key_path, f"{gcs_emulator.url}/token")
    env = gcs_emulator.env(base_env()) | {"GOOGLE_APPLICATION_CREDENTIALS": str(key_path)}
    run_dir = tmp / "run"
    proc = podbench("run", "--preset", "smoke", "--output", run_dir, "--results-uri", RUNS_URI, "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"proc": proc, "run_dir": run_dir, "run_id": json.loads(proc.stdout)["run_id"],
            "secrets": secrets_of(key_path, info)}


# --- URIs ---------------------------------------------------------------------

@pytest.mark.parametrize("uri, expected", [
    pytest.param("gs://my-bucket/podbench/runs", ("my-bucket", "podbench/runs"), id="bucket_and_prefix"),
    pytest.param("gs://my-bucket/runs/", ("my-bucket", "runs"), id="trailing_slash"),
    pytest.param("gs://my-bucket", ("my-bucket", ""), id="bucket_only"),
    pytest.param("gs://my-bucket/", ("my-bucket", ""), id="bucket_and_slash"),
    pytest.param("gs://abc/x", ("abc", "x"), id="shortest_bucket"),
    pytest.param("gs://my_bucket.example.com/a b/c", ("my_bucket.example.com", "a b/c"), id="dotted_and_space"),
    pytest.param("gs://b" + "x" * 61 + "z/p", ("b" + "x" * 61 + "z", "p"), id="longest_undotted_bucket"),
])
def test_parse_gs_uri(uri, expected):
    assert storage.parse_gs_uri(uri) == expected


@pytest.mark.parametrize("uri, fragment", [
    pytest.param("s3://bucket/runs", "not a gs:// URI", id="other_scheme"),
    pytest.param("/local/runs", "not a gs:// URI", id="local_path"),
    pytest.param("GS://bucket/runs", "not a gs:// URI", id="upper_case_scheme"),
    pytest.param("gs://", "names no bucket", id="no_bucket"),
    pytest.param("gs:///runs", "names no bucket", id="empty_bucket"),
    pytest.param("gs://ab/runs", "not a valid bucket name", id="bucket_too_short"),
    pytest.param("gs://b" + "x" * 62 + "z", "not a valid bucket name", id="bucket_part_too_long"),
    pytest.param("gs://My-Bucket/runs", "not a valid bucket name", id="upper_case_bucket"),
    pytest.param("gs://-bucket/runs", "not a valid bucket name", id="bucket_starts_with_dash"),
    pytest.param("gs://bucket-/runs", "not a valid bucket name", id="bucket_ends_with_dash"),
    pytest.param("gs://my..bucket/runs", "not a valid bucket name", id="bucket_with_dot_dot"),
    pytest.param("gs://bucket//runs", "empty, '.' or '..' part", id="empty_part"),
    pytest.param("gs://bucket/runs/../x", "empty, '.' or '..' part", id="dot_dot_part"),
])
def test_parse_gs_uri_rejects(uri, fragment):
    with pytest.raises(ValueError) as err:
        storage.parse_gs_uri(uri)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_format_gs_uri():
    assert storage.format_gs_uri("b", "runs/", "/20261122T113005Z-3fa9c1") == "gs://b/runs/20261122T113005Z-3fa9c1"
    assert storage.format_gs_uri("b", "", "r1") == "gs://b/r1"


# --- podbench run --results-uri -------------------------------------------------

def test_run_uploads_its_directory_byte_for_byte(uploaded_run, gcs_emulator):
    run_dir, run_id = uploaded_run["run_dir"], uploaded_run["run_id"]
    target = f"{RUNS_URI}/{run_id}/"
    local = files_under(run_dir)
    assert {results.CONFIG_FILE, results.ENVIRONMENT_FILE, results.STEPS_FILE, results.SUMMARY_FILE} <= set(local)
    assert f"uploaded {len(local)} files to {target}" in uploaded_run["proc"].stderr.splitlines()
    uploaded = gcs_emulator.objects(RUNS_BUCKET, prefix=f"runs/{run_id}/")
    assert uploaded == {f"runs/{run_id}/{name}": content for name, content in local.items()}


def test_credentials_never_shown_nor_uploaded(uploaded_run, gcs_emulator):
    proc = uploaded_run["proc"]
    uploaded = b"".join(gcs_emulator.objects(RUNS_BUCKET, prefix=f"runs/{uploaded_run['run_id']}/").values())
    for secret in uploaded_run["secrets"]:
        assert secret not in proc.stdout and secret not in proc.stderr
        assert secret.encode() not in uploaded


def test_missing_bucket_fails_before_the_run(gcs_emulator, tmp_path):
    proc = podbench("run", "--preset", "smoke", "--output", tmp_path / "run",
                    "--results-uri", "gs://podbench-no-such-bucket/runs", env=gcs_emulator.env(base_env()))
    assert proc.returncode == EXIT_USAGE
    assert proc.stderr.splitlines() == [one_error_line(proc.stderr)]  # nothing ran: no "loading TensorFlow"
    assert "bucket podbench-no-such-bucket does not exist" in proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("failure", [None, UsageError("bad record in train-00000-of-00001")],
                         ids=["finished_run", "failed_run"])
def test_upload_failure_keeps_the_local_results(uploaded_run, gcs_emulator, failure):
    # The bucket passed the check before the run, and is gone when the run ends.
    run_dir, run_id = uploaded_run["run_dir"], uploaded_run["run_id"]
    before = files_under(run_dir)
    with pytest.raises(UsageError) as err:
        storage.upload_run(run_dir, "gs://podbench-deleted-bucket/runs", run_id, client=gcs_emulator.client(),
                           failure=failure)
    upload_error = (f"cannot upload results to gs://podbench-deleted-bucket/runs/{run_id}/: bucket "
                    f"podbench-deleted-bucket does not exist (HTTP 404); check the bucket name; the results "
                    f"are kept in {run_dir}")
    assert str(err.value) == (f"{failure}; and {upload_error}" if failure else upload_error)
    assert files_under(run_dir) == before


# --- podbench report gs://... --------------------------------------------------

def test_report_reads_runs_back(uploaded_run, gcs_emulator, tmp_path):
    run_id = uploaded_run["run_id"]
    proc = podbench("report", RUNS_URI, "--output", tmp_path / "report", env=gcs_emulator.env(base_env()))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"downloading 1 run(s) ({len(run_json_files(uploaded_run))} files) from {RUNS_URI} to " in proc.stderr
    assert "skipped" not in proc.stderr
    rows = (tmp_path / "report" / "runs.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[1].startswith(f"{run_id},measured,")
    summary = json.loads((uploaded_run["run_dir"] / results.SUMMARY_FILE).read_text())
    header = rows[0].split(",")
    assert float(rows[1].split(",")[header.index("images_per_sec")]) == pytest.approx(summary["images_per_sec"])


def test_download_runs_of_one_run(uploaded_run, gcs_emulator, tmp_path):
    run_id = uploaded_run["run_id"]
    dirs = storage.download_runs(f"{RUNS_URI}/{run_id}/", tmp_path, client=gcs_emulator.client())
    assert dirs == [tmp_path / RUNS_BUCKET / "runs" / run_id]
    local = files_under(uploaded_run["run_dir"])
    assert files_under(dirs[0]) == {name: local[name] for name in run_json_files(uploaded_run)}


def test_download_runs_of_an_empty_prefix_is_one_line(gcs_emulator, tmp_path):
    with pytest.raises(UsageError) as err:
        storage.download_runs(f"{RUNS_URI}-none", tmp_path, client=gcs_emulator.client())
    assert str(err.value).startswith(f"no runs under {RUNS_URI}-none: ") and "\n" not in str(err.value)


@pytest.mark.parametrize("key", ["refused", "missing"])
def test_credential_errors_are_one_line_without_secrets(gcs_emulator, tmp_path, key):
    # No emulator: the client uses Application Default Credentials, here the fake key.
    key_path = tmp_path / "podbench-fake-key.json"
    secrets = [str(key_path), key_path.name]
    if key == "refused":
        secrets = secrets_of(key_path, write_fake_key(key_path, f"{gcs_emulator.url}/token"))
    env = base_env() | {"GOOGLE_APPLICATION_CREDENTIALS": str(key_path)}
    proc = podbench("report", RUNS_URI, "--output", tmp_path / "report", env=env)
    assert proc.returncode == EXIT_USAGE
    line = one_error_line(proc.stderr)
    assert line.startswith(f"error: cannot read {RUNS_URI}: ")
    assert ("credentials were refused" if key == "refused" else "no usable Google Cloud credentials") in line
    for secret in secrets:
        assert secret not in proc.stdout and secret not in proc.stderr


# --- bench.storage in-process -------------------------------------------------

def test_upload_dir_and_download_prefix_round_trip(gcs_emulator, tmp_path, monkeypatch):
    monkeypatch.setenv(EMULATOR_ENV, gcs_emulator.url)  # the default client: no credentials needed
    gcs_emulator.create_bucket("podbench-round-trip")
    src = tmp_path / "src"
    (src / "events" / "deeper").mkdir(parents=True)
    files = {"summary.json": b'{"a": 1}\n', "events/e.tfevents": bytes(range(256)) * 40,
             "events/deeper/empty": b"", "note with space.txt": "ünïcode\n".encode()}
    for name, content in files.items():
        (src / name).write_bytes(content)
    names = storage.upload_dir(src, "gs://podbench-round-trip/a/b/")
    assert names == sorted(f"a/b/{name}" for name in files)
    paths = storage.download_prefix("gs://podbench-round-trip/a", tmp_path / "dst")
    assert files_under(tmp_path / "dst") == {f"b/{name}": content for name, content in files.items()}
    assert sorted(paths) == sorted((tmp_path / "dst" / "b").joinpath(*n.split("/")) for n in files)
    only_json = storage.download_prefix("gs://podbench-round-trip/a/b", tmp_path / "json",
                                        select=lambda name: name.endswith(".json"))
    assert only_json == [tmp_path / "json" / "summary.json"]


def test_unreachable_server_is_one_line_without_environment_values(tmp_path, monkeypatch):
    address = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv(EMULATOR_ENV, address)
    monkeypatch.setattr(storage, "RETRY_TIMEOUT_S", 1.0)  # the default rides out minutes of outage
    with pytest.raises(UsageError) as err:
        storage.download_prefix("gs://podbench-unreachable/runs", tmp_path)
    message = str(err.value)
    assert message.startswith("cannot read gs://podbench-unreachable/runs: cannot reach Cloud Storage")
    assert "\n" not in message and address.split("//")[1] not in message


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_credentials_file_that_cannot_be_read_whole_is_refused_without_reading_it(tmp_path, kind):
    path = {"fifo": tmp_path / "key.json", "device": Path("/dev/zero"), "directory": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    with pytest.raises(UsageError) as err:
        storage.check_credentials_file({storage.CREDENTIALS_ENV: str(path)})
    assert str(path) not in str(err.value)  # the key's path is a secret's name
    storage.check_credentials_file({storage.CREDENTIALS_ENV: str(tmp_path / "missing.json")})  # google.auth's
