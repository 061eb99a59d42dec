"""A Spark standalone cluster from the installed pyspark: one master and one worker.

Started with pyspark's own `bin/spark-class` (no Spark download), on 127.0.0.1 with
free ports, bounded to 2 cores and 2 GiB for executors; the worker starts each
application's executor in its own JVM, with its own Python workers. Stopped (the
process groups it started) when the `with` block ends.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.spark.spark_support import bytecode_spark_home, read_back
from tests.support import free_port, wait_until


@dataclass(frozen=True)
class Standalone:
    master_url: str
    web_url: str
    worker_dir: Path

    def state(self) -> dict:
        with urllib.request.urlopen(self.web_url + "/json/", timeout=5) as reply:
            return json.load(reply)


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@contextmanager
def standalone_cluster(workdir: Path, python: str, cores: int = 2, memory: str = "2g"
                       ) -> Iterator[Standalone]:
    workdir.mkdir(parents=True, exist_ok=True)
    # This venv's pyspark: its Python workers import it with its bytecode (spark_support).
    home = bytecode_spark_home(workdir) if imports_our_pyspark(python) else spark_home()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_WORKER_DIR": str(workdir / "work"), "SPARK_LOG_DIR": str(workdir / "logs"),
           "PYSPARK_PYTHON": python, "SPARK_NO_DAEMONIZE": "1"}
    env.pop("PYTHONPATH", None)
    port, web, worker_web = free_port(), free_port(), free_port()
    procs: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> None:
        log = open(workdir / f"{name}.log", "wb")  # noqa: SIM115 (closed with the process)
        procs.append(subprocess.Popen([str(home / "bin" / "spark-class"), *args], env=env,
                                      cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True))
        log.close()

    cluster = Standalone(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web}",
                         workdir / "work")
    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
              "--port", str(port), "--webui-port", str(web))
        wait_until(lambda: cluster.state().get("status") == "ALIVE", timeout=120,
                   interval=0.5, what="the Spark master")
        start("worker", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
              "--cores", str(cores), "--memory", memory, "--webui-port", str(worker_web),
              "--work-dir", str(workdir / "work"), cluster.master_url)
        wait_until(lambda: cluster.state().get("aliveworkers") == 1, timeout=120,
                   interval=0.5, what="the Spark worker to register")
        yield cluster
    finally:
        for proc in reversed(procs):  # the worker first: it stops its executors
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(procs):
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def imports_our_pyspark(python: str) -> bool:
    """Whether `python` imports this venv's pyspark: this interpreter, or one that takes its
    libraries from this venv (the installed-wheel tests' venv, through a .pth line)."""
    import pyspark

    if python == sys.executable:
        return True
    found = subprocess.run([python, "-c", "import pyspark; print(pyspark.__file__)"], capture_output=True,
                           text=True, timeout=120, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    return found.returncode == 0 and Path(found.stdout.strip()).resolve() == Path(pyspark.__file__).resolve()


JOB = Path(__file__).with_name("spark_job.py")
ROWS = 3000


def run_job(python: str, workdir: Path, args: dict) -> dict:
    """Run spark_job.py with `python` from `workdir` (a copy of the script, no PYTHONPATH)."""
    workdir.mkdir(parents=True, exist_ok=True)
    script = shutil.copy(JOB, workdir / "job.py")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    env.update(PYSPARK_PYTHON=python, SPARK_LOCAL_IP="127.0.0.1", HOME=str(workdir))
    if imports_our_pyspark(python):  # its Python workers import pyspark with its bytecode
        env["SPARK_HOME"] = str(bytecode_spark_home(workdir))
    else:  # another venv's own pyspark, not ours
        env.pop("SPARK_HOME", None)
    done = subprocess.run([python, str(script), json.dumps(args)], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_job(bootstrap: str, produced: list[dict], got: dict, outs: list[str]) -> None:
    assert got["rows"] == sorted([r["partition"], r["offset"], r["value"].decode()]
                                 for r in produced)
    assert got["warm_count"] == len(produced)
    for topic in outs:
        written = read_back(bootstrap, topic)
        assert len(written) == len(produced), topic
        for p in range(3):
            assert [r["value"] for r in written if r["partition"] == p] == [
                r["value"] for r in sorted(produced, key=lambda r: r["offset"])
                if r["partition"] == p], (topic, p)
