"""Two processes under one holder identity (issue 50, case 3): a nonce per process, and a
replica that finds the Lease renewed as itself by a write not its own steps down."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest

from tests.unit.test_leader import T0, FakeLeases
from vgpu.cluster.leader import ElectionConfig, LeaderElector
from vgpu.cluster.twins import TwinError, TwinWatch, given_identity, holder_identity
from vgpu.errors import ClusterError


def elector(store: FakeLeases, holder: str, now: list[dt.datetime]) -> LeaderElector:
    return LeaderElector(store, ElectionConfig("ns", "vgpu-scheduler", holder,
                                               lease_duration=15), clock=lambda: now[0])


def test_each_process_holds_the_lease_under_an_identity_of_its_own() -> None:
    one, two = holder_identity("sched-0"), holder_identity("sched-0")
    assert one != two
    assert given_identity(one) == given_identity(two) == "sched-0"
    assert holder_identity("a", "n1") == "a_n1" and given_identity("plain") == "plain"


def test_given_one_identity_two_replicas_elect_one_leader() -> None:
    store, now = FakeLeases(), [T0]
    a = elector(store, holder_identity("sched"), now)
    b = elector(store, holder_identity("sched"), now)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # a follower: another holder, not a twin
    now[0] = T0 + dt.timedelta(seconds=5)
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()


def test_a_clone_under_the_same_holder_identity_is_told_apart_by_its_writes() -> None:
    """A process cloned with its memory (a restored snapshot: the same nonce, and the
    version of its last write) used to lead beside the original; now its next read of the
    Lease, held as itself at a version it did not write, stops it."""
    store, now = FakeLeases(), [T0]
    a, clone = elector(store, "sched_n1", now), elector(store, "sched_n1", now)
    assert a.try_acquire_or_renew()
    clone.twins.wrote(store.get_lease("ns", "vgpu-scheduler"))  # the memory it was cloned with
    now[0] = T0 + dt.timedelta(seconds=2)
    assert a.try_acquire_or_renew()
    with pytest.raises(TwinError, match="did not write"):
        clone.try_acquire_or_renew()
    assert not clone.is_leader.is_set()
    # The leader, renewed by a write not its own under its identity, stops too.
    lease = store.get_lease("ns", "vgpu-scheduler")
    store.replace_lease("ns", {**lease, "spec": {**lease["spec"], "renewTime": "x"}})
    with pytest.raises(TwinError):
        a.try_acquire_or_renew()


class LostAnswers(FakeLeases):
    """The next ``lose`` writes land but their answers are lost."""

    def __init__(self) -> None:
        super().__init__()
        self.lose = 0

    def replace_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        stored = super().replace_lease(namespace, lease)
        if self.lose:
            self.lose -= 1
            raise ClusterError("replace lease: connection closed before an answer")
        return stored


def test_a_write_of_its_own_whose_answer_was_lost_is_no_twin() -> None:
    store, now = LostAnswers(), [T0]
    a = elector(store, "sched_n1", now)
    assert a.try_acquire_or_renew()
    store.lose = 1
    now[0] = T0 + dt.timedelta(seconds=2)
    with pytest.raises(ClusterError):
        a.try_acquire_or_renew()  # landed, unanswered
    now[0] = T0 + dt.timedelta(seconds=4)
    assert a.try_acquire_or_renew()  # the version read is not held against anyone
    now[0] = T0 + dt.timedelta(seconds=6)
    assert a.try_acquire_or_renew()


def test_a_conflict_is_a_write_that_did_not_land() -> None:
    watch = TwinWatch("me")
    watch.sending()
    watch.wrote({"metadata": {"resourceVersion": "5"}, "spec": {"holderIdentity": "me"}})
    watch.sending()
    watch.refused()
    watch.check({"metadata": {"resourceVersion": "5"}, "spec": {"holderIdentity": "me"}})
    with pytest.raises(TwinError):
        watch.check({"metadata": {"resourceVersion": "6"}, "spec": {"holderIdentity": "me"}})
    watch.check({"metadata": {"resourceVersion": "6"}, "spec": {"holderIdentity": "other"}})


def test_the_campaign_of_a_twin_ends_and_says_why() -> None:
    store, now = FakeLeases(), [T0]
    a, clone = elector(store, "sched_n1", now), elector(store, "sched_n1", now)
    assert a.try_acquire_or_renew()
    clone.twins.wrote(store.get_lease("ns", "vgpu-scheduler"))  # cloned after a's write
    now[0] = T0 + dt.timedelta(seconds=2)
    assert a.try_acquire_or_renew()
    stopped: list[bool] = []
    done = threading.Thread(target=clone.run, args=(threading.Event(), lambda: None,
                                                    lambda: stopped.append(True)))
    done.start()
    done.join(5)
    assert not done.is_alive() and stopped == [True]
    assert clone.twin is not None and "did not write" in clone.twin
    assert not clone.fence.held()


def test_before_its_first_write_a_replica_holds_no_version_against_the_lease() -> None:
    """A record under its own name that a fresh process finds is an earlier process's
    (issue 46's restart): waited out, not taken for a twin."""
    store, now = FakeLeases(), [T0]
    assert elector(store, "sched", now).try_acquire_or_renew()
    restarted = elector(store, "sched", now)
    assert restarted.try_acquire_or_renew()  # no TwinError
    assert restarted.takeover_wait() > 0

