"""Every ```python block of the documentation site (docs/pages/) and of README.md runs.

A page's blocks run in order in one namespace, as a reader would paste them into one session.  A block
that must not run is preceded by the line ``<!-- no-test -->`` (meant to be rare: say why beside it).
A failure names the page, the block's number and its first line in the file.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "pages"
NO_TEST = "<!-- no-test -->"
FENCE = re.compile(r"^(`{3,})(.*)$")

# guide pages that teach by example: each must hold at least one block that runs
GUIDES = ["index.md", "getting-started.md", "models.md", "algorithms.md", "handlers.md", "evidence.md", "how-far.md",
          "after-the-fit.md", "scaling.md"]


def python_blocks(path: Path) -> list[tuple[int, str, bool]]:
    """The fenced ```python blocks of a Markdown file: (first line number, source, skipped)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i].strip())
        if not m:
            i += 1
            continue
        ticks, info = m.group(1), m.group(2).strip()
        indent = len(lines[i]) - len(lines[i].lstrip())
        j = i + 1
        while j < len(lines) and lines[j].strip() != ticks:
            j += 1
        if j == len(lines):
            raise AssertionError(f"{path.name}:{i + 1}: unclosed code fence")
        if info.split(" ")[0].split("{")[0] == "python":
            prev = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            body = "\n".join(line[indent:] for line in lines[i + 1:j])
            out.append((i + 2, body, prev == NO_TEST))
        i = j + 1
    return out


def documents() -> list[Path]:
    """The site's pages (docs/pages/, and the notes docs/maths.md and docs/design.md that docs/hooks.py adds
    to it) and README.md."""
    notes = [ROOT / "docs" / "maths.md", ROOT / "docs" / "design.md"]
    return sorted(PAGES.rglob("*.md")) + notes + [ROOT / "README.md"]


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", documents(), ids=_id)
def test_page_code_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)  # blocks that write files write them here
    blocks = python_blocks(path)
    namespace: dict = {"__name__": f"docs:{path.name}"}
    ran = 0
    for k, (line, source, skipped) in enumerate(blocks, 1):
        if skipped:
            continue
        code = compile(source, f"{_id(path)}:{line}", "exec")
        try:
            exec(code, namespace)
        except Exception:
            pytest.fail(f"{_id(path)}: block {k} (line {line}) failed:\n{traceback.format_exc()}", pytrace=False)
        ran += 1
        import matplotlib.pyplot as plt

        plt.close("all")
    if path == ROOT / "README.md" or (path.parent == PAGES and path.name in GUIDES):
        assert ran >= 1, f"{_id(path)}: no ```python block ran (found {len(blocks)})"
    assert ran == sum(not s for _, _, s in blocks)


def test_guides_exist_and_skips_are_rare() -> None:
    missing = [g for g in GUIDES if not (PAGES / g).is_file()]
    assert not missing, f"guide pages missing from docs/pages: {missing}"
    blocks = [b for p in documents() for b in python_blocks(p)]
    skipped = sum(s for _, _, s in blocks)
    assert len(blocks) >= 20, f"only {len(blocks)} python blocks in the docs"
    assert skipped <= max(2, len(blocks) // 10), f"{skipped} of {len(blocks)} blocks are marked no-test"


def test_block_parser(tmp_path: Path) -> None:
    text = ("intro\n\n```python\nx = 1\n```\n\n<!-- no-test -->\n```python\nraise SystemExit\n```\n"
            "```bash\nls\n```\n!!! note\n    ```python\n    y = x + 1\n    ```\n")
    p = tmp_path / "probe.md"
    p.write_text(text, encoding="utf-8")
    assert python_blocks(p) == [(4, "x = 1", False), (9, "raise SystemExit", True), (16, "y = x + 1", False)]


def test_ci_runs_the_readme_test_command_and_the_strict_docs_build() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    command = re.search(r"Run the tests:\s*```bash\n(.+?)\n```", readme).group(1)
    assert command in ci, f"the README's test command {command!r} is not a line of .ci/run"
    assert 'pip install -e ".[docs]" && mkdocs build --strict -f docs/mkdocs.yml' in ci


def _slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension (and so MkDocs) gives a heading: inline code marks dropped,
    non-ASCII and punctuation removed, lower case, runs of spaces and hyphens made one hyphen."""
    import unicodedata

    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def _anchors(path: Path) -> set[str]:
    """The heading anchors of a Markdown file (headings inside code fences are not headings)."""
    anchors, fence = set(), None
    for line in path.read_text(encoding="utf-8").splitlines():
        m = FENCE.match(line.strip())
        if m and (fence is None or m.group(1) == fence):
            fence = m.group(1) if fence is None else None
            continue
        h = re.match(r"^#{1,6}\s+(.+?)\s*#*\s*$", line)
        if fence is None and h:
            anchors.add(_slug(h.group(1)))
    return anchors


def test_readme_links_resolve() -> None:
    """The README is a front page that points into the docs: every relative link names a file that exists
    and, where it has one, an anchor of a heading in that file."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    relative = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert len(relative) >= 10, relative
    broken = []
    for link in relative:
        target, _, anchor = link.partition("#")
        path = (ROOT / target) if target else ROOT / "README.md"
        if not path.is_file() or (anchor and anchor not in _anchors(path)):
            broken.append(link)
    assert broken == [], f"README links that point nowhere: {broken}"


def test_heading_slugs() -> None:
    assert _slug("ArviZ, LOO and WAIC") == "arviz-loo-and-waic"
    assert _slug("`summary()`") == "summary"
    assert _slug("Integrating a scale out: `fg.ScaleQuadrature`") == "integrating-a-scale-out-fgscalequadrature"
    assert _slug("1. The house") == "1-the-house"


def test_every_public_name_is_on_a_guide_page() -> None:
    """Each public name of fg, models, estimators and plots appears on some guide page, not only in the API
    reference (docs/pages/api/)."""
    import re

    import factorgraph as fg
    from factorgraph import estimators, models, plots

    text = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs" / "pages").glob("*.md"))
    public = {"fg": fg.__all__, "models": models.__all__, "estimators": estimators.__all__,
              "plots": [n for n in dir(plots) if not n.startswith("_") and callable(getattr(plots, n))
                        and getattr(getattr(plots, n), "__module__", "") == plots.__name__]}
    missing = {where: [n for n in names if not re.search(rf"\b{re.escape(n)}\b", text)]
               for where, names in public.items()}
    assert not any(missing.values()), f"public names no guide page mentions: {missing}"
