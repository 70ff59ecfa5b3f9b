"""What the files and variables a provider.yaml names hold: the status token, the TLS pair.

Read the same way by ``check-config`` and by ``run``, so a file that passes the check is one
the service can use: bounded in size, present, not blank."""

from __future__ import annotations

import os
import ssl

from nodemanager import documents
from nodemanager.config.schema import Status

TOKEN_BYTES = 64 * 2**10  # a bearer token file (tokens are a few hundred bytes)


def load_token(settings: Status) -> str | None:
    """The bearer token from its file or environment variable, if one is configured;
    ``ValueError`` naming the key when it is missing, blank or too large."""
    if settings.bearer_token_file:
        try:
            token = documents.read_text(settings.bearer_token_file, TOKEN_BYTES).strip()
        except documents.DocumentProblem as exc:
            raise ValueError(f"status.bearerTokenFile: {settings.bearer_token_file}: {exc}") from None
        if not token:
            raise ValueError(f"status.bearerTokenFile: {settings.bearer_token_file} is empty")
        return token
    if settings.bearer_token_env:
        token = os.environ.get(settings.bearer_token_env, "").strip()
        if not token:
            raise ValueError(f"status.bearerTokenEnv: environment variable {settings.bearer_token_env} is not set or blank")
        return token
    return None


def tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A server context from a certificate chain and its key (PEM), TLS 1.2 at least."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


def status_tls(settings: Status) -> ssl.SSLContext | None:
    if settings.tls_cert_file and settings.tls_key_file:
        return tls_context(settings.tls_cert_file, settings.tls_key_file)
    return None
