"""bench/cluster/tpu_slice.py: a TPU slice's worker, its size, the client's libtpu and a stale lockfile (no TPU here).

What a TPU VM would answer is given as GKE's variables or a real HTTP server on
loopback standing in for the metadata server; the lockfile check reads real /proc.
"""
import http.server
import threading

import pytest

from bench.cluster import tpu_slice
from bench.errors import UsageError


@pytest.mark.parametrize("accelerator_type, devices, refused", [
    ("v2-8", 8, False),     # a single host: 8 cores, 8 devices
    ("v2-32", 8, True),     # worker 0 of a 4-host slice: --tpu local sees its own 8
    ("v4-8", 4, False),     # v4: a device is a chip of 2 cores
    ("v4-16", 4, True),
    ("v5litepod-8", 8, False),
    (None, 8, False),       # unknown: nothing to say
])
def test_local_tpu_on_a_host_of_a_larger_slice_is_refused(accelerator_type, devices, refused):
    problem = tpu_slice.local_slice_problem(accelerator_type, devices)
    assert (problem is not None) == refused
    if refused:
        assert "worker 0 only" in problem and accelerator_type in problem and "\n" not in problem


def test_a_slices_other_workers_are_refused_before_tensorflow():
    tpu_slice.check_worker("local", 0)
    tpu_slice.check_worker(None, 3)  # no TPU asked for: not this module's business
    with pytest.raises(UsageError, match="worker 3 of its slice.*worker 0 only"):
        tpu_slice.check_worker("my-tpu", 3)


@pytest.fixture
def metadata_server():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            answer = {"/agent-worker-number": b"2", "/accelerator-type": b"v2-32"}.get(self.path)
            ok = answer is not None and self.headers.get("Metadata-Flavor") == "Google"
            self.send_response(200 if ok else 404)
            self.end_headers()
            self.wfile.write(answer if ok else b"")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_the_worker_number_from_gke_or_the_tpu_vms_metadata(metadata_server):
    assert tpu_slice.tpu_worker({"TPU_WORKER_ID": "1"}, metadata_server + "/agent-worker-number") == 1
    assert tpu_slice.tpu_worker({}, metadata_server + "/agent-worker-number") == 2
    assert tpu_slice.tpu_accelerator_type({}, metadata_server + "/accelerator-type") == "v2-32"
    assert tpu_slice.tpu_worker({}, metadata_server + "/nothing") is None


def test_the_client_of_a_named_or_grpc_tpu_loads_no_libtpu():
    assert tpu_slice.client_env("my-tpu", {}) == {"TPU_LOAD_LIBRARY": "0"}
    assert tpu_slice.client_env("grpc://10.0.0.2:8470", {}) == {"TPU_LOAD_LIBRARY": "0"}
    assert tpu_slice.client_env("local", {}) == {}  # on a single host the process IS the TPU's user
    assert tpu_slice.client_env("my-tpu", {"TPU_LOAD_LIBRARY": "1"}) == {}  # the user's value wins


def test_a_lockfile_nobody_holds_is_removed(tmp_path):
    lock = tmp_path / "libtpu_lockfile"
    assert not tpu_slice.release_stale_lockfile(str(lock))
    lock.write_text("")
    assert tpu_slice.release_stale_lockfile(str(lock))  # no process here has libtpu loaded
    assert not lock.exists()


def test_a_lockfile_whose_holder_lives_is_kept(tmp_path):
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "maps").write_text("7f00-7f01 r-xp 0 00:00 1 /usr/lib/python3/site-packages/libtpu/libtpu.so\n")
    lock = tmp_path / "libtpu_lockfile"
    lock.write_text("")
    assert not tpu_slice.release_stale_lockfile(str(lock), str(proc)) and lock.exists()
