"""litellm, imported on first use.

litellm takes seconds to import, so ``import tracescore`` and ``import tracescore.scorers``
never import it; the first judge call does, on a worker thread so that the loop's other tasks
(timeouts among them) keep running meanwhile.
"""

from __future__ import annotations

import asyncio
import sys
from types import ModuleType


def load_litellm() -> ModuleType:
    """Import litellm (once; later calls are dictionary look-ups) and quiet its banners.

    Returns:
        The ``litellm`` module.
    """
    import litellm

    # litellm prints "Give Feedback / Get Help" banners to stdout on every failed call; judge
    # failures are reported through tracescore's exceptions instead.
    litellm.suppress_debug_info = True
    return litellm


async def load_litellm_async() -> ModuleType:
    """``load_litellm()`` from a coroutine, without blocking the loop for the first import.

    Returns:
        The ``litellm`` module.
    """
    if "litellm" in sys.modules:
        return load_litellm()
    return await asyncio.to_thread(load_litellm)
