"""A class-data-sharing archive of the Spark driver JVM, made by the first job and mapped by the next.

A fresh JVM spends most of a short job's first seconds finding, reading and verifying Spark's
classes in some 250 jars. Java 17 can write the classes a run loaded to an archive when the JVM
exits (-XX:ArchiveClassesAtExit) and map that archive at the next start (-XX:SharedArchiveFile).
The archive is only valid for the same JVM and class path, so its name is derived from both. A
JVM that cannot use it (another Java, a changed class path, a damaged file) starts without it,
silently; nothing depends on it but speed.

Only a JVM this process launches for itself gets the options (not one under spark-submit, nor a
session someone else started): the archive is written while that JVM exits, which `stop` waits for.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # a rejected archive must not print on the job's output
DUMP_TIMEOUT_S = 180.0


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kafka-coordinator"


def java_binary() -> Path | None:
    """The java that pyspark launches: $JAVA_HOME's, else the one on PATH (None: none found)."""
    java = Path(os.environ["JAVA_HOME"]) / "bin" / "java" if os.environ.get("JAVA_HOME") else None
    java = java if java and java.exists() else (Path(found) if (found := shutil.which("java")) else None)
    return None if java is None else java.resolve()


def archive_path(java_options: str) -> Path | None:
    """Where the archive for this pyspark, this java and these options lives (None: no java found)."""
    import pyspark

    java = java_binary()
    if java is None:
        return None
    stat = java.stat()
    spark_home = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent).resolve()
    key = "\0".join(
        (pyspark.__version__, str(spark_home), str(java), str(stat.st_size), str(stat.st_mtime_ns), java_options)
    )
    return cache_dir() / f"spark-{pyspark.__version__}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


class Archive:
    """The options to add to the driver JVM's, and, when the archive is being made, the step
    that turns the JVM's dump into the archive once the JVM has exited."""

    def __init__(self, java_options: str) -> None:
        self.path: Path | None = None
        self.dumping: Path | None = None
        self.options = ""
        try:
            self.path = archive_path(java_options)
            if self.path is None:
                return
            if self.path.exists():
                self.options = f"-XX:SharedArchiveFile={self.path} {QUIET}"
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _remove_stale_dumps(self.path)
            self.dumping = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            self.options = f"-XX:ArchiveClassesAtExit={self.dumping} {QUIET}"
        except OSError:  # no writable cache dir: run without an archive
            self.dumping, self.options = None, ""

    def stop(self, spark: SparkSession) -> None:
        """Stop the session; if this run writes the archive, let the JVM exit (it dumps its
        classes then) and put the archive in place."""
        spark.stop()
        if self.dumping is None:
            return
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        proc = getattr(gateway, "proc", None)
        try:
            if proc is None or gateway is None:
                return
            gateway.shutdown()  # the JVM exits when its stdin closes (PythonGatewayServer)
            SparkContext._gateway = SparkContext._jvm = None
            proc.stdin.close()
            if proc.wait(timeout=DUMP_TIMEOUT_S) == 0 and self.path is not None and self.dumping.exists():
                os.replace(self.dumping, self.path)
        except Exception:  # the archive is only an optimisation: a failed dump must not fail the job
            pass
        finally:
            self.dumping.unlink(missing_ok=True)


def _remove_stale_dumps(path: Path, older_than_s: float = 3600.0) -> None:
    """Dumps of runs that were killed before they finished."""
    for tmp in path.parent.glob(f"{path.name}.*.tmp"):
        try:
            if time.time() - tmp.stat().st_mtime > older_than_s:
                tmp.unlink()
        except OSError:
            pass
