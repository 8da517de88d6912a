"""What a provider's answers say about its 429s: whether cutting the request rate lowered their share.

A limiter without an rpm (:mod:`runner.llm.learned_rate`) treats a 429 as a rate limit and cuts its rate. Each cut
is an experiment (:class:`CutTrial`): the 429 share of the ``TRIAL_SENDS`` requests sent before the cut against
that of the first ``TRIAL_SENDS`` sent after it, each share read only once every one of its requests was answered
(a 429 comes back long before a 200, so a share read earlier is biased up). Counting requests, not seconds, judges
a cut on as many answers at 2 requests/s as at 200. Plain ints and floats, like the limiter that owns it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

TRIAL_SENDS = 20  # requests on each side of a cut whose 429 share judges it
STRAGGLER_SENDS = 64  # ... a request still unanswered this many sends later is left out (a 5xx, a timeout)
HELPED = 0.6  # a cut helped when the 429 share after it is at most this share of the share before
MAX_NOISE = 0.2  # a 429 share above this is a rate limit whatever a cut did
WORSE = 0.1  # a 429 share this much higher after a cut than before it: the cut was too small (a rate limit)
KEEP_SENDS = 1024  # outcomes kept per limiter (a trial needs 2 * TRIAL_SENDS + STRAGGLER_SENDS of them)


class SendLog:
    """The outcome of each recent request, by send number: None until answered, then whether it was a 429."""

    def __init__(self) -> None:
        self._first = 0  # send number of _outcomes[0]
        self._outcomes: deque[bool | None] = deque()

    @property
    def sent(self) -> int:
        """Requests sent so far (the next send's number)."""
        return self._first + len(self._outcomes)

    def send(self) -> int:
        """Number one more request; returns its send number."""
        self._outcomes.append(None)
        if len(self._outcomes) > KEEP_SENDS:
            self._outcomes.popleft()
            self._first += 1
        return self.sent - 1

    def answer(self, number: int, limited: bool) -> None:
        """Record the answer to request ``number`` (forgotten ones are ignored)."""
        if self._first <= number < self.sent:
            self._outcomes[number - self._first] = limited

    def share(self, first: int, end: int) -> tuple[int, int, int]:
        """(429s, answered, sent) among the requests numbered ``first`` to ``end - 1`` (clipped to those kept)."""
        limited = answered = sent = 0
        for number in range(max(first, self._first), min(end, self.sent)):
            outcome = self._outcomes[number - self._first]
            sent += 1
            if outcome is not None:
                answered += 1
                limited += outcome
        return limited, answered, sent


@dataclass
class CutTrial:
    """One cut of the learned rate, judged by the 429 shares of the requests sent around it.

    Attributes:
        at: Send number of the first request sent after the cut.
        rate_before: The learned rate before the cut (None: unpaced), restored when the cut did not help.
        until: Clock time the rate regains ``rate_before`` (its ramp): the requests after the cut are those sent
            before then, ``TRIAL_SENDS`` at most.
        end: Send number after the last of them, once known.
    """

    at: int
    rate_before: float | None
    until: float
    end: int | None = None

    def close(self, log: SendLog, now: float) -> None:
        """End the requests after the cut at ``TRIAL_SENDS`` of them, or at ``until``."""
        if self.end is None and (log.sent >= self.at + TRIAL_SENDS or now >= self.until):
            self.end = min(log.sent, self.at + TRIAL_SENDS)

    def share_after(self, log: SendLog) -> tuple[int, int]:
        """(429s, answered) among the requests sent after the cut so far."""
        limited, answered, _ = log.share(self.at, self.end if self.end is not None else log.sent)
        return limited, answered

    def verdict(self, log: SendLog) -> tuple[float, float] | None:
        """(429 share before, after) once both sides are answered (a straggler left out), None until then; a side of
        fewer than ``TRIAL_SENDS`` requests (the first cut, or a slow rate) is no evidence that the cut did not help,
        and reads as (1.0, 0.0)."""
        if self.end is None:
            return None
        if self.end - self.at < TRIAL_SENDS or self.at < TRIAL_SENDS:
            return 1.0, 0.0
        shares = []
        for first, end in ((max(0, self.at - TRIAL_SENDS), self.at), (self.at, self.end)):
            limited, answered, sent = log.share(first, end)
            if answered < sent and log.sent < end + STRAGGLER_SENDS:
                return None
            shares.append(limited / answered if answered else 0.0)
        return shares[0], shares[1]


def helped(before: float, after: float) -> bool:
    """Whether a cut lowered the 429 share clearly (or the share stays too high to be anything but a rate limit)."""
    return after <= HELPED * before or after > MAX_NOISE or after > before + WORSE
