"""A request rate nobody configured, learned from a provider's 429s (AIMD, as TCP does), that tells a rate limit
from 429s sent whatever the rate.

Without an rpm, :class:`runner.llm.pacing.RateLimiter` sends as fast as it is asked to until a 429. Before anything
is learned, a 429 holds back only its own call unless 429s are more than ``MAX_NOISE`` of the last answers beyond
chance (:meth:`LearnedRate._limit_evident`; the first three answers all 429s are enough, 10% sporadic ones never
are). Then it is read as a rate limit: the first of an episode cuts the request rate to ``DECREASE`` times the
lower of the current rate and the starts of the last second, every start pauses for its Retry-After, and the rate
then grows linearly by ``RAMP`` of that value per second (``rate = r0 * (1 + RAMP * t)``); a 429 within
``OBSERVE_S`` of the last pause's end does not cut it again (:meth:`LearnedRate.may_decrease`).

A cut is an experiment (:class:`runner.llm.rate_evidence.CutTrial`): the rate stays where the cut put it (no ramp)
until the ``TRIAL_SENDS`` requests after it are sent (or ``TRIAL_S`` seconds passed), and once they and the
``TRIAL_SENDS`` before it are answered their 429 shares are compared. Meanwhile, once ``MIN_ANSWERS`` of them are
answered, a 429 pauses every start (and may cut again) only while their 429 share exceeds ``MAX_NOISE``; below it,
only its own call waits. A side of fewer than ``TRIAL_SENDS`` requests judges nothing (the cut stands).
A share that did not fall (:func:`runner.llm.rate_evidence.helped`) means the 429s
do not depend on the rate (overload, a flaky gateway): the rate before the cut is back at once, and from then on a
429 holds back only its own call for its Retry-After (:attr:`Decision.OWN`) while the share of the last
``NOISE_ANSWERS`` answers stays within ``NOISE_TRIP`` times that share (or ``NOISE_SLACK`` above it); beyond it, 429s
are read as a rate limit again.

Whatever the cut, the rate never drops below what the provider answered without a 429 over the last
``FLOOR_WINDOW_S`` seconds (counted once that much time has passed since the first answer): a limit admitted that
many, so the floor never pushes past it. Plain floats and monotonic timestamps only, like the limiter that owns it.
"""

from __future__ import annotations

import enum
import math
from collections import deque

from runner.llm.rate_evidence import MAX_NOISE, TRIAL_SENDS, CutTrial, SendLog, helped

OBSERVE_S = 1.0  # a learned rate starts from the starts of this many seconds before the 429
DECREASE = 0.8  # a 429 without a configured rpm multiplies the learned request rate by this
RAMP = 0.05  # ... which then grows by this share of itself per second until the next 429
MIN_LEARNED_RATE = 0.1  # requests per second: a learned rate never falls below one call in ten seconds
FLOOR_WINDOW_S = 60.0  # the floor: answers without a 429 in this many seconds, per second
NOISE_ANSWERS = 100  # sporadic 429s: their share is watched over this many last answers ...
NOISE_TRIP = 2.0  # ... and read as a rate limit again above this many times the share found sporadic
NOISE_SLACK = 0.1  # ... and this much above it
NOISE_MIN_TRIP = 0.2  # ... and above this share
TRIAL_S = 5.0  # a cut holds the rate (no ramp) for TRIAL_SENDS requests or this many seconds after its pause
LIMIT_EVIDENCE_P = 0.01  # before anything is learned, 429s are a rate limit once their share is above MAX_NOISE beyond
# chance at this level (one-sided binomial test over the last answers); below it a 429 holds back only its own call
MIN_ANSWERS = 10  # while a cut is judged, 429s among this many answers after it may cut again (too many: a limit)


class Decision(enum.Enum):
    """What a 429 does to the limiter (:meth:`LearnedRate.decide`)."""

    CUT = "cut"  # a rate limit: a new rate, and every start pauses for Retry-After
    PAUSE = "pause"  # a rate limit, same episode: every start pauses, the rate stays
    OWN = "own"  # a sporadic 429: only its own call waits for Retry-After


