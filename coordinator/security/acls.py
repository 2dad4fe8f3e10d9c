"""ACLs and the authorizer (Kafka's StandardAuthorizer rules), and CreateAcls, DescribeAcls,
DeleteAcls v0-3 (v0, which Kafka 4 dropped, for older admin clients) so Kafka's admin
clients manage them. Kept in `acls.json` in the data dir
(written atomically), reloaded at startup.

A request is allowed when no DENY ACL matches it and an ALLOW ACL does (READ, WRITE,
DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS; ALL implies every
operation); super users are always allowed; a resource that no ACL names at all is open
when `allow.everyone.if.no.acl.found` (our default, so turning the authorizer on changes
nothing until ACLs are added).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode as E

from protocol.error_response import error_response

from ..apis import CloseConnection
from ..durable import JsonFile

CREATE_ACLS, DESCRIBE_ACLS, DELETE_ACLS = 30, 29, 31
FILE = "acls.json"

# Kafka's codes (org.apache.kafka.common.resource / acl)
ANY_TYPE, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 1, 2, 3, 4, 5
RESOURCE_TYPES = {2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID", 6: "DELEGATION_TOKEN", 7: "USER"}
ANY_PATTERN, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
ANY_OP, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 1, 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS = range(9, 15)
ANY_PERMISSION, DENY, ALLOW = 1, 2, 3
UNKNOWN = 0  # (each of these enums' UNKNOWN)
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
# an ALLOW of the key also allows these (Kafka's AclEntry implied operations)
IMPLIED_BY = {
    DESCRIBE: {DESCRIBE, READ, WRITE, DELETE, ALTER, ALL},
    DESCRIBE_CONFIGS: {DESCRIBE_CONFIGS, ALTER_CONFIGS, ALL},
}


@dataclass(frozen=True)
class Acl:
    resource_type: int
    name: str
    pattern: int
    principal: str
    host: str
    operation: int
    permission: int

    def resource_fields(self) -> dict[str, Any]:
        """Its resource as DescribeAcls and DeleteAcls answers name the fields."""
        return {"resource_type": self.resource_type, "resource_name": self.name, "pattern_type": self.pattern}

    def entry_fields(self) -> dict[str, Any]:
        """Who may do what, as DescribeAcls' AclDescription and DeleteAcls' matches name the fields."""
        return {
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation,
            "permission_type": self.permission,
        }

    def covers(self, resource_type: int, name: str) -> bool:
        """Whether this ACL applies to the resource (authorization)."""
        if self.resource_type != resource_type:
            return False
        if self.pattern == LITERAL:
            return self.name == name or self.name == WILDCARD
        return self.pattern == PREFIXED and name.startswith(self.name)


@dataclass(frozen=True)
class AclFilter:
    """What DescribeAcls / DeleteAcls select (None: any)."""

    resource_type: int
    name: str | None
    pattern: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def matches(self, acl: Acl) -> bool:
        if self.resource_type != ANY_TYPE and acl.resource_type != self.resource_type:
            return False
        if self.name is not None:
            if self.pattern == MATCH:
                if not (
                    acl.pattern == LITERAL
                    and acl.name in (self.name, WILDCARD)
                    or acl.pattern == PREFIXED
                    and self.name.startswith(acl.name)
                ):
                    return False
            elif acl.name != self.name:
                return False
        if self.pattern not in (ANY_PATTERN, MATCH) and acl.pattern != self.pattern:
            return False
        return (
            (self.principal is None or acl.principal == self.principal)
            and (self.host is None or acl.host == self.host)
            and (self.operation == ANY_OP or acl.operation == self.operation)
            and (self.permission == ANY_PERMISSION or acl.permission == self.permission)
        )


def validate(acl: Acl) -> str | None:
    """Why Kafka refuses to create this ACL (INVALID_REQUEST), or None."""
    if acl.resource_type not in RESOURCE_TYPES:
        return f"invalid resource type {acl.resource_type}"
    if acl.pattern not in (LITERAL, PREFIXED):
        return f"invalid pattern type {acl.pattern}: LITERAL or PREFIXED"
    if not acl.name:
        return "empty resource name"
    if acl.resource_type == CLUSTER and (acl.name != CLUSTER_NAME or acl.pattern != LITERAL):
        return f"the CLUSTER resource is the LITERAL name {CLUSTER_NAME}"
    if not ALL <= acl.operation <= DESCRIBE_TOKENS:
        return f"invalid operation {acl.operation}"
    if acl.permission not in (DENY, ALLOW):
        return f"invalid permission type {acl.permission}"
    kind, sep, name = acl.principal.partition(":")
    if not sep or not kind or not name:
        return f"invalid principal {acl.principal!r}: expected Type:name, e.g. User:alice"
    if not acl.host:
        return "empty host (use * for any)"
    return None


class AclStore:
    def __init__(self, data_dir: Path) -> None:
        self.file = JsonFile(Path(data_dir) / FILE)
        self.acls: set[Acl] = self.file.load(set(), parse=lambda doc: {Acl(**a) for a in doc})

    async def add(self, acls: list[Acl]) -> None:
        await self._change(lambda current: current | set(acls))

    async def remove(self, acls: list[Acl]) -> None:
        await self._change(lambda current: current - set(acls))

    async def _change(self, change: Any) -> None:
        """The new set takes effect once durable; if the write fails (OSError for the
        caller) nothing changed."""

        def commit() -> tuple[Any, Any]:
            new = change(self.acls)
            return sorted((asdict(a) for a in new), key=lambda a: sorted(a.items())), lambda: self._install(new)

        await self.file.update(commit)

    def _install(self, acls: set[Acl]) -> None:
        self.acls = acls


class Authorizer:
    def __init__(self, store: AclStore, super_users: set[str], allow_if_no_acl: bool) -> None:
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl

    def allowed(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        relevant = [a for a in self.store.acls if a.covers(resource_type, name)]
        if not relevant:
            return self.allow_if_no_acl
        principals, hosts = (principal, "User:*"), (host, WILDCARD)
        mine = [a for a in relevant if a.principal in principals and a.host in hosts]
        if any(a.permission == DENY and a.operation in (operation, ALL) for a in mine):
            return False
        allowing = IMPLIED_BY.get(operation, {operation, ALL})
        return any(a.permission == ALLOW and a.operation in allowing for a in mine)


FILTER_ENUMS = ("resource_type_filter", "pattern_type_filter", "operation", "permission_type")


def refuse_unknown(entries: Any, *enums: str) -> None:
    """Kafka's ACL requests refuse an UNKNOWN (0) resource type, pattern type, operation or
    permission type when they are parsed (their validate() throws): the connection is
    closed, authorizer or not. (v0 has no pattern type: LITERAL.)"""
    for entry in entries:
        if any(getattr(entry, name, LITERAL) == UNKNOWN for name in enums):
            raise CloseConnection


def _no_authorizer(ctx: Any, req: Any, message: str = "No Authorizer is configured.") -> Any:
    """An ACL request without an authorizer: as Kafka, the request's error response with
    SECURITY_DISABLED and the message of its SecurityDisabledException."""
    return error_response(ctx.header.api_key, ctx.version, ctx.codec.response_type, req, E.security_disabled, message)


class AclApis:
    """CreateAcls / DescribeAcls / DeleteAcls (CLUSTER ALTER / DESCRIBE, checked by the gate)."""

    def __init__(self, store: AclStore | None) -> None:
        self.store = store  # None: no authorizer, answered SECURITY_DISABLED as Kafka does

    def register(self, registry: Any) -> None:
        registry.add(CREATE_ACLS, range(0, 4), self.create_acls)
        registry.add(DESCRIBE_ACLS, range(0, 4), self.describe_acls)
        registry.add(DELETE_ACLS, range(0, 4), self.delete_acls)

    async def create_acls(self, ctx: Any, req: Any) -> Any:
        refuse_unknown(req.creations, "resource_type", "resource_pattern_type", "operation", "permission_type")
        if self.store is None:
            return _no_authorizer(ctx, req)
        results: list[tuple[E, str | None]] = []
        new = []
        for c in req.creations:
            acl = Acl(
                c.resource_type,
                c.resource_name,
                getattr(c, "resource_pattern_type", LITERAL),
                c.principal,
                c.host,
                c.operation,
                c.permission_type,
            )
            why = validate(acl)
            results.append((E.invalid_request, why) if why else (E.none, None))
            if why is None:
                new.append(acl)
        if new:
            try:
                await self.store.add(new)
            except OSError as e:
                results = [(E.kafka_storage_error, str(e)) if err == E.none else (err, why) for err, why in results]
        return ctx.response(
            throttle_time=0,
            results=tuple(ctx.nested("AclCreationResult", error_code=err, error_message=why) for err, why in results),
        )

    @staticmethod
    def _filter(f: Any) -> AclFilter:
        return AclFilter(
            f.resource_type_filter,
            f.resource_name_filter,
            getattr(f, "pattern_type_filter", LITERAL),
            f.principal_filter,
            f.host_filter,
            f.operation,
            f.permission_type,
        )

    def describe_acls(self, ctx: Any, req: Any) -> Any:
        refuse_unknown((req,), *FILTER_ENUMS)
        if self.store is None:
            return _no_authorizer(ctx, req, "No Authorizer is configured on the broker")
        f = self._filter(req)
        by_resource: dict[tuple[int, str, int], list[Acl]] = {}
        for acl in sorted(self.store.acls, key=lambda a: (a.resource_type, a.name, a.pattern, a.principal)):
            if f.matches(acl):
                by_resource.setdefault((acl.resource_type, acl.name, acl.pattern), []).append(acl)
        resources = (
            ctx.nested(
                "DescribeAclsResource",
                **acls[0].resource_fields(),
                acls=tuple(ctx.nested("AclDescription", **a.entry_fields()) for a in acls),
            )
            for acls in by_resource.values()
        )
        return ctx.response(throttle_time=0, error_code=E.none, error_message=None, resources=tuple(resources))

    async def delete_acls(self, ctx: Any, req: Any) -> Any:
        refuse_unknown(req.filters, *FILTER_ENUMS)
        if self.store is None:
            return _no_authorizer(ctx, req)
        out = []
        for raw in req.filters:
            f = self._filter(raw)
            matched = [a for a in self.store.acls if f.matches(a)]
            error, message = E.none, None
            try:
                await self.store.remove(matched)
            except OSError as e:
                error, message, matched = E.kafka_storage_error, str(e), []
            out.append(
                ctx.nested(
                    "DeleteAclsFilterResult",
                    error_code=error,
                    error_message=message,
                    matching_acls=tuple(
                        ctx.nested(
                            "DeleteAclsMatchingAcl",
                            error_code=E.none,
                            error_message=None,
                            **a.resource_fields(),
                            **a.entry_fields(),
                        )
                        for a in matched
                    ),
                )
            )
        return ctx.response(throttle_time=0, filter_results=tuple(out))
