"""franz-go's own KIP-848 and share-group tests (github.com/twmb/franz-go, pkg/kgo) against a real raftka server.

franz-go runs its KIP-848 sub-tests only against a broker that serves ConsumerGroupHeartbeat v1;
against raftka they used to skip. There are eight: TestGroupETL/{range,sticky,sticky/static}
with `/848`, TestTxnEtl/{range,sticky,sticky/static}/848, TestGroupSimple/848 and
Test848RegexBrokerResolves. The ETL tests hold a semaphore per sub-test, so a `-run` pattern
that leaves a sibling out deadlocks: the whole tests run, with their classic sub-tests. This
test holds the KIP-848 ones of TestGroupETL to PASS, and all six of TestTxnEtl (transactional
consume-transform-produce at transaction version 2, classic and KIP-848 groups, static
members too), which also checks that a transaction ended while the previous one's markers
are still out is retried (CONCURRENT_TRANSACTIONS), not fenced.

franz-go runs its five share-group tests (TestShareGroup, TestShareGroupETL,
TestShareGroupAckOnClose, TestShareGroupOffsetsAdmin, TestConsumeRegexShareSkipsInternal) only
against a broker that serves ShareFetch v2 and ShareAcknowledge v2; this test holds them to PASS.

The module comes through the Go module proxy (`go`, pinned version) and its test binary is built
once into ~/.cache/raftka/franz-go-<version>/."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.server_process import ServerProcess

# Heavy (franz-go's test binary (a Go build, then 20000-record ETL runs)): run by `make compat`, not `make test`, which keeps its bounded part
# (the confluent-kafka and SDK tests of the same features) under its time budget.
pytestmark = pytest.mark.compat_full

FRANZ_GO = "github.com/twmb/franz-go"
VERSION = "v1.22.3"
KIP848_SUBTESTS = ("TestGroupETL/range/848", "TestGroupETL/sticky/848", "TestGroupETL/sticky/848/static",
                   "TestGroupSimple/848", "Test848RegexBrokerResolves")
TESTS = "^(TestGroupETL|TestGroupSimple|Test848RegexBrokerResolves)$"
TXN_ETL_SUBTESTS = tuple(f"TestTxnEtl/{name}" for name in (
    "range", "cooperative-sticky", "range/848", "sticky/848", "cooperative-sticky/static", "sticky/848/static"))
SHARE_TESTS = ("TestShareGroup", "TestShareGroupETL", "TestShareGroupAckOnClose", "TestShareGroupOffsetsAdmin",
               "TestConsumeRegexShareSkipsInternal")
RUN_TIMEOUT_S = 600


def kgo_test_binary() -> Path:
    """franz-go's kgo test binary, built once (fails, never skips, without Go or the proxy)."""
    go = shutil.which("go")
    if go is None:
        pytest.fail("franz-go's tests need the Go toolchain (`go` on PATH)", pytrace=False)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "raftka" / f"franz-go-{VERSION}"
    binary = cache / "kgo.test"
    if binary.exists():
        return binary
    cache.mkdir(parents=True, exist_ok=True)
    work = cache / "work"
    (work / "go.mod").parent.mkdir(parents=True, exist_ok=True)
    (work / "go.mod").write_text("module raftka.test/franz\n\ngo 1.22\n")
    done = subprocess.run([go, "mod", "download", "-json", f"{FRANZ_GO}@{VERSION}"], cwd=work,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.fail(f"go mod download {FRANZ_GO}@{VERSION}: {done.stderr.strip()[-500:]}", pytrace=False)
    source = Path(re.search(r'"Dir": "([^"]+)"', done.stdout).group(1))
    tree = cache / "src"
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(source, tree)
    for path in [tree, *tree.rglob("*")]:  # the module cache is read-only
        path.chmod(path.stat().st_mode | 0o200)
    built = subprocess.run([go, "test", "-c", "-o", str(binary), "./pkg/kgo"], cwd=tree,
                           capture_output=True, text=True, timeout=1200)
    if built.returncode != 0:
        pytest.fail(f"building franz-go's kgo tests: {built.stderr.strip()[-1000:]}", pytrace=False)
    return binary


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path / "server", properties={"offsets.topic.num.partitions": "3"})
    process.start()
    try:
        yield process
    finally:
        process.stop()


def subtest_results(output: str) -> dict[str, str]:
    """`--- PASS: name (1.2s)` lines: name -> PASS / FAIL / SKIP."""
    return {m.group(2): m.group(1) for m in re.finditer(r"^\s*--- (PASS|FAIL|SKIP): (\S+) ", output, re.M)}


def run_kgo_tests(server: ServerProcess, tmp_path: Path, pattern: str, expected: tuple[str, ...]) -> None:
    """Run franz-go's tests matching `pattern` against `server`; each test in `expected` must PASS."""
    binary = kgo_test_binary()
    env = {**os.environ, "KGO_SEEDS": server.bootstrap, "KGO_TEST_RF": "1", "KGO_TEST_RECORDS": "20000"}
    try:
        ran = subprocess.run([str(binary), "-test.run", pattern, "-test.v", "-test.timeout", f"{RUN_TIMEOUT_S - 20}s"],
                             cwd=binary.parent / "src" / "pkg" / "kgo", env=env, capture_output=True, text=True,
                             timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"franz-go's tests ran over {RUN_TIMEOUT_S}s: {str(exc.stdout)[-3000:]}", pytrace=False)
    (tmp_path / "franz-go.log").write_text(ran.stdout + ran.stderr)
    results = subtest_results(ran.stdout)
    outcome = {name: results.get(name, "NOT RUN") for name in expected}
    assert set(outcome.values()) == {"PASS"}, (outcome, f"log: {tmp_path / 'franz-go.log'}")


def test_franz_go_kip848_tests_run_and_pass(server: ServerProcess, tmp_path: Path) -> None:
    run_kgo_tests(server, tmp_path, TESTS, KIP848_SUBTESTS)


def test_franz_go_txn_etl_runs_and_passes(server: ServerProcess, tmp_path: Path) -> None:
    run_kgo_tests(server, tmp_path, "^TestTxnEtl$", ("TestTxnEtl", *TXN_ETL_SUBTESTS))


def test_franz_go_share_group_tests_run_and_pass(server: ServerProcess, tmp_path: Path) -> None:
    run_kgo_tests(server, tmp_path, f"^({'|'.join(SHARE_TESTS)})$", SHARE_TESTS)


def test_subtest_results_reads_go_test_output() -> None:
    out = "--- PASS: TestGroupSimple (0.00s)\n    --- SKIP: TestGroupSimple/848 (0.77s)\n    --- FAIL: X/y (1s)\n"
    assert subtest_results(out) == {"TestGroupSimple": "PASS", "TestGroupSimple/848": "SKIP", "X/y": "FAIL"}
