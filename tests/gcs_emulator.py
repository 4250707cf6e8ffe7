"""A real Cloud Storage JSON-API server on loopback, for tests: the gcp-storage-emulator package.

Use the fixture in a test module with ``from gcs_emulator import gcs_emulator  # noqa: F401``
(tests/ is on sys.path under pytest). It serves until the session ends, in a thread of the
test process, keeping objects in memory. Give each test its own bucket
(``gcs_emulator.create_bucket(...)``): the server is shared.

google-cloud-storage talks to it when STORAGE_EMULATOR_HOST is its URL, and then
needs no credentials (it uses anonymous ones): put ``gcs_emulator.env()`` in a
subprocess's environment, or ``monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.url)``
in-process. ``gcs_emulator.client()`` is a client bound to the server whatever the environment.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import pytest
from console import free_port

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"



@dataclass(frozen=True)
class GcsEmulator:
    """A running emulator.

    Attributes:
      url: ``http://127.0.0.1:PORT``, the value for STORAGE_EMULATOR_HOST.
    """

    url: str

    def env(self, base: dict | None = None) -> dict:
        """``base`` (os.environ by default) with STORAGE_EMULATOR_HOST pointing here."""
        return {**(os.environ if base is None else base), EMULATOR_ENV: self.url}

    def client(self):
        """A google.cloud.storage.Client for this server, anonymous, whatever the environment."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(project=None, credentials=AnonymousCredentials(),
                              client_options={"api_endpoint": self.url})

    def create_bucket(self, name: str):
        """Creates bucket ``name`` and returns it."""
        return self.client().create_bucket(name, project="podbench-test")

    def objects(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        """Every object under ``prefix`` in ``bucket``: {name: content}."""
        client = self.client()
        return {b.name: b.download_as_bytes() for b in client.list_blobs(bucket, prefix=prefix)}


@pytest.fixture(scope="session")
def gcs_emulator():
    """Starts the emulator on a free loopback port for the session; yields a GcsEmulator."""
    from gcp_storage_emulator.server import create_server

    # Its per-request INFO lines (and an ERROR line for each request it does not
    # implement) would flood the captured log of a failing test.
    logging.getLogger("gcp_storage_emulator").setLevel(logging.CRITICAL)
    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True)
    server.start()
    try:
        yield GcsEmulator(f"http://127.0.0.1:{port}")
    finally:
        server.stop()
