"""Offline guessing of the cluster secret from one captured control-RPC frame, per core.

Anyone on the network path can read control frames (they are authenticated, not
encrypted). With a frame in hand, each candidate secret can be checked offline.

- before (plain HMAC-SHA256 keyed with the secret, until issue 17): one HMAC per guess;
- now (broker/net/control_rpc.py): one scrypt (n=2**14, r=8, p=1, salted with the cluster id)
  to get the cluster key, then two HMACs (the session key from the two nonces of the
  captured hellos, then the frame's MAC).

Both run here on one core, with Python's hashlib (OpenSSL). A GPU changes the absolute
figures, and scrypt's 16 MiB per guess is what limits it there. The ratio is the point.

Run: .venv/bin/python bench/control_key_bench.py [seconds per case, default 3]
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sys
import time

from raftka.broker.net.control_rpc import (
    KEY_SALT_PREFIX,
    SCRYPT_N,
    SCRYPT_P,
    SCRYPT_R,
    ControlSession,
    derive_cluster_key,
)

SECRET = "the-real-cluster-secret"
CLUSTER_ID = "AAAAAAAAAAAAAAAAAAAAAA"
MESSAGE = {"id": 1, "method": "delete_topic", "args": {"name": "orders"}}


def _rate(check, seconds: float) -> float:
    guesses, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        for _ in range(16):
            check(f"guess-{guesses}".encode())
            guesses += 1
    return guesses / elapsed


def before(seconds: float) -> float:
    import cbor2

    payload = cbor2.dumps(MESSAGE)
    captured = hmac.new(SECRET.encode(), payload, hashlib.sha256).digest()

    def check(guess: bytes) -> bool:
        return hmac.compare_digest(hmac.new(guess, payload, hashlib.sha256).digest(), captured)

    return _rate(check, seconds)


def now(seconds: float) -> float:
    client_nonce, server_nonce = os.urandom(16), os.urandom(16)
    frame = ControlSession(derive_cluster_key(SECRET, CLUSTER_ID), client_nonce, server_nonce,
                           is_client=True).seal(MESSAGE)
    prefix, captured, payload = frame[:4], frame[4:36], frame[36:]
    salt = KEY_SALT_PREFIX + CLUSTER_ID.encode()

    def check(guess: bytes) -> bool:
        key = hashlib.scrypt(guess, salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=32, maxmem=64 << 20)
        session = hmac.new(key, b"raftka control session" + client_nonce + server_nonce, hashlib.sha256).digest()
        mac = hmac.new(session, b"C" + (0).to_bytes(8, "big") + prefix + payload, hashlib.sha256).digest()
        return hmac.compare_digest(mac, captured)

    assert check(SECRET.encode())  # the check really recognises the right secret
    return _rate(check, seconds)


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    old, new = before(seconds), now(seconds)
    print("| control-RPC frame, offline guesses of the secret | guesses/s (1 core) |")
    print("|---|---|")
    print(f"| before: HMAC-SHA256 keyed with the secret | {old:,.0f} |")
    print(f"| now: scrypt(n=2^14, r=8, p=1) + 2 HMAC-SHA256 | {new:,.1f} |")
    print(f"\nEach guess costs {old / new:,.0f} times more.")


if __name__ == "__main__":
    main()
