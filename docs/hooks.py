"""MkDocs hook: render the numpydoc ``.. math::`` blocks of docstrings with MathJax.

mkdocstrings renders docstrings as Markdown, where a ``.. math::`` directive comes out as a paragraph
followed by an indented (code) block of LaTeX.  This hook turns that pair, and the one-line form
``.. math:: expr``, into display maths that docs/pages/javascripts/mathjax.js typesets.
"""

from __future__ import annotations

import re

_BLOCK = re.compile(
    r'<p>\.\. math::</p>\s*<div class="highlight"><pre><span></span><code>(.*?)</code></pre></div>', re.S
)
_INLINE = re.compile(r"<p>\.\. math:: (.+?)</p>", re.S)


def _display(tex: str) -> str:
    return f'<div class="arithmatex">\\[{tex.strip()}\\]</div>'


def on_page_content(html: str, **kwargs) -> str:
    html = _BLOCK.sub(lambda m: _display(m.group(1)), html)
    return _INLINE.sub(lambda m: _display(m.group(1)), html)
