"""An answer worked out once for a pytest run and for the pytest runs it starts: kept in an environment variable
beside the key it depends on, and taken from there by any process that finds it under the same key. A leaf."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any


def handed_down(variable: str, key: list, compute: Callable[[], Any]) -> Any:
    """compute()'s answer for `key`: the one the environment variable `variable` holds when it was stored there
    under the same key, else compute()'s, stored there for the processes this one starts. Key and answer are JSON."""
    try:
        handed = json.loads(os.environ.get(variable, ""))
        if handed["key"] == key:
            return handed["answer"]
    except (ValueError, TypeError, KeyError):
        pass
    answer = compute()
    os.environ[variable] = json.dumps({"key": key, "answer": answer})
    return answer
