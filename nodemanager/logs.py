"""Logging for every command: one format, third-party libraries kept at WARNING unless named,
and a formatter that redacts credentials and user data whatever the level.

botocore logs each request's headers and body at DEBUG (the session token, the access key
id in the signature, the base64 user data); urllib3 and the Kubernetes client log the
bearer token. Keeping their loggers at WARNING is the first guard; the redacting formatter
on the one handler is the second, for a logger named on purpose and for anything a future
library version logs: every line, traceback included, passes through it."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator

FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
REDACTED = "[REDACTED]"
# Libraries whose DEBUG and INFO lines are about their own mechanics (and, at DEBUG, carry
# credentials): WARNING unless the operator names them with --debug-logger.
THIRD_PARTY = ("botocore", "boto3", "s3transfer", "urllib3", "kubernetes", "aiohttp", "asyncio", "tenacity")
# apscheduler reports every job run at INFO, and warns of each run skipped while a pass still
# runs: through a cloud outage, lines that say nothing the loops' own warnings do not.
SCHEDULER = "apscheduler"
# Environment variables of the standard AWS chain whose values are secret or identifying.
AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")
MIN_SECRET = 6  # a literal shorter than this is not redacted (it would blank ordinary words)

_KEY = r"""(['"]?\s*[:=]\s*b?['"]?)"""  # between a name and its value: ': ', '=', "': b'"
_PATTERNS = (
    re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|AIDA|AROA|ANPA)[A-Z0-9]{12,}"),  # access key ids
    re.compile(r"(?i)((?:x-amz-security-token|security_?token|session_?token|aws_session_token)" + _KEY + r")[^'\"&\s,}]+"),
    re.compile(r"(?i)((?:secret_?access_?key|aws_secret_access_key|x-amz-signature|signature)" + _KEY + r")[^'\"&\s,}]+"),
    re.compile(r"(?i)((?:authorization)" + _KEY + r")[^'\"\n]+"),
    re.compile(r"(?i)(bearer\s+)[^\s'\"]+"),
    re.compile(r"(?i)((?:userdata|user_data)" + _KEY + r")[^'\"&\s,}]+"),
)


class Redactor:
    """Patterns that look like credentials, and the literal secrets this process was given."""

    def __init__(self) -> None:
        self._literals: set[str] = set()

    def add(self, *secrets: str | None) -> None:
        self._literals.update(s for s in secrets if s and len(s) >= MIN_SECRET)

    def __call__(self, text: str) -> str:
        for literal in sorted(self._literals, key=len, reverse=True):
            text = text.replace(literal, REDACTED)
        for pattern in _PATTERNS:
            text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + REDACTED, text)
        return text


REDACT = Redactor()


class RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return REDACT(super().format(record))

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """A simulation's records carry its virtual time (``simulated_time``): that, as
        ``+HH:MM:SS.mmm`` from the run's start, rather than the wall clock's."""
        simulated = getattr(record, "simulated", None)
        if simulated is None:
            return super().formatTime(record, datefmt)
        return f"+{int(simulated // 3600):02d}:{int(simulated % 3600 // 60):02d}:{simulated % 60:06.3f}"


@contextlib.contextmanager
def simulated_time(now: Callable[[], float]) -> Iterator[None]:
    """While a simulation runs, every record on the root handlers is stamped with its
    simulated time."""

    def stamp(record: logging.LogRecord) -> bool:
        record.simulated = now()
        return True

    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(stamp)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(stamp)


def setup_logging(level: str, debug_loggers: Iterable[str] = ()) -> None:
    """The root handler on stderr at ``level``, redacting; third-party loggers at WARNING
    (or ``level``, if higher) unless named in ``debug_loggers``."""
    numeric = getattr(logging, level.upper())
    root = logging.getLogger()
    if not root.handlers:  # as logging.basicConfig: a host that installed its own keeps it
        root.setLevel(numeric)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(RedactingFormatter(FORMAT))
        root.addHandler(handler)
    named = set(debug_loggers)
    for name in THIRD_PARTY:
        logging.getLogger(name).setLevel(numeric if name in named else max(logging.WARNING, numeric))
    logging.getLogger(SCHEDULER).setLevel(numeric if SCHEDULER in named else max(logging.ERROR, numeric))
    REDACT.add(*(os.environ.get(name) for name in AWS_VARIABLES))
