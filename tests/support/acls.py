"""ACLs over the wire for tests: CreateAcls (v3) as kafka-acls --add sends it."""

from __future__ import annotations

from typing import Any

from tests.support.wire_client import request_class

CREATE_ACLS = 30
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 2, 3, 4, 5  # Kafka's ResourceType ids
ALL, READ, WRITE, DESCRIBE = 2, 3, 4, 8  # AclOperation ids
LITERAL, ALLOW = 3, 3  # PatternType.LITERAL, AclPermissionType.ALLOW


def create_acls_body(*acls: tuple[int, str, str, int]) -> Any:
    """CreateAcls v3's body: each (resource type, literal name, principal, operation) allowed
    from any host."""
    creation = request_class(CREATE_ACLS, 3, "AclCreation")
    return request_class(CREATE_ACLS, 3)(
        creations=tuple(
            creation(
                resource_type=kind,
                resource_name=name,
                resource_pattern_type=LITERAL,
                principal=principal,
                host="*",
                operation=operation,
                permission_type=ALLOW,
            )
            for kind, name, principal, operation in acls
        )
    )
