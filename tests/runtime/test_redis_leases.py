"""Redis leases: fencing tokens only grow, expiry follows the runtime's clock."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from reference_runtime.store.redis_queue import RedisLeases

pytestmark = pytest.mark.redis


@pytest.fixture
def leases(redis_url: str) -> Iterator[RedisLeases]:
    lz = RedisLeases(redis_url, f"test:{uuid.uuid4().hex[:8]}:")
    yield lz
    lz.drop_all()
    lz.close()


def test_a_held_lease_cannot_be_taken_until_it_expires_on_the_runtime_clock(
    leases: RedisLeases,
) -> None:
    t1 = leases.acquire("r1", "w1", now=100.0, ttl=30.0)
    assert t1 is not None
    assert leases.acquire("r1", "w2", now=129.0, ttl=30.0) is None  # still held
    assert leases.acquire("r1", "w2", now=130.0, ttl=30.0) is None  # expiry is inclusive
    t2 = leases.acquire("r1", "w2", now=130.5, ttl=30.0)
    assert t2 is not None and t2 > t1


def test_fencing_tokens_only_grow_even_after_a_release(leases: RedisLeases) -> None:
    tokens = []
    for i in range(5):
        token = leases.acquire("r1", f"w{i}", now=float(i), ttl=1.0)
        assert token is not None
        tokens.append(token)
        assert leases.release("r1", f"w{i}", token)
    assert tokens == sorted(set(tokens))


def test_only_the_holder_with_its_token_may_renew_or_release(leases: RedisLeases) -> None:
    token = leases.acquire("r1", "w1", now=0.0, ttl=10.0)
    assert token is not None
    assert not leases.renew("r1", "w2", token, now=1.0, ttl=10.0)
    assert not leases.renew("r1", "w1", token + 1, now=1.0, ttl=10.0)
    assert leases.renew("r1", "w1", token, now=5.0, ttl=10.0)
    assert leases.acquire("r1", "w2", now=12.0, ttl=10.0) is None  # renewed to 15
    assert not leases.release("r1", "w2", token)
    assert leases.release("r1", "w1", token)
    assert leases.acquire("r1", "w2", now=12.0, ttl=10.0) is not None


def test_an_expired_lease_cannot_be_renewed(leases: RedisLeases) -> None:
    token = leases.acquire("r1", "w1", now=0.0, ttl=10.0)
    assert token is not None
    assert not leases.renew("r1", "w1", token, now=10.5, ttl=10.0)


def test_prefixes_isolate_deployments(leases: RedisLeases, redis_url: str) -> None:
    other = RedisLeases(redis_url, f"test:{uuid.uuid4().hex[:8]}:")
    try:
        assert leases.acquire("r1", "w1", now=0.0, ttl=10.0) is not None
        assert other.acquire("r1", "w9", now=0.0, ttl=10.0) is not None
    finally:
        other.drop_all()
        other.close()


def test_every_key_expires_on_its_own_and_a_lost_fence_restarts_above_the_store(
    leases: RedisLeases,
) -> None:
    """A deployment killed without cleaning up leaves no key for ever (issue
    27): each write sets a TTL longer than any lease. A fence counter that
    expired restarts above the store's token (the floor), never below it."""
    client = leases.client
    token = leases.acquire("r1", "w1", now=0.0, ttl=10.0)
    assert token == 1
    keys = [f"{leases.prefix}lease:r1", f"{leases.prefix}fence:r1"]
    ttls = [client.pttl(k) for k in keys]
    assert all(0 < ttl <= leases.key_ttl_ms for ttl in ttls), ttls
    client.persist(keys[0])
    client.persist(keys[1])
    assert leases.renew("r1", "w1", token, now=5.0, ttl=10.0)
    assert all(client.pttl(k) > 0 for k in keys), "a renewal sets the TTL again"
    client.delete(*keys)  # expired, as after an hour without a write
    assert leases.acquire("r1", "w2", now=20.0, ttl=10.0, floor=7) == 8
