"""The PySpark recipe (shmkv.spark.build_dataframe): local[2], a DataFrame
of records repartitioned by part_of, one fragment built per partition on the
executors, joined on the driver: byte-identical to one shmkv.build."""
import os
import sys
import time

import pytest
import shmkv

CREATED = 1700000000


def spark_session():
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        if os.environ.get("SHMKV_REQUIRE_ALL") == "1":
            pytest.fail("pyspark is not installed (./run test installs it)")
        pytest.skip("pyspark is not installed")
    # the executors' Python workers must import this shmkv: this interpreter
    # (on a cluster: an environment with the package, builder/README.md)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    return (SparkSession.builder.master("local[2]").appName("shmkv-test")
            .config("spark.pyspark.python", sys.executable)
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "4").getOrCreate())


def test_spark_join_equals_single_build(tmp_path):
    spark = spark_session()
    try:
        rows = [(f"key_{i}", [i / 4.0, 1.5, float(i % 7)], "f32list" if i % 3 else "f64list")
                for i in range(3000)]
        rows += [("key_5", [9.0, 9.0, 9.0], "f64list")]  # a duplicate: on_duplicate="last"
        # three input partitions in input order, none in part order: the recipe
        # routes every record to its part and keeps input order within it
        df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 3),
                                   "key string, value array<double>, type string")
        from shmkv.spark import build_dataframe
        st = build_dataframe(df, str(tmp_path / "spark.shmkv"), parts=4, buckets=1500,
                             workdir=str(tmp_path / "frags"), type="type", created=CREATED,
                             name="feat", on_duplicate="last")
        assert st["entries"] == 3000
        shmkv.build(tmp_path / "one.shmkv", rows, created=CREATED, name="feat", buckets=1500,
                    on_duplicate="last")
        assert (tmp_path / "spark.shmkv").read_bytes() == (tmp_path / "one.shmkv").read_bytes()
        assert os.listdir(tmp_path / "frags") == []
        c = shmkv.open(tmp_path / "spark.shmkv")
        assert c["key_5"].tolist() == [9.0, 9.0, 9.0] and c["key_4"].typecode == "f"
    finally:
        spark.stop()


def test_spark_with_expiry(tmp_path):
    spark = spark_session()
    try:
        t = int(time.time()) + 86400
        rows = [(f"key_{i}", f"val_{i}", t + i if i % 4 else None) for i in range(1500)]
        df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 3),
                                   "k string, v string, exp long")
        from shmkv.spark import build_dataframe
        build_dataframe(df, str(tmp_path / "spark.shmkv"), parts=3, buckets=600, key="k",
                        value="v", expires="exp", workdir=str(tmp_path / "frags"),
                        created=CREATED)
        shmkv.build(tmp_path / "one.shmkv", [(k, v, None, e) for k, v, e in rows],
                    created=CREATED, buckets=600)
        assert (tmp_path / "spark.shmkv").read_bytes() == (tmp_path / "one.shmkv").read_bytes()
        c = shmkv.open(tmp_path / "spark.shmkv")
        assert c.expires("key_9") == t + 9 and c.expires("key_8") is None
    finally:
        spark.stop()
