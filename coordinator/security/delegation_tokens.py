"""CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken and
DescribeDelegationToken (KIP-48), answered as Kafka 4.4 answers them on a broker without
delegation tokens: this server issues none (no `delegation.token.secret.key`).

Kafka's KafkaApis refuses every one of them on a connection that did not authenticate with
SASL (a PLAINTEXT or SSL listener), or did with a delegation token, with
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED; on a SASL connection, a broker without the secret key
answers DELEGATION_TOKEN_AUTH_DISABLED. Both answers carry no token and no timestamps (-1).
Listing the APIs and answering so is what lets a client (the Java AdminClient,
kafka-delegation-tokens) tell a user why, where an unlisted API is an UnsupportedVersion."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode as E

from .acl_gate import principal_of

CREATE, RENEW, EXPIRE, DESCRIBE = 38, 39, 40, 41

# A timestamp Kafka leaves unset (-1): kio writes timestamps from datetimes.
NO_TIME = datetime.datetime.fromtimestamp(-0.001, tz=datetime.timezone.utc)


def _refusal(ctx: Any) -> E:
    if ctx.connection.sasl is None:
        return E.delegation_token_request_not_allowed
    return E.delegation_token_auth_disabled


class DelegationTokenApis:
    def register(self, registry: Any) -> None:
        # (v0, Kafka 3.9's lowest, is served under --kafka-version 3.9: KIP-896 removed it)
        registry.add(CREATE, range(0, 4), self.create)
        registry.add(RENEW, range(0, 3), self.renew)
        registry.add(EXPIRE, range(0, 3), self.expire)
        registry.add(DESCRIBE, range(0, 4), self.describe)

    def create(self, ctx: Any, req: Any) -> Any:
        # The answer names the token's owner (the one asked for, else the requester) and, from
        # v3, its requester: the connection's principal, as Kafka's prepareResponse does.
        requester_type, _, requester_name = principal_of(ctx.connection).partition(":")
        owner_name = getattr(req, "owner_principal_name", None)
        owner_type = getattr(req, "owner_principal_type", None) if owner_name else None
        return ctx.response(
            throttle_time=0,
            error_code=_refusal(ctx),
            principal_type=owner_type or requester_type,
            principal_name=owner_name or requester_name,
            token_requester_principal_type=requester_type,
            token_requester_principal_name=requester_name,
            issue_timestamp=NO_TIME,
            expiry_timestamp=NO_TIME,
            max_timestamp=NO_TIME,
            token_id="",
            hmac=b"",
        )

    def renew(self, ctx: Any, req: Any) -> Any:
        return ctx.response(throttle_time=0, error_code=_refusal(ctx), expiry_timestamp=NO_TIME)

    def expire(self, ctx: Any, req: Any) -> Any:
        return ctx.response(throttle_time=0, error_code=_refusal(ctx), expiry_timestamp=NO_TIME)

    def describe(self, ctx: Any, req: Any) -> Any:
        return ctx.response(throttle_time=0, error_code=_refusal(ctx), tokens=())
