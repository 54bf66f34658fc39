// MathJax settings for the display maths made by docs/hooks.py from the docstrings' ".. math::" blocks
window.MathJax = {
  tex: { inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]], processEscapes: true },
  options: { ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex" }
};
