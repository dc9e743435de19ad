"""The export path: a byte-bounded queue and one export thread (``processor``), batches bounded
by encoded size (``size``), and a retry spool on disk for what the exporter fails (``spool``,
``codec``). ``configure()`` builds one ``ExportProcessor`` per configuration."""

from __future__ import annotations

from .processor import DROP_CAUSES, EXPORTED, ExportProcessor
from .spool import Spool

__all__ = ["DROP_CAUSES", "EXPORTED", "ExportProcessor", "Spool"]
