"""Every relative link of README.md and docs/ names a file that exists, and its #anchor a heading of
that page (GitHub's slug: lower case, punctuation dropped, spaces to hyphens)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$", text, re.M)}


def broken(page: Path) -> list[str]:
    out = []
    name = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page.name
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            out.append(f"{name}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            out.append(f"{name}: {target}: no such heading")
    return out


def test_slug_is_githubs():
    assert slug("Commands in these docs") == "commands-in-these-docs"
    assert slug("`hwvit sim --stress`: the variants") == "hwvit-sim---stress-the-variants"


def test_a_broken_link_is_found(tmp_path):
    page = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("# Title\n\n## Some part\n")
    page.write_text("[ok](b.md#some-part) [gone](c.md) [bad](b.md#nothing) [web](https://x.org/y)\n")
    assert [line.split(": ", 2)[1] for line in broken(page)] == ["c.md", "b.md#nothing"]


def test_docs_links_resolve():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [line for page in pages for line in broken(page)]
    assert not found, "\n".join(found)
