"""What the fault proxy (:mod:`.proxy`) does to each request: the requests it sees, the
faults it can inject, and rules that pick them (one request by a predicate, or at random
from a seed)."""

from __future__ import annotations

import enum
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class Action(enum.Enum):
    FORWARD = "forward"
    DELAY = "delay"
    DROP = "drop"
    LOSE_ANSWER = "lose-answer"
    LATE = "late"
    DUPLICATE = "duplicate"
    RESET = "reset"


@dataclass(frozen=True)
class Request:
    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    @property
    def path(self) -> str:
        return self.target.partition("?")[0]

    @property
    def watch(self) -> bool:
        return "watch=true" in self.target.partition("?")[2] or "watch=1" in self.target

    def is_binding(self, pod: str | None = None) -> bool:
        if self.method != "POST" or not self.path.endswith("/binding"):
            return False
        return pod is None or self.path.endswith(f"/pods/{pod}/binding")


@dataclass(frozen=True)
class Fault:
    action: Action
    delay: float = 0.0


#: A rule looks at a request and names a fault for it, or None to leave it to the next.
Rule = Callable[[Request], Fault | None]


def once(match: Callable[[Request], bool], fault: Fault) -> Rule:
    """The fault for the first request ``match`` accepts, and no other."""
    done = threading.Event()

    def rule(request: Request) -> Fault | None:
        if done.is_set() or not match(request):
            return None
        done.set()
        return fault

    return rule


@dataclass
class RandomFaults:
    """Faults drawn at random (seeded) for requests that change something; reads and
    watches pass. ``rates`` maps each action to its probability per request."""

    seed: int
    rates: dict[Action, float]
    delay: tuple[float, float] = (0.5, 3.0)
    only: Callable[[Request], bool] = field(default=lambda r: r.method in MUTATING)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    def __call__(self, request: Request) -> Fault | None:
        if not self.only(request):
            return None
        with self._lock:
            roll = self._random.random()
            delay = self._random.uniform(*self.delay)
        for action, rate in self.rates.items():
            if roll < rate:
                return Fault(action, delay)
            roll -= rate
        return None
