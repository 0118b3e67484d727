"""The report folder: the part of the user's disk the harness owns, and how.

A ``--report-dir`` may be any folder someone names, including ``.``, and a
report folder may be a CI artifact anyone wrote. The harness writes there
only when the folder is new or empty (it then becomes the harness's, with a
marker file) or already carries the marker of an earlier harness run; a
folder holding anything else is refused before the run starts.

What the harness may replace: a file at one of its own fixed names
(:data:`OWN_NAMES`, at the top, under ``failures/N/`` or ``shards/K/``)
that the marker lists. What it may delete: only such a file whose content
is still what the harness wrote -- the marker, :data:`MARKER`, records the
SHA-256 and size of every file it wrote, and a file whose digest no longer
matches (or that an older marker lists without one) is kept and named in a
warning. Editing the marker cannot make the harness delete ``notes.md`` or
``src/app.py``: those are not its names.

Every file is written through a temporary file created exclusively, without
following links (``O_CREAT|O_EXCL|O_NOFOLLOW``, a random name beside the
target), flushed, and renamed into place (``os.replace``), with
``report.json`` last: a run killed while writing leaves the previous
finished report complete, never a half file. Folders on the way are opened
without following links. A path the harness is about to write that is a
symbolic link, a FIFO, a device or a folder is refused (exit 2), having
changed nothing. The temporary names are listed in the marker before they
are created, so a later run removes what an interrupted one left behind.

One run at a time: a run holds an exclusive lock (``flock``) on the folder
from its claim until its report is written; a second run given the same
folder meanwhile is refused (exit 2).
"""

from ._lock import locked as locked
from ._lock import release_report_folder
from ._names import MARKER, ReportFolderError
from ._names import MARKER_VERSION as MARKER_VERSION
from ._names import OWN_NAMES as OWN_NAMES
from ._names import PLACEHOLDERS as PLACEHOLDERS
from ._names import RENDERINGS as RENDERINGS
from ._names import RUN_FILES as RUN_FILES
from ._names import is_own_path as is_own_path
from ._names import warn as warn
from ._owned import _Owned as _Owned
from ._owned import claim_report_folder, keep_file

__all__ = [
    "MARKER",
    "ReportFolderError",
    "claim_report_folder",
    "keep_file",
    "release_report_folder",
]
