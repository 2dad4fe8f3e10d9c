"""Client quota admin requests (AlterClientQuotas) over raw frames, for the quota tests."""

from __future__ import annotations

from tests.support.data_plane import cls as request_cls

ALTER = 49


async def alter(conn, entries, validate_only=False, v=1):
    """entries: [({type: name}, [(key, value or None to remove)])] -> [(error, message)]"""
    Ent, Op, D = (request_cls(ALTER, v, n) for n in ("EntityData", "OpData", "EntryData"))
    r = await conn.request(
        ALTER,
        v,
        request_cls(ALTER, v)(
            validate_only=validate_only,
            entries=tuple(
                D(
                    entity=tuple(Ent(entity_type=t, entity_name=n) for t, n in entity),
                    ops=tuple(
                        Op(key=k, value=0.0 if val is None else float(val), remove=val is None) for k, val in ops
                    ),
                )
                for entity, ops in entries
            ),
        ),
    )
    return [(e.error_code, e.error_message) for e in r.entries]
