"""read_file, write_file, edit_file: text files inside the paths a PathPolicy allows.

Each reports the files it read or changed (`files_read`, `files_modified`) so the checkpoint can carry
the recent-files list (SPEC A2). Edits are exact string replacements: `old` must occur exactly once,
and the result shows a short diff.

Tools that do not destroy work, as in Claude Code: write_file overwrites an existing file
only when the model has read it in this session and it has not changed since (a `ReadLedger` shared
by the three tools); appending (for logs and changelogs) and creating a file need no read. Files are
opened without following links and never changed through a second hard link (PathPolicy).
With an `ApprovalPolicy` (avibe/tools/approval.py), write_file and edit_file refuse a
path the person's deny rules cover, and in ask mode wait for the person's approval, before anything is
opened for writing. The PathPolicy carries the session's sandbox: in read-only nothing is
changed, and Avibe's own files are neither read nor changed in the sandboxed modes; what a deny rule
matches is refused by identity too, so a renamed parent does not get around it.

By job: `text` (the ledger, a file's bytes as lines, diffs), `read` (read_file), `preview` (the approval
of a change, before anything is written), `write` (write_file), `edit` (edit_file and its hints).
"""

from avibe.tools.files.edit import EditFile
from avibe.tools.files.read import ReadFile
from avibe.tools.files.text import ReadLedger
from avibe.tools.files.write import WriteFile

__all__ = ["EditFile", "ReadFile", "ReadLedger", "WriteFile"]
