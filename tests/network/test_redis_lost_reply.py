"""The Redis lease server's reply lost on the wire (a netfilter rule drops
what Redis sends the one connection in use): the command fails within
seconds, and a lease it did take is read back as the worker's own instead of
being stranded until it expires."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from harness import _netfilter
from reference_runtime import StorageUnavailable
from reference_runtime.store.redis_queue import RedisLeases

pytestmark = [pytest.mark.redis, pytest.mark.usefixtures("netfilter")]


@pytest.fixture
def leases(redis_url: str) -> Iterator[RedisLeases]:
    leases = RedisLeases(redis_url, f"rr:test_{uuid.uuid4().hex[:12]}:")
    try:
        yield leases
    finally:
        leases.drop_all()
        leases.close()


def _replies_lost(leases: RedisLeases, redis_url: str) -> _netfilter.Rule:
    """A rule dropping what Redis sends the connection the next command uses."""
    leases.client.ping()  # one idle connection in the pool: the next command's
    pool = leases.client.connection_pool
    conn = pool.get_connection()
    try:
        sock: socket.socket = conn._sock
        local = sock.getsockname()
    finally:
        pool.release(conn)
    server = urlsplit(redis_url)
    return _netfilter.Rule(
        "drop_to_client",
        client_port=local[1],
        server_port=server.port or 6379,
        client_host=local[0],
        server_host=sock.getpeername()[0],
    )


def test_a_lease_whose_grant_was_lost_is_read_back_as_the_workers_own(
    leases: RedisLeases, redis_url: str
) -> None:
    with _netfilter.owner().holding(_replies_lost(leases, redis_url)):
        token = leases.acquire("r1", "w1", 100.0, 30.0)
    assert token is not None  # the lease Redis granted, found by reading back
    assert leases.renew("r1", "w1", token, 101.0, 30.0)
    assert leases.acquire("r1", "w2", 102.0, 30.0) is None  # held: by w1


def test_a_renewal_whose_reply_was_lost_is_read_back(leases: RedisLeases, redis_url: str) -> None:
    token = leases.acquire("r1", "w1", 100.0, 30.0)
    assert token is not None
    with _netfilter.owner().holding(_replies_lost(leases, redis_url)):
        assert leases.renew("r1", "w1", token, 110.0, 30.0)
    assert leases.acquire("r1", "w2", 135.0, 30.0) is None  # renewed to 140: still held


def test_a_lost_reply_for_a_lease_not_granted_stays_an_error(
    leases: RedisLeases, redis_url: str
) -> None:
    assert leases.acquire("r1", "w1", 100.0, 30.0) is not None
    with (
        _netfilter.owner().holding(_replies_lost(leases, redis_url)),
        pytest.raises(StorageUnavailable),
    ):
        leases.acquire("r1", "w2", 101.0, 30.0)  # refused: w1 holds it
