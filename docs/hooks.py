"""MkDocs hooks of the documentation site.

* docs/maths.md and docs/design.md, which docstrings cite by those paths, are pages of the site where
  they are (MkDocs wants its docs_dir below mkdocs.yml's folder, so they cannot be in it).
* numpydoc ``.. math::`` directives come out of Markdown as a paragraph followed by an indented (code)
  block of LaTeX; that pair, and the one-line form ``.. math:: expr``, become display maths that
  docs/pages/javascripts/mathjax.js typesets.
* citations "docs/maths.md §N" and "docs/design.md §N" become links to that section of the site's page.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from markdown.extensions.toc import slugify
from mkdocs.structure.files import File

NOTES = ("maths.md", "design.md")

_BLOCK = re.compile(
    r'<p>\.\. math::</p>\s*<div class="highlight"><pre><span></span><code>(.*?)</code></pre></div>', re.S
)
_INLINE = re.compile(r"<p>\.\. math:: (.+?)</p>", re.S)


def _display(tex: str) -> str:
    return f'<div class="arithmatex">\\[{tex.strip()}\\]</div>'


_CITE = re.compile(r"docs/(maths|design)\.md §(\d+)")
_HEADING = re.compile(r"^## ((\d+)\..*)$", re.M)


@cache
def _anchors(note: str) -> dict[str, str]:
    """Section number → heading anchor of docs/<note>.md (the toc extension's default slugs)."""
    text = (Path(__file__).parent / f"{note}.md").read_text(encoding="utf-8")
    return {m.group(2): slugify(m.group(1), "-") for m in _HEADING.finditer(text)}


def _link(match: re.Match, up: str) -> str:
    note, number = match.groups()
    anchor = _anchors(note).get(number)
    if anchor is None:
        raise ValueError(f"a docstring cites {match.group(0)!r}, but docs/{note}.md has no section {number}")
    return f'<a href="{up}{note}/#{anchor}">{match.group(0)}</a>'


def on_files(files, config, **kwargs):
    for name in NOTES:
        files.append(File(name, src_dir=str(Path(__file__).parent), dest_dir=config["site_dir"],
                          use_directory_urls=config["use_directory_urls"]))
    return files


def on_page_content(html: str, page, **kwargs) -> str:
    html = _BLOCK.sub(lambda m: _display(m.group(1)), html)
    html = _INLINE.sub(lambda m: _display(m.group(1)), html)
    if page.file.src_uri in NOTES:
        return html
    up = "../" * page.url.count("/")
    return _CITE.sub(lambda m: _link(m, up), html)
