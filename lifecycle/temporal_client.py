"""The one place that builds the connection to Temporal, for every process: the API, the workers, the services and
the operators' commands.

It is configured exactly as the `temporal` CLI is, through `temporalio.envconfig`: TEMPORAL_ADDRESS,
TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS and the TEMPORAL_TLS_* certificate variables, and the TOML
profiles TEMPORAL_CONFIG_FILE and TEMPORAL_PROFILE name. With none of them set it reaches the local dev server in
plaintext, as `make run` needs; an empty variable counts as unset. An address or namespace given to the settings
explicitly (a test's stack, say) wins over a profile's, as the environment's does.

A connection that can never succeed as configured (a certificate file that does not exist, TLS against a
plaintext server, a credential the server refuses) raises TemporalMisconfigured, which names the cause and is
never retried. Temporal not answering yet raises TemporalUnreachable, which callers retry.
"""

from __future__ import annotations

import os
import re
from functools import partial
from typing import Any

from temporalio.client import Client
from temporalio.envconfig import ClientConfigProfile, ClientConnectConfig
from temporalio.runtime import Runtime

from lifecycle.backoff import until_it_answers
from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.settings import Settings
from lifecycle.tracing import temporal_interceptors


class TemporalMisconfigured(Exception):
    """The configuration can never connect: the process stops with this message rather than retrying."""


class TemporalUnreachable(Exception):
    """Temporal does not answer right now (down, restarting, unreachable); worth another try."""


def connect_config(settings: Settings) -> ClientConnectConfig:
    """Client.connect's arguments as envconfig reads them, with the settings' address and namespace where they
    were set explicitly or nothing else names one."""
    # An empty variable counts as unset, as docker-compose passes `${TEMPORAL_TLS:-}`: envconfig would read an
    # empty TEMPORAL_TLS or TEMPORAL_API_KEY as TLS on, an empty path as the working directory.
    environment = {key: value for key, value in os.environ.items() if value or not key.startswith("TEMPORAL_")}
    try:
        config = ClientConfigProfile.load(override_env_vars=environment).to_client_connect_config()
    except FileNotFoundError as err:
        raise TemporalMisconfigured(
            f"Temporal's configuration names the file {err.filename}, which does not exist"
            " (TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH, TEMPORAL_TLS_SERVER_CA_CERT_PATH,"
            " TEMPORAL_CONFIG_FILE or the profile's paths)"
        ) from err
    except (ValueError, RuntimeError) as err:
        raise TemporalMisconfigured(f"Temporal's configuration cannot be read: {err}") from err
    if "temporal_address" in settings.model_fields_set or "target_host" not in config:
        config["target_host"] = settings.temporal_address
    if "temporal_namespace" in settings.model_fields_set or "namespace" not in config:
        config["namespace"] = settings.temporal_namespace
    return config


async def connect(settings: Settings, *, runtime: Runtime | None = None) -> Client:
    """One attempt. The interceptors and the converter are also those of any worker built on this client."""
    config = connect_config(settings)
    try:
        return await Client.connect(
            **config, runtime=runtime, interceptors=temporal_interceptors(), data_converter=DATA_CONVERTER
        )
    except RuntimeError as err:
        raise _classified(err, config) from err


async def connect_when_up(settings: Settings, *, runtime: Runtime | None = None) -> Client:
    """Connect, waiting for a Temporal that does not answer yet; a misconfiguration is raised at once."""
    return await until_it_answers(
        partial(connect, settings, runtime=runtime),
        transient=lambda err: isinstance(err, TemporalUnreachable),
        doing="connecting to Temporal",
    )


# What the SDK's core reports, by cause. Its errors are text (RuntimeError), so the cause is read from the text.
_PLAINTEXT_SERVER = re.compile(r"InvalidContentType|CorruptMessage|InvalidMessage")
_TLS_SERVER = re.compile(r"FRAME_SIZE_ERROR|frame with invalid size|http2 error")
_UNTRUSTED = re.compile(r"UnknownIssuer|invalid peer certificate|certificate verify failed|NotValidForName")
_REFUSED = re.compile(
    r"code: (Unauthenticated|PermissionDenied)|status: (400|401|403)\b|CertificateRequired|HandshakeFailure|"
    r"certificate required|bad certificate"
)


def _classified(err: RuntimeError, config: ClientConnectConfig) -> Exception:
    text = str(err)
    address = config["target_host"]
    tls: Any = config.get("tls")
    if tls and _PLAINTEXT_SERVER.search(text):
        return TemporalMisconfigured(
            f"TLS is on, but Temporal at {address} answers in plaintext: turn TLS off (TEMPORAL_TLS=false) or use"
            f" the server's TLS address. ({text})"
        )
    if not tls and _TLS_SERVER.search(text):
        return TemporalMisconfigured(
            f"Temporal at {address} speaks TLS, but TLS is off: set TEMPORAL_TLS=true (and its certificate"
            f" variables) or a profile with TLS. ({text})"
        )
    if _UNTRUSTED.search(text):
        return TemporalMisconfigured(
            f"Temporal at {address} presents a certificate this process does not trust: set"
            f" TEMPORAL_TLS_SERVER_CA_CERT_PATH (and TEMPORAL_TLS_SERVER_NAME) to its CA. ({text})"
        )
    if _REFUSED.search(text):
        return TemporalMisconfigured(
            f"Temporal at {address} refused this process's credentials ({_credentials(config, tls)}). ({text})"
        )
    return TemporalUnreachable(f"Temporal at {address} is not answering ({text})")


def _credentials(config: ClientConnectConfig, tls: Any) -> str:
    sent = []
    if config.get("api_key"):
        sent.append("an API key from TEMPORAL_API_KEY or the profile")
    if tls is not None and not isinstance(tls, bool) and getattr(tls, "client_cert", None):
        sent.append("a client certificate")
    if not sent:
        return "none was sent: set TEMPORAL_API_KEY, or TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH"
    return "it sent " + " and ".join(sent)
