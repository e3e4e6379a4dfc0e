# SPDX-License-Identifier: Apache-2.0
"""Waiting on an agent's event fd from asyncio (docs/waiting.md).

One reader per agent and event loop, registered with ``loop.add_reader`` while at least one
coroutine waits: when the fd turns readable it drains the counter and wakes every waiter, which
then looks at what it waits for. Waiters also look again at intervals (1 ms doubling to 50 ms):
a backend that learns of completion only when asked, or another thread that drained the fd
first, costs that much latency at most, never a wait that does not end.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Optional

_FIRST_RECHECK = 0.001
_LAST_RECHECK = 0.05


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


class fd_events:
    """The asyncio side of one agent's event fd."""

    def __init__(self, binding) -> None:
        self._binding = binding
        self._loops: dict = {}  # loop -> (active waits, futures waiting now)

    def _on_readable(self, loop) -> None:
        self._binding.drainEvents()
        entry = self._loops.get(loop)
        if entry is not None:
            for fut in list(entry[1]):
                _wake(fut)

    async def until(self, probe: Callable[[], Any], timeout: Optional[float]) -> Any:
        """Returns probe()'s first result that is not None, or None at the deadline
        (``timeout`` seconds; None waits without one)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + max(0.0, float(timeout))
        entry = self._loops.get(loop)
        if entry is None:
            entry = self._loops[loop] = [0, set()]
            loop.add_reader(self._binding.eventFd(), self._on_readable, loop)
        entry[0] += 1
        pause = _FIRST_RECHECK
        try:
            while True:
                result = probe()
                if result is not None:
                    return result
                now = loop.time()
                if deadline is not None and now >= deadline:
                    return None
                fut = loop.create_future()
                entry[1].add(fut)
                delay = pause if deadline is None else min(pause, deadline - now)
                timer = loop.call_later(delay, _wake, fut)
                try:
                    await fut
                finally:
                    timer.cancel()
                    entry[1].discard(fut)
                pause = min(pause * 2, _LAST_RECHECK)
        finally:
            entry[0] -= 1
            if entry[0] == 0:
                loop.remove_reader(self._binding.eventFd())
                del self._loops[loop]
