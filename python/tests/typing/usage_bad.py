"""Uses of shmkv a type checker must refuse; each line that must fail ends
in "# E: " and a part of mypy's message (tests/test_typing.py)."""
import shmkv


def misuse(cache: shmkv.Cache) -> None:
    n: int = cache.get_str("k")  # E: Incompatible types in assignment
    cache.get_f32list("k")[0].upper()  # E: "float" has no attribute "upper"
    shmkv.build("x", [], format=2)  # E: Unexpected keyword argument "format"
    shmkv.build("x", [], threads="4")  # E: Argument "threads"
    shmkv.build("x", [], on_duplicate="keep")  # E: Argument "on_duplicate"
    shmkv.build("x", [], tsv_expires=True)  # E: Unexpected keyword argument "tsv_expires"
    shmkv.join("x", ["a"], created=1)  # E: Unexpected keyword argument "created"
    shmkv.build("x", [], tsv_removes=True)  # E: Unexpected keyword argument "tsv_removes"
    shmkv.apply("b", ["d"], "o", delta_of="b")  # E: Unexpected keyword argument "delta_of"
    shmkv.diff("a", "b")  # E: Missing positional argument "out"
    cache["k"] = 1  # E: Unsupported target for indexed assignment
