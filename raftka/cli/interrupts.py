"""Ctrl-C for the CLI's long-running tools: the first SIGINT/SIGTERM ends the work loop and lets
the tool finish (flush what was sent, print its summary); the second ends everything."""

from __future__ import annotations

import signal

import trio


async def stop_on_signal(work: trio.CancelScope, everything: trio.CancelScope,
                         task_status=trio.TASK_STATUS_IGNORED) -> None:
    """First SIGINT/SIGTERM: cancel `work` (the tool finishes); second: cancel `everything`."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for _ in signals:
            if work.cancel_called:
                everything.cancel()
                return
            work.cancel()
