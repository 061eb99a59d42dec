"""raftka as a user installs it: a built wheel in a fresh virtualenv, used from an app folder.

The wheel is built from the tracked source (as `pip install <clone>` would),
installed with pip into a new venv, and an application's own test suite
(`app_template/`: its own `client.py` and `log/` package beside raftka's)
runs there with pytest, asking only for the plugin's fixtures. Nothing here
runs from the repository root, which would hide packaging mistakes.

The fresh venv gets the third-party libraries (trio, confluent-kafka,
pytest, ...) from this test run's environment through a `.pth` line, so the
test needs no network; raftka itself comes only from the wheel (checked).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.support import wait_until

REPO = Path(__file__).resolve().parents[2]
APP_TEMPLATE = Path(__file__).with_name("app_template")


def _source_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout.splitlines()
    return [f for f in listed if (REPO / f).is_file()]


def _run(cmd: list[str], unset: tuple[str, ...] = (), **kwargs) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", *unset)}
    env.update(kwargs.pop("env", {}))
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"
    for name in _source_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, source / name)
    dist = root / "dist"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                  "--disable-pip-version-check", "-q", "-w", str(dist), str(source)])
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("raftka-*.whl")

    venv = root / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    pip = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                "--disable-pip-version-check", "-q", str(wheel)])
    assert pip.returncode == 0, pip.stderr
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
                .stdout.strip())
    # The libraries raftka and the app's tests use, from this environment (no network needed).
    # (Every site-packages dir on this sys.path: a venv may itself take its libraries from
    # another's through a .pth line, which a .pth-added dir would not follow.)
    dirs = [sysconfig.get_paths()["purelib"], *(p for p in sys.path if p.endswith("site-packages"))]
    (site / "zz_test_dependencies.pth").write_text("\n".join(dict.fromkeys(dirs)) + "\n")

    app = root / "app"
    shutil.copytree(APP_TEMPLATE, app, ignore=shutil.ignore_patterns("__pycache__"))
    return {"wheel": wheel, "python": python, "site": site, "app": app, "root": root}


def test_the_wheel_adds_exactly_two_top_level_names(installed):
    with zipfile.ZipFile(installed["wheel"]) as whl:
        names = whl.namelist()
    top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert top == {"raftka", "pyspark_raftka.py"}
    for layer in ("log", "client", "client/protocol", "raft_meta", "broker", "broker/handlers",
                  "spark_source", "chaos"):
        assert f"raftka/{layer}/__init__.py" in names, layer
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(installed["wheel"]) as whl:
        text = whl.read(entry_points).decode()
    assert "[pytest11]" in text and "raftka = raftka.testing.pytest_plugin" in text


def test_installed_raftka_comes_from_the_wheel_and_imports_lazily(installed):
    probe = _run([str(installed["python"]), "-c",
                  "import sys, raftka, raftka.client.protocol, pyspark_raftka as _;"
                  "print(raftka.__file__);"
                  "print(sorted(m for m in ('trio', 'threading', 'raftka.client.blocking') if m in sys.modules))"],
                 cwd=installed["app"])
    # pyspark_raftka imports the Spark source (pyspark), which may import threading: check
    # laziness without it.
    lazy = _run([str(installed["python"]), "-c",
                 "import sys, raftka, raftka.client.protocol;"
                 "print(sorted(m for m in ('trio', 'threading', 'raftka.client.blocking') if m in sys.modules))"],
                cwd=installed["app"])
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.splitlines()[0].startswith(str(installed["site"]))
    assert lazy.returncode == 0, lazy.stderr
    assert lazy.stdout.strip() == "[]"


def test_an_apps_own_tests_get_a_cluster_from_the_plugin(installed):
    """The README's promise: pip install raftka, ask for `raftka_bootstrap`, get a broker."""
    basetemp = installed["root"] / "run-serial"
    result = _run([str(installed["python"]), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   f"--basetemp={basetemp}"], cwd=installed["app"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout
    _assert_no_node_left(basetemp)


def test_each_xdist_worker_gets_its_own_cluster(installed):
    basetemp = installed["root"] / "run-xdist"
    result = _run([str(installed["python"]), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                   f"--basetemp={basetemp}"], cwd=installed["app"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout
    clusters = {p.resolve().parent for p in basetemp.glob("*/raftka-1n*/cluster.properties")}
    workers = sorted(c.parent.name for c in clusters)
    assert workers == ["popen-gw0", "popen-gw1"], workers
    _assert_no_node_left(basetemp)


def _node_pids(marker: Path) -> list[int]:
    found = subprocess.run(["pgrep", "-f", f"raftka server start --config {marker}"],
                           capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]


def _assert_no_node_left(basetemp: Path) -> None:
    assert _node_pids(basetemp) == [], "a raftka node outlived its pytest run"


def test_nodes_stop_when_pytest_is_killed(tmp_path: Path):
    """The parent-death safeguard: kill -9 the pytest process mid-test; its nodes shut down."""
    app = tmp_path / "app"
    app.mkdir()
    ready = tmp_path / "bootstrap.txt"
    (app / "test_blocks.py").write_text(
        "import time\n"
        "def test_blocks(raftka_bootstrap):\n"
        f"    open({str(ready)!r}, 'w').write(raftka_bootstrap)\n"
        "    time.sleep(600)\n")
    basetemp = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             f"--basetemp={basetemp}"], cwd=app, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: ready.exists() and ready.read_text(), timeout=60, what="the plugin's cluster")
        nodes = _node_pids(basetemp)
        assert len(nodes) == 1
    finally:
        proc.kill()
        proc.wait()
    wait_until(lambda: _node_pids(basetemp) == [], timeout=30, what="the orphaned node to shut down")



@pytest.fixture(scope="module")
def spark_input(tmp_path_factory: pytest.TempPathFactory):
    """A raftka node with a 3-partition topic `wheel-in` of ROWS records."""
    pytest.importorskip("pyspark")
    from tests.integration.cluster_support import running_cluster
    from tests.spark.spark_support import create_topic, produce
    from tests.spark.standalone import ROWS

    with running_cluster(tmp_path_factory.mktemp("raftka"), nodes=1) as node:
        create_topic(node.bootstrap_servers, "wheel-in", 3)
        yield node.bootstrap_servers, produce(node.bootstrap_servers, "wheel-in", ROWS,
                                              headers=False)


# Spark jobs in subprocesses: minutes on a loaded machine (a deadline, not a threshold).
@pytest.mark.timeout(900)
@pytest.mark.parametrize("where", ["local", "standalone"])
def test_spark_finds_the_source_from_the_wheel(installed, spark_input, tmp_path: Path, where):
    """`pip install raftka`, then a job from the app folder: format("raftka") reads and
    writes with no registration, in local mode and with executors on a standalone cluster
    (their Python workers import raftka from the wheel too)."""
    from tests.spark.spark_support import create_topic
    from tests.spark.standalone import check_job, run_job, standalone_cluster

    bootstrap, produced = spark_input
    python = str(installed["python"])
    outs = [f"wheel-{where}-out", f"wheel-{where}-stream-out"]
    for topic in outs:
        create_topic(bootstrap, topic, 3)
    args = {"bootstrap": bootstrap, "source": "wheel-in", "batch_out": outs[0],
            "stream_out": outs[1], "checkpoint": str(tmp_path / "checkpoint")}
    if where == "local":
        got = run_job(python, installed["app"] / "spark-local", {**args, "master": "local[2]"})
        assert got["task_jvms"] == [got["driver_jvm"]]
    else:
        with standalone_cluster(tmp_path / "spark", python) as cluster:
            got = run_job(python, installed["app"] / "spark-cluster",
                          {**args, "master": cluster.master_url})
        assert got["driver_jvm"] not in got["task_jvms"]
    check_job(bootstrap, produced, got, outs)
def test_the_installed_sdk_prints_nothing(installed, tmp_path: Path):
    """A library is silent: the installed SDK used by an app (create, produce, consume) writes
    nothing to stdout or stderr unless the app configures logging."""
    from tests.integration.sdk_broker import one_node_server
    from tests.integration.test_sdk_logging import APP

    with one_node_server(tmp_path / "broker") as bootstrap:
        ran = _run([str(installed["python"]), "-c", APP, bootstrap, "installed-quiet"], cwd=installed["app"])
    assert ran.returncode == 0, ran.stderr
    assert (ran.stdout, ran.stderr) == ("", "")


# One Spark session in a subprocess: minutes on a loaded machine (a deadline, not a threshold).
@pytest.mark.timeout(600)
def test_the_readme_spark_blocks_run_as_written_from_the_wheel(installed, tmp_path: Path):
    """#31: the documented Spark read and write blocks (docs/spark.md), run as written (the address and the /tmp
    paths changed) by the wheel's venv from the app folder, with no venv on PATH: the default
    save mode and a `python3` on PATH without raftka both broke them."""
    import re

    from raftka.client.blocking import Consumer
    from raftka.client.records import TopicPartition
    from tests.integration.sdk_broker import one_node_server
    from tests.spark.spark_support import create_topic

    text = (REPO / "docs" / "spark.md").read_text()
    blocks = [re.search(r"```python\n(.*?)```", text[text.index(h):], re.S).group(1)
              for h in ("\n## Reading topics from Spark\n", "\n## Writing to topics from Spark\n")]
    with one_node_server(tmp_path / "broker") as bootstrap:
        for topic in ("events", "events-upper"):
            create_topic(bootstrap, topic, 3)
        # The streaming copy starts at the latest offsets (Spark's default): five more records.
        more = ('spark.range(5).selectExpr("CAST(id AS STRING) AS value").write.format("raftka")'
                '.mode("append").option("kafka.bootstrap.servers", "127.0.0.1:9092")'
                '.option("topic", "events").save()')
        code = "\n".join([*blocks, "query.processAllAvailable()", more, "query.processAllAvailable()",
                          "query.stop()", "spark.stop()"])
        code = code.replace("127.0.0.1:9092", bootstrap).replace("/tmp/", f"{tmp_path}/")
        # No raftka on PATH (its `python3` is the system's), and no PYSPARK_PYTHON set.
        ran = _run([str(installed["python"]), "-c", code], cwd=installed["app"],
                   env={"PATH": "/usr/bin:/bin", "SPARK_LOCAL_IP": "127.0.0.1"},
                   unset=("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"))
        assert ran.returncode == 0, ran.stderr[-3000:]
        with Consumer(bootstrap) as consumer:
            ends = consumer.end_offsets([TopicPartition(t, p) for t in ("events", "events-upper") for p in range(3)])
    totals = {t: sum(n for tp, n in ends.items() if tp.topic == t) for t in ("events", "events-upper")}
    assert totals == {"events": 1005, "events-upper": 5}, totals


def test_first_hour_mistakes_answer_in_one_line_from_the_wheel(installed, tmp_path: Path):
    """#31, as a new user meets them: the installed `raftka` command, from the app folder."""
    import socket

    from raftka.testing.local_cluster import free_port_base
    from tests.integration.sdk_broker import one_node_server

    raftka = [str(installed["python"]), "-m", "raftka"]
    secure_snippet = _run([str(installed["python"]), "-c", "from raftka import ClientSecurity, read_properties_file"],
                          cwd=installed["app"])
    assert secure_snippet.returncode == 0, secure_snippet.stderr
    with one_node_server(tmp_path / "broker") as bootstrap:
        b = ["--bootstrap-server", bootstrap]
        minus_one = _run([*raftka, "topics", "create", "--topic", "t", "--partitions", "-1", *b], cwd=installed["app"])
        assert minus_one.returncode == 2 and "x>=1" in minus_one.stderr, minus_one.stderr
        typo = _run([*raftka, "produce", "--topic", "demmo", *b], input="1\n2\n3\n", cwd=installed["app"])
        assert typo.returncode == 0, typo.stderr
        assert "topic 'demmo' did not exist; the broker created it" in typo.stderr
    base = free_port_base(1)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", base))
        holder.listen()
        busy = _run([*raftka, "cluster", "up", "--nodes", "1", "--port-base", str(base), "--data-dir",
                     str(tmp_path / "c")], cwd=installed["app"])
    assert busy.returncode == 1 and len(busy.stderr.splitlines()) == 1, busy.stderr
    assert f"127.0.0.1:{base} (node 1's client port) is in use" in busy.stderr


@pytest.mark.timeout(600)
def test_the_readme_tour_runs_from_the_wheel(installed, tmp_path: Path):
    """The README's two-minute tour, line by line, with the wheel's own `raftka` command and
    `raftka cluster up`, from a folder outside the repository (tests/integration/test_readme_blocks.py
    runs it from the checkout)."""
    from tests.integration.test_readme_blocks import run_tour

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    env["RAFTKA_LOG_LEVEL"] = "WARNING"
    folder = tmp_path / "tour"
    folder.mkdir()
    where = _run([str(installed["python"]), "-c", "import raftka; print(raftka.__file__)"], cwd=folder, env=env)
    assert where.stdout.startswith(str(installed["site"])), where.stdout + where.stderr
    run_tour(installed["python"], folder, env)


@pytest.mark.timeout(600)
def test_the_readme_python_blocks_run_from_the_wheel(installed, tmp_path: Path):
    """The README's SDK lines against the wheel's `raftka cluster up`, and its pytest example as
    an app's test file, both with the wheel's Python in a folder outside the repository."""
    from tests.integration.test_readme_blocks import README_ADDRESS, cluster_up, readme_block

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",) and not k.startswith("PYTEST_")}
    env["RAFTKA_LOG_LEVEL"] = "WARNING"
    python = installed["python"]
    with cluster_up(tmp_path / "cluster-data", python, env) as address:
        code = readme_block("The SDK in ten lines", "python").replace(README_ADDRESS, address)
        sdk = _run([str(python), "-c", code], cwd=tmp_path, env=env)
    assert sdk.returncode == 0, sdk.stderr
    assert "value=b'hello'" in sdk.stdout and "key=b'k'" in sdk.stdout, sdk.stdout

    code = readme_block("Testing your app with pytest", "python")
    name = code.splitlines()[0].removeprefix("# ").split(":")[0]  # the block opens with "# <path>: ..."
    app = tmp_path / "app"
    (app / name).parent.mkdir(parents=True)
    (app / name).write_text(code)
    ran = _run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'bt'}", name],
               cwd=app, env=env)
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout + ran.stderr
