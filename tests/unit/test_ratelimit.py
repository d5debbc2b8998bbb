"""Client-side rate limiting (client-go's QPS and burst) on a fake clock."""

from __future__ import annotations

import pytest

from vgpu.kube.ratelimit import TokenBucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def bucket(qps: float, burst: int) -> tuple[TokenBucket, FakeClock]:
    clock = FakeClock()
    return TokenBucket(qps, burst, clock=clock, sleep=clock.sleep), clock


def test_burst_is_free_then_requests_are_spaced_by_one_over_qps() -> None:
    b, _ = bucket(qps=2, burst=3)
    assert [b.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    # Each further reservation queues behind the previous one.
    assert [b.reserve() for _ in range(3)] == pytest.approx([0.5, 1.0, 1.5])


def test_tokens_refill_with_time_up_to_the_burst() -> None:
    b, clock = bucket(qps=1, burst=2)
    b.reserve()
    b.reserve()
    clock.now += 1.0
    assert b.reserve() == 0.0
    assert b.reserve() == pytest.approx(1.0)
    clock.now += 100.0  # a long idle spell saves up no more than the burst
    assert [b.reserve() for _ in range(2)] == [0.0, 0.0]
    assert b.reserve() == pytest.approx(1.0)


def test_partial_refill() -> None:
    b, clock = bucket(qps=4, burst=1)
    assert b.reserve() == 0.0
    clock.now += 0.125  # half a token
    assert b.reserve() == pytest.approx(0.125)


def test_acquire_sleeps_only_when_needed() -> None:
    b, clock = bucket(qps=10, burst=2)
    for _ in range(4):
        b.acquire()
    assert clock.slept == pytest.approx([0.1, 0.1])


def test_acquire_after_waiting_keeps_the_rate() -> None:
    b, clock = bucket(qps=5, burst=1)
    start = clock.now
    for _ in range(11):
        b.acquire()
    # 1 free + 10 paced at 5 a second.
    assert clock.now - start == pytest.approx(2.0)


@pytest.mark.parametrize("qps", [0, -1], ids=["zero", "negative"])
def test_non_positive_qps_disables_the_limit(qps: float) -> None:
    b, clock = bucket(qps=qps, burst=1)
    for _ in range(100):
        b.acquire()
    assert b.reserve() == 0.0
    assert clock.slept == []


@pytest.mark.parametrize("burst", [0, -5], ids=["zero", "negative"])
def test_burst_below_one_still_allows_one(burst: int) -> None:
    b, _ = bucket(qps=1, burst=burst)
    assert b.burst == 1
    assert b.reserve() == 0.0
    assert b.reserve() == pytest.approx(1.0)
