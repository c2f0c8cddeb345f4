"""What a Spark user meets first: Spark's default save mode, and Python workers that run an
interpreter without the SDK's dependencies."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.integration


def test_default_save_mode_is_refused_by_spark_and_append_is_the_way(spark: Any) -> None:
    """Spark's documented ``df.write.format("kafka")...save()`` uses ErrorIfExists. PySpark's
    Python data sources cannot take it: the JVM (DataFrameWriter, for a TableProvider with
    batch writes) refuses every mode but append and overwrite before the source's Python
    code runs, so neither a fix nor a hint can come from sdk.spark; the README says to use
    mode("append"). If a PySpark release lifts this, this test fails: update the README."""
    from pyspark.errors import AnalysisException

    df = spark.createDataFrame([("k", "v")], "key string, value string")
    for mode in (None, "errorifexists", "ignore"):
        writer = (df.write.format("kafka_sdk")
                  .option("kafka.bootstrap.servers", "127.0.0.1:9")  # never contacted
                  .option("topic", "t"))
        if mode is not None:
            writer = writer.mode(mode)
        with pytest.raises(AnalysisException) as refused:
            writer.save()
        assert refused.value.getCondition() == "UNSUPPORTED_DATA_SOURCE_SAVE_MODE"
        assert '"Append" or "Overwrite"' in str(refused.value)


def test_worker_without_pyarrow_names_its_interpreter_and_the_setting(tmp_path: Path) -> None:
    """Workers run spark.pyspark.python / PYSPARK_PYTHON, not the driver's interpreter. One
    without pyarrow (here the same Python without its site-packages) gets an error naming
    the interpreter it runs and the setting that fixes it. Its own SparkContext, so its own
    process (the session fixture's context has the right interpreter)."""
    bare = tmp_path / "python-without-site-packages"
    bare.write_text(f"#!/bin/sh\nexec {os.path.realpath(sys.executable)} -S \"$@\"\n")
    bare.chmod(0o755)
    script = textwrap.dedent(f"""
        from pyspark.sql import SparkSession
        from sdk.spark import register
        spark = (SparkSession.builder.master("local[1]")
                 .config("spark.ui.enabled", "false")
                 .config("spark.pyspark.python", {str(bare)!r}).getOrCreate())
        spark.sparkContext.setLogLevel("OFF")
        register(spark)
        try:
            (spark.read.format("kafka_sdk").option("kafka.bootstrap.servers", "127.0.0.1:9")
             .option("subscribe", "t").load().collect())
        except Exception as exc:
            print("REFUSED:", exc)
        spark.stop()
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON",
                                                            "PYSPARK_DRIVER_PYTHON")}
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT, env=env, timeout=300)
    assert "REFUSED:" in run.stdout, run.stdout + run.stderr
    refused = run.stdout.split("REFUSED:", 1)[1]  # Spark's error with the worker's traceback
    named = re.search(r"pyarrow is missing in the Python running here: (\S+) \(Python ", refused)
    assert named is not None, refused
    assert os.path.realpath(named.group(1)) == os.path.realpath(sys.executable)
    assert "PYSPARK_PYTHON" in refused and "spark.pyspark.python" in refused
