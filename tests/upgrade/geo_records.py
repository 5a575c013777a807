#!/usr/bin/env python3
"""Writes the geonames-like typed records of the upgrade test as JSONL.

Deterministic (a fixed-seed generator, no clock): the same bytes on every
run, so that tests/upgrade/geo_v1.shmkv, the format 1 image built from them
before format 1 was retired, stays the image of exactly these records.
Every value type, non-ASCII text, keys of 1 to 300 bytes, values inline and
out of line, and values repeated across records (deduplicated where large).

Usage: geo_records.py [N]    (default 1000 places, about 9,700 records)
"""
import base64
import json
import random
import sys

LICENSE = ("Data from a synthetic gazetteer made for the shmkv upgrade test; "
           "any resemblance to real places is the point. ") * 4
ZONES = ["Europe/Berlin", "Europe/Zürich", "Asia/Tōkyō", "America/São_Paulo",
         "Africa/Nairobi", "Pacific/Auckland", "Asia/Kolkata", "America/New_York"]
SYLL = ["ka", "ra", "mo", "zü", "lé", "san", "ber", "ost", "wa", "ngu", "ti", "ō",
        "ça", "ville", "burg", "dorf", "grad", "abad", "pur", "hafen"]


def name(rng):
    s = "".join(rng.choice(SYLL) for _ in range(rng.randint(2, 5)))
    return s[0].upper() + s[1:]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rng = random.Random(20261205)
    out = sys.stdout
    out.write(json.dumps({"shmkv_meta": {"name": "geo", "seed": 7, "created": 1764892800}})
              + "\n")
    for i in range(n):
        gid = 1000000 + i * 7
        p = f"geo:{gid}:"
        nm = name(rng)
        recs = [
            (p + "name", nm, "string"),
            (p + "ascii", nm.encode("ascii", "replace").decode(), "string"),
            (p + "lat", round(rng.uniform(-90, 90), 6), "f64"),
            (p + "lon", round(rng.uniform(-180, 180), 6), "f64"),
            (p + "population", rng.choice([0, rng.randint(1, 10**7)]), "i64"),
            (p + "capital", rng.random() < 0.02, "bool"),
            (p + "tz", rng.choice(ZONES), "string"),
            (p + "alt", [name(rng) for _ in range(rng.randint(0, 6))], "strlist"),
            (p + "emb", [rng.choice([0.5, -0.25, 1.0, 0.125]) * rng.randint(-8, 8)
                         for _ in range(rng.choice([4, 16, 64]))], "f32list"),
        ]
        if i % 5 == 0:
            recs.append((p + "elev", [rng.randint(-400, 8848) for _ in range(rng.randint(1, 40))],
                         "i64list"))
            recs.append((p + "bbox", [round(rng.uniform(-1, 1), 3) for _ in range(4)], "f64list"))
        if i % 7 == 0:
            recs.append((p + "license", LICENSE, "string"))
            recs.append((p + "raw", base64.b64encode(bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))).decode(),
                         "bytes"))
        if i % 97 == 0:
            recs.append((p + "k" * rng.randint(200, 280), nm, "string"))
        if i % 131 == 0:
            recs.append((p + "history", " ".join(name(rng) for _ in range(80)), "string"))
        for k, v, t in recs:
            out.write(json.dumps({"key": k, "value": v, "type": t}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
