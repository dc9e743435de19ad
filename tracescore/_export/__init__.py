"""The export path: a byte-bounded queue (``processor``) and one export thread (``worker``),
batches bounded by encoded size (``size``), handed to the exporter with a retry spool on disk
for what it fails (``sender``, ``spool``, ``codec``). ``configure()`` builds one
``ExportProcessor`` per configuration."""

from __future__ import annotations

from .processor import DROP_CAUSES, ExportProcessor
from .sender import EXPORTED
from .spool import Spool

__all__ = ["DROP_CAUSES", "EXPORTED", "ExportProcessor", "Spool"]
