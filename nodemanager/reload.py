"""Reading a changed configuration while the service runs: on SIGHUP, and when the file's
content changes (a ConfigMap update reaches a mounted file within a minute or so).

A new configuration is checked whole first, as ``check-config`` checks it; one with any
problem is refused with every problem logged, and the service runs on with the one it has.
One that differs is applied by restarting in place (``os.execv``, the same PID and
arguments): the new process recovers its records from the cloud and the cluster as any
start does, so nothing is half-applied and nothing is launched twice."""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from pathlib import Path

from cloud.catalog import Catalog
from nodemanager import documents
from nodemanager.config import load_config
from nodemanager.config.schema import ProviderConfig
from nodemanager.errors import ConfigError

log = logging.getLogger("nodemanager.service")


class ConfigFile:
    def __init__(self, path: str, config: ProviderConfig) -> None:
        self.path = path
        self.config = config
        self._digest = self._read_digest()

    def _read_digest(self) -> str | None:
        try:
            with Path(self.path).open("rb") as file:
                return hashlib.sha256(file.read(documents.CONFIG_BYTES + 1)).hexdigest()  # (a larger file the loader refuses)
        except OSError:
            return None

    def changed(self) -> bool:
        """Whether the file's content differs from when it was last read (a touch is not a
        change; a file gone for a moment, as a ConfigMap's is while its link is swapped, is
        not one either)."""
        digest = self._read_digest()
        if digest is None or digest == self._digest:
            return False
        self._digest = digest
        return True

    def newer(self) -> tuple[ProviderConfig, Catalog] | None:
        """The file's configuration if it is valid and differs from the running one; else
        None, having logged why."""
        try:
            config, catalog = load_config(self.path)
        except ConfigError as exc:
            log.error("configuration reload refused, still running the configuration it started with: %s", exc)
            return None
        except (OSError, ValueError) as exc:
            log.error("configuration reload refused (%s: %s), still running the configuration it started with", self.path, exc)
            return None
        if config == self.config:
            log.info("configuration %s read again: unchanged", self.path)
            return None
        return config, catalog


def restart_in_place() -> None:
    """Run this command again in this process (the same PID, arguments and environment)."""
    logging.shutdown()
    os.execv(sys.executable, [sys.executable, "-m", "nodemanager.cli", *sys.argv[1:]])
