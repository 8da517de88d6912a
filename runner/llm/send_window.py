"""No burst in any second: at most ``rpm / 60`` judge calls sent within any sliding second.

Some providers enforce an rpm of 600 also as "10 in any sliding second". The even spacing of
:class:`runner.llm.pacing.RateLimiter` alone would keep to it, but the event loop may delay one send a few ms
and let the next ten land within a second, so the limiter also keeps the last ``rpm / 60`` actual sends here
and holds a send until the oldest of them is ``1 s + SEND_GUARD_S`` old. Plain floats and monotonic
timestamps only, like the limiter that owns it (no asyncio primitive: it is shared across event loops).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable

SEND_GUARD_S = 0.025  # slack for send-time jitter between client and server in the one-second window


class SendWindow:
    """The last ``size`` actual sends, and the wait that keeps more than ``size`` out of any second.

    Args:
        size: Sends allowed in any second (``max(1, rpm // 60)``).
        clock: Monotonic clock in seconds (the limiter's).
        sleep: Coroutine function used to wait (the limiter's).
    """

    def __init__(self, size: int, clock: Callable[[], float], sleep: Callable[[float], Awaitable[object]]) -> None:
        self._sent: deque[float] = deque(maxlen=size)
        self._clock = clock
        self._sleep = sleep

    async def hold(self) -> float:
        """Wait until the send ``size`` sends ago is over a second old, then record this send.

        Returns:
            Seconds waited.
        """
        waited = 0.0
        while len(self._sent) == self._sent.maxlen:
            early = self._sent[0] + 1.0 + SEND_GUARD_S - self._clock()
            if early <= 0.0:
                break
            waited += early
            await self._sleep(early)
        self._sent.append(self._clock())
        return waited
