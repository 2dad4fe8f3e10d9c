"""TLS for the Kafka port (security.protocol SSL / SASL_SSL): Python's ssl module, the
certificate and key from files, client certificates optional or required."""

from __future__ import annotations

import ssl
from typing import Any

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsConfigError(ValueError):
    pass


def server_context(config: Any) -> ssl.SSLContext:
    """Raises TlsConfigError with one line for the operator."""
    if not config.ssl_certfile:
        # (with --listeners, --security-protocol is not what asked for TLS: a listener is)
        what = "an SSL or SASL_SSL listener" if config.listeners else f"--security-protocol {config.security_protocol}"
        raise TlsConfigError(f"{what} needs --ssl-certfile (and --ssl-keyfile)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(config.ssl_certfile, config.ssl_keyfile)
        context.verify_mode = CLIENT_AUTH[config.ssl_client_auth]
        if config.ssl_client_auth != "none":
            if not config.ssl_cafile:
                raise TlsConfigError("--ssl-client-auth needs --ssl-cafile: the CA that signs client certificates")
            context.load_verify_locations(config.ssl_cafile)
    except (OSError, ssl.SSLError) as e:
        raise TlsConfigError(f"TLS certificate or key: {getattr(e, 'strerror', None) or e}") from None
    return context