class LearnedRate:
    """The requests per second a limiter without an rpm paces at once a 429 taught it one."""

    def __init__(self) -> None:
        self._starts: deque[float] = deque()  # booked starts of the last OBSERVE_S seconds
        self._sends: deque[float] = deque()  # requests sent in the last OBSERVE_S seconds (acquire)
        self._learned: tuple[float, float] | None = None  # (requests/s, ramp since; inf during a trial)
        self._cut_end = -math.inf  # end of the pause of the last cut
        self._log = SendLog()
        self._trial: CutTrial | None = None
        self._noise: float | None = None  # the 429 share found not to fall with the rate (None: read as a limit)
        self._recent: deque[bool] = deque(maxlen=NOISE_ANSWERS)  # the last answers: 429 or not
        self._ok: deque[float] = deque()  # when the answers without a 429 of the last FLOOR_WINDOW_S came
        self._first_answer: float | None = None

    @property
    def known(self) -> bool:
        """Whether a 429 has taught a rate (and no cut found not to help took it back)."""
        return self._learned is not None

    @property
    def noise(self) -> float | None:
        """The share of sporadic 429s tolerated without slowing down (None while 429s are read as a rate limit)."""
        return self._noise

    def record_start(self, now: float) -> None:
        """Remember a booked start, forgetting those more than ``OBSERVE_S`` before it."""
        self._starts.append(now)
        while now - self._starts[0] > OBSERVE_S:
            self._starts.popleft()

    def record_send(self, now: float) -> int:
        """Number a request being sent; the ramp after a cut starts once the cut's trial requests are sent."""
        number = self._log.send()
        self._sends.append(now)
        while now - self._sends[0] > OBSERVE_S:
            self._sends.popleft()
        self._close_trial(now)
        return number

    def record_answer(self, now: float, number: int | None, limited: bool) -> bool:
        """Count an answer (a 429 when ``limited``) to request ``number`` (None: unknown).

        Returns:
            Whether the rate changed: a cut found not to lower the 429 share was undone.
        """
        if self._first_answer is None:
            self._first_answer = now
        self._recent.append(limited)
        if not limited:
            self._ok.append(now)
        if number is not None:
            self._log.answer(number, limited)
        self._close_trial(now)
        return self._judge_trial(now)

    def _close_trial(self, now: float) -> None:
        """Once the requests after a cut are all sent, the rate (held where the cut put it) ramps up again."""
        if self._trial is None or self._trial.end is not None:
            return
        self._trial.close(self._log, now)
        if self._trial.end is not None and self._learned is not None:
            self._learned = (self._learned[0], max(now, self._cut_end))

    def _judge_trial(self, now: float) -> bool:
        trial = self._trial
        shares = trial.verdict(self._log) if trial is not None else None
        if trial is None or shares is None:
            return False
        self._trial = None
        before, after = shares
        if helped(before, after):
            return False
        self._noise = min(MAX_NOISE, max(before, after))
        rate = trial.rate_before
        self._learned = None if rate is None else (max(rate, self.floor(now)), now)
        return True

    def floor(self, now: float) -> float:
        """Requests per second answered without a 429 over the last ``FLOOR_WINDOW_S`` seconds (0.0 until that
        much time has passed since the first answer)."""
        while self._ok and now - self._ok[0] > FLOOR_WINDOW_S:
            self._ok.popleft()
        if self._first_answer is None or now - self._first_answer < FLOOR_WINDOW_S:
            return 0.0
        return len(self._ok) / FLOOR_WINDOW_S

    def at(self, when: float) -> float:
        """The learned requests per second at clock time ``when`` (the ramp since the last decrease included).

        Raises:
            RuntimeError: If no rate has been learned yet (see :attr:`known`).
        """
        if self._learned is None:
            raise RuntimeError("no request rate has been learned yet")
        rate, since = self._learned
        return rate * (1.0 + RAMP * max(0.0, when - since))

    def may_decrease(self, now: float) -> bool:
        """Whether a 429 at ``now`` may lower the rate: at most once per ``OBSERVE_S`` after a pause, since
        the 429s of calls booked before the last decrease say nothing about the new rate."""
        return now >= self._cut_end + OBSERVE_S

    def decide(self, now: float, resume_at: float, paused: bool) -> Decision:
        """What a 429 at ``now`` (already counted by :meth:`record_answer`) does; a cut changes the rate here.

        Args:
            now: The clock time of the 429.
            resume_at: When its Retry-After ends: a cut's pause ends there.
            paused: Whether a pause of an earlier 429 is still running (the same episode).
        """
        if self._noise is not None:
            if not self._over_noise():
                return Decision.OWN
            self._noise = None  # more 429s than sporadic ones: a rate limit again
        if self._learned is None and self._trial is None and not self._limit_evident():
            return Decision.OWN  # no evidence yet of more 429s than sporadic ones: this call waits alone
        if not self._trial_confirms():
            return Decision.OWN  # a cut is being judged: too few 429s since it to read them as a rate limit yet
        if paused or not self.may_decrease(now):
            return Decision.PAUSE
        self._decrease(now, resume_at)
        return Decision.CUT

    def _limit_evident(self) -> bool:
        """Whether the 429 share of the last answers (up to ``NOISE_ANSWERS``, the requests still unanswered counted
        as not 429s: a 429 comes back long before a 200) is above ``MAX_NOISE`` beyond chance (one-sided binomial
        test, p < ``LIMIT_EVIDENCE_P``): only then does a 429, before anything is learned, pause every start and cut."""
        _, answered, sent = self._log.share(self._log.sent - NOISE_ANSWERS, self._log.sent)
        limited, count = sum(self._recent), len(self._recent) + sent - answered
        return limited > MAX_NOISE * count and binomial_tail(limited, count, MAX_NOISE) < LIMIT_EVIDENCE_P

    def _trial_confirms(self) -> bool:
        """While a cut is judged, a 429 pauses every start (and may cut again) only when the 429 share since the cut
        is too high for sporadic 429s."""
        if self._trial is None:
            return True
        limited, answered = self._trial.share_after(self._log)
        return answered < MIN_ANSWERS or limited > MAX_NOISE * answered

    def _over_noise(self) -> bool:
        assert self._noise is not None
        if len(self._recent) < TRIAL_SENDS:
            return False
        share = sum(self._recent) / len(self._recent)
        return share > max(NOISE_TRIP * self._noise, self._noise + NOISE_SLACK, NOISE_MIN_TRIP)

    def _decrease(self, now: float, resume_at: float) -> None:
        """Multiplicative decrease, never below the floor; the cut is judged when requests are numbered (acquire)."""
        before = self.at(now) if self._learned is not None else None
        current: float
        if before is None:  # unpaced: what was sent in the last second (after a pause, paced: it undercounts)
            current = max(1, *(sum(1 for t in times if now - t <= OBSERVE_S) for times in (self._starts, self._sends)))
        else:
            current = before
        rate = max(MIN_LEARNED_RATE, self.floor(now), DECREASE * current)
        self._cut_end = max(now, resume_at)
        if self._trial is None and self._log.sent > 0:
            self._trial = CutTrial(self._log.sent, before, self._cut_end + TRIAL_S)
        held = self._trial is not None and self._trial.end is None
        self._learned = (rate, math.inf if held else self._cut_end)


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), exactly (n is at most a few hundred here).

    Written out rather than scipy.stats.binom.sf: importing scipy.stats takes 1-3 s, which would block the event loop
    (and every call in flight) at a run's first 429.
    """
    return sum(math.comb(n, i) * p**i * (1.0 - p) ** (n - i) for i in range(max(k, 0), n + 1))
