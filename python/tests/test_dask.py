"""The Dask recipe (shmkv.dask.build_dataframe): a Dask DataFrame of records
shuffled by part_of, one fragment built per part on the workers, joined on
the client: byte-identical to one shmkv.build."""
import os
import time

import pytest
import shmkv

CREATED = 1700000000


def test_dask_join_equals_single_build(tmp_path):
    try:
        import dask
        import dask.dataframe as dd
        import pandas as pd
    except ImportError:
        if os.environ.get("SHMKV_REQUIRE_ALL") == "1":
            pytest.fail("dask[dataframe] is not installed (./run test installs it)")
        pytest.skip("dask[dataframe] is not installed")
    rows = [(f"key_{i}", [i / 4.0, 1.5], "f32list" if i % 3 else "f64list") for i in range(2000)]
    rows += [("key_7", [9.0, 9.0], "f64list")]  # a duplicate: on_duplicate="first"
    pdf = pd.DataFrame(rows, columns=["key", "value", "type"])
    # dask turns object columns (the lists) into strings unless told not to
    dask.config.set({"dataframe.convert-string": False})
    ddf = dd.from_pandas(pdf, npartitions=3)
    from shmkv.dask import build_dataframe
    st = build_dataframe(ddf, str(tmp_path / "dask.shmkv"), parts=5, buckets=1000,
                         workdir=str(tmp_path / "frags"), type="type", created=CREATED,
                         on_duplicate="first")
    assert st["entries"] == 2000
    shmkv.build(tmp_path / "one.shmkv", rows, created=CREATED, buckets=1000,
                on_duplicate="first")
    assert (tmp_path / "dask.shmkv").read_bytes() == (tmp_path / "one.shmkv").read_bytes()
    assert os.listdir(tmp_path / "frags") == []
    c = shmkv.open(tmp_path / "dask.shmkv")
    assert c["key_7"].tolist() == [7 / 4.0, 1.5] and c["key_7"].typecode == "f"


def test_dask_with_expiry(tmp_path):
    try:
        import dask.dataframe as dd
        import pandas as pd
    except ImportError:
        if os.environ.get("SHMKV_REQUIRE_ALL") == "1":
            pytest.fail("dask[dataframe] is not installed (./run test installs it)")
        pytest.skip("dask[dataframe] is not installed")
    t = int(time.time()) + 86400
    rows = [(f"key_{i}", f"val_{i}", t + i) for i in range(1500)]
    ddf = dd.from_pandas(pd.DataFrame(rows, columns=["k", "v", "exp"]), npartitions=3)
    from shmkv.dask import build_dataframe
    build_dataframe(ddf, str(tmp_path / "dask.shmkv"), parts=3, buckets=600, key="k",
                    value="v", expires="exp", workdir=str(tmp_path / "frags"),
                    created=CREATED)
    shmkv.build(tmp_path / "one.shmkv", [(k, v, None, e) for k, v, e in rows],
                created=CREATED, buckets=600)
    assert (tmp_path / "dask.shmkv").read_bytes() == (tmp_path / "one.shmkv").read_bytes()
    c = shmkv.open(tmp_path / "dask.shmkv")
    assert c.expires("key_9") == t + 9 and c["key_9"] == "val_9"
