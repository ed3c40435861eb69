"""The documents' relative links and #anchors resolve (GitHub's heading slugs), and every flag
the README's Commands block shows is one the CLI defines: moving text between README.md and
docs/ must not leave a dangling link or a flag the code no longer has."""
import glob
import os
import re

from conftest import SOURCE

LINK = re.compile(r"\]\(([^)\s]+)\)")


def documents():
    """README.md, docs/**/*.md and python/README.md, as paths under SOURCE."""
    paths = [os.path.join(SOURCE, "README.md"), os.path.join(SOURCE, "python", "README.md")]
    paths += glob.glob(os.path.join(SOURCE, "docs", "**", "*.md"), recursive=True)
    return sorted(os.path.normpath(p) for p in paths)


def anchors(path):
    """GitHub's anchors for the headings of a Markdown file: lower case, punctuation other than
    '-' and '_' dropped, spaces to '-', repeats numbered -1, -2, ...; headings in code fences
    are not headings."""
    out, seen, fence = set(), {}, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fence = not fence
                continue
            m = None if fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1)).lower()
            slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else "%s-%d" % (slug, n))
    return out


def broken_links(path):
    """'target: why' for each relative link of path that does not resolve."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    # Links inside code are not links: drop fenced blocks, then inline code spans.
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    bad = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(dest):
            bad.append("%s: no such file" % target)
        elif anchor and (not dest.endswith(".md") or anchor not in anchors(dest)):
            bad.append("%s: no heading with that anchor" % target)
    return bad


def test_every_relative_link_and_anchor_resolves():
    bad = ["%s: %s" % (os.path.relpath(p, SOURCE), b) for p in documents() for b in broken_links(p)]
    assert not bad, "\n".join(bad)


def test_anchor_slugs_follow_githubs_rules():
    # Headings of BENCHMARKS.md that other files link to, with backticks, dashes and repeats.
    got = anchors(os.path.join(SOURCE, "docs", "BENCHMARKS.md"))
    for slug in ("per-rank-memory-model", "tgn-with-disttgls-static-node-memory---static-memory",
                 "partitioning-an-ogbn-products-sized-graph-k--8", "--method-ptscotch-on-p-ranks"):
        assert slug in got, slug


def test_the_readme_shows_only_flags_the_cli_defines():
    with open(os.path.join(SOURCE, "README.md"), encoding="utf-8") as f:
        block = re.search(r"## Commands\n\n```sh\n(.*?)```", f.read(), re.S).group(1)
    defined = set()
    for cc in glob.glob(os.path.join(SOURCE, "tools", "halo", "cmd_*.cc")):
        with open(cc, encoding="utf-8") as f:
            defined.update(re.findall(r'"(?:-[a-zA-Z],)?(--[a-z0-9-]+)"', f.read()))
    shown = set(re.findall(r"--[a-z0-9-]+", block))
    assert shown, "no flags found in the README's Commands block"
    assert not shown - defined, sorted(shown - defined)
