from typing import Any

def build_dataframe(df: Any, out: str, *, parts: int, buckets: int, workdir: str,
                    key: str = "key", value: str = "value", type: str | None = None,
                    created: int | None = None, seed: int | None = None,
                    name: str | None = None, dedup: bool | None = None,
                    on_duplicate: str = "error", lossy_f32: bool = False,
                    threads: int = 1, memory_limit: int | None = None,
                    format: int | None = None, expires: str | None = None,
                    keep_fragments: bool = False) -> dict[str, Any]: ...
