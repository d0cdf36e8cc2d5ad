"""An eval results folder in the inspector: the report's tables and plots.

The folder is what `vibe eval --out DIR` writes: report.md (tables), PNG plots, results.jsonl. The report
is shown as written (Markdown to HTML, raw HTML in it not obeyed); without a report.md it is rendered from
results.jsonl with the eval's own `render_markdown`. Only files directly in the folder are served, and
only the kinds a report holds."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from markdown_it import MarkdownIt

SERVED: Final = frozenset({".png", ".svg", ".md", ".jsonl", ".json", ".csv"})


@dataclass(frozen=True, slots=True)
class EvalFolder:
    folder: Path

    def file(self, name: str) -> Path | None:
        if "/" in name or "\\" in name or name.startswith("."):
            return None
        path = self.folder / name
        return path if path.suffix.lower() in SERVED and path.is_file() else None

    def markdown(self) -> str:
        report = self.folder / "report.md"
        if report.is_file():
            return report.read_text(encoding="utf-8")
        results = self.folder / "results.jsonl"
        if not results.is_file():
            return f"# No eval results\n\n`{self.folder}` holds no report.md and no results.jsonl."
        from avibe.evals.report import render_markdown

        rows: list[dict[str, Any]] = [
            json.loads(line) for line in results.read_text(encoding="utf-8").splitlines() if line.strip()
        ]
        plots = sorted(p for p in self.folder.iterdir() if p.suffix == ".png")
        return render_markdown(rows, {"results": str(results)}, plots)

    def report_html(self, files_url: str) -> str:
        """The report as HTML; an image or link to a file of the folder points at `files_url` + its name."""
        md = MarkdownIt("commonmark", {"html": False}).enable("table")
        tokens = md.parse(self.markdown())
        for token in tokens:
            for child in token.children or ():
                for attr in ("src", "href"):
                    value = child.attrGet(attr)
                    if isinstance(value, str) and self.file(Path(value).name) and "://" not in value:
                        child.attrSet(attr, files_url + Path(value).name)
        return str(md.renderer.render(tokens, md.options, {}))
