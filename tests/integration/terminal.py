"""A command under a pseudo-terminal, as a user at a shell runs it (Ctrl-C included)."""

from __future__ import annotations

import os
import pty
import select
import signal

from tests.integration.sdk_broker import RAFTKA, REPO, raftka_env
from tests.support import wait_until


class Terminal:
    """A command under a pseudo-terminal: type into it, read what it shows, wait for its exit."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        env = raftka_env() if env is None else env
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: a session leader whose controlling terminal is the pty
            os.chdir(REPO)
            os.execve(RAFTKA[0], [*RAFTKA, *args], env)
        self.screen = b""
        self.status: int | None = None

    def type(self, text: bytes) -> None:
        os.write(self.fd, text)

    def read_available(self, wait: float = 0.1) -> bytes:
        """What the terminal has shown so far, after reading what arrived within `wait` s."""
        if self.fd >= 0 and select.select([self.fd], [], [], wait)[0]:
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: every process closed the terminal
                data = b""
            if not data:
                os.close(self.fd)
                self.fd = -1
            self.screen += data
        return self.screen

    def shows(self, text: bytes, timeout: float = 60) -> None:
        wait_until(lambda: text in self.read_available(), timeout=timeout,
                   what=f"{text!r} on the terminal (so far: {self.screen[-500:]!r})")

    def exited(self) -> bool:
        if self.status is None:
            self.read_available(0)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status is not None

    def close(self) -> None:
        if not self.exited():
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        while self.fd >= 0:  # read to the end: EIO or EOF closes it
            self.read_available(5)
