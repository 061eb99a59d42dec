"""Apache Kafka 4.4.0's jars from Maven Central, fetched once into a cache outside the repository.

`kafka_jars()` writes a small pom (kafka_2.13, kafka-tools, kafka-clients and a log4j binding
for slf4j) and runs `mvn dependency:copy-dependencies` into
`${RAFTKA_KAFKA_CACHE:-${XDG_CACHE_HOME:-~/.cache}/raftka/kafka-4.4.0}/libs`. A `COMPLETE`
stamp, written last, marks a finished fetch: an interrupted one is redone. A file lock keeps
pytest-xdist workers from fetching at the same time. Kafka's `bin/*.sh` scripts are not in the
jars: the tools and the server run as `java -cp '<libs>/*' <MainClass>` (`java_command`).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

KAFKA_VERSION = "4.4.0"
LOG4J_VERSION = "2.25.5"  # the log4j-core version kafka_2.13 4.4.0 depends on
CACHE_ENV = "RAFTKA_KAFKA_CACHE"
FETCH_TIMEOUT_S = 900.0

ARTIFACTS = (
    ("org.apache.kafka", "kafka_2.13", KAFKA_VERSION),       # the server (kafka.Kafka, StorageTool)
    ("org.apache.kafka", "kafka-tools", KAFKA_VERSION),      # the CLI tools (org.apache.kafka.tools)
    ("org.apache.kafka", "kafka-clients", KAFKA_VERSION),
    # Kafka's release tarball ships this binding in libs/; without it the tools print SLF4J's
    # "no providers" warning and log nothing.
    ("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION),
)

HERE = Path(__file__).resolve().parent
# As Kafka's bin/kafka-run-class.sh passes config/tools-log4j2.yaml to the tools (WARN to
# stderr) and config/log4j2.yaml to the server.
TOOLS_LOG4J = HERE / "log4j2-tools.properties"
SERVER_LOG4J = HERE / "log4j2-server.properties"


class KafkaJarsUnavailable(RuntimeError):
    """The jars could not be fetched; the message is one line saying why."""


@dataclass(frozen=True)
class KafkaJars:
    libs: Path

    @property
    def classpath(self) -> str:
        return f"{self.libs}/*"

    def java_command(self, main_class: str, *, heap: str = "192m", server: bool = False) -> list[str]:
        """`java` running `main_class` from the jars with a bounded heap. The tools run JIT
        tier 1 only (they live for a second or two; C2 would only burn the shared cores)."""
        log4j = SERVER_LOG4J if server else TOOLS_LOG4J
        return [java_binary(), f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j}",
                "-cp", self.classpath, main_class]


def die_with_parent() -> None:
    """For Popen's preexec_fn: the child gets SIGTERM when the process (thread) that started it
    dies (Linux PR_SET_PDEATHSIG), so a killed pytest leaves no JVM behind."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except OSError:
        pass


def java_binary() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java") or "java"


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "raftka" / f"kafka-{KAFKA_VERSION}"


def pom_xml() -> str:
    deps = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>" for g, a, v in ARTIFACTS)
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>raftka.differential</groupId>
  <artifactId>kafka-{KAFKA_VERSION}-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}
  </dependencies>
</project>
"""


def kafka_jars(directory: Path | None = None) -> KafkaJars:
    """The cached jars, fetching them first if no complete fetch is there.

    Raises KafkaJarsUnavailable (one line: mvn missing, its exit status and last error line,
    or a timeout) when they cannot be had."""
    directory = directory or cache_dir()
    libs = directory / "libs"
    stamp = directory / "COMPLETE"
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be fetching: wait for it
        if not stamp.exists():
            _fetch(directory, libs)
            stamp.write_text("".join(f"{p.name}\n" for p in sorted(libs.glob("*.jar"))))
    return KafkaJars(libs)


def _fetch(directory: Path, libs: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaJarsUnavailable(
            f"cannot fetch Kafka {KAFKA_VERSION}'s jars: `mvn` is not on PATH (install Maven, "
            f"or put the jars in {libs} and touch {directory / 'COMPLETE'})")
    (directory / "pom.xml").write_text(pom_xml())
    shutil.rmtree(libs, ignore_errors=True)
    command = [mvn, "-B", "-q", "-Dstyle.color=never", "-f", str(directory / "pom.xml"), "dependency:copy-dependencies",
               f"-DoutputDirectory={libs}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise KafkaJarsUnavailable(f"cannot fetch Kafka {KAFKA_VERSION}'s jars: `mvn "
                                   f"dependency:copy-dependencies` ran over {FETCH_TIMEOUT_S:.0f}s") from None
    if done.returncode != 0 or not (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").exists():
        plain = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
        lines = [line for line in plain.splitlines() if line.strip()]
        errors = [line for line in lines if "ERROR" in line] or lines or ["(no output)"]
        raise KafkaJarsUnavailable(
            f"cannot fetch Kafka {KAFKA_VERSION}'s jars from Maven Central: `mvn "
            f"dependency:copy-dependencies` exited {done.returncode}: {errors[0].strip()[:300]}")
