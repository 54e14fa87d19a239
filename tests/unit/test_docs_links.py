"""The README and the pages under docs/ point only at things that exist.

``make docs`` builds the site with ``mkdocs build --strict``, which fails on a link between pages, or
to an anchor, that leads nowhere, and on a page left out of the ``nav``. It cannot see what lies
outside docs/: the README's links into docs/, and the repository's files that the pages name (a
module, a script, a results file), which are written as code (``app/ledger/writer.py``) since the
site does not serve them. This test checks both, and the links between pages again, without building
the site: every relative link's file exists and its anchor is a heading of that file, as MkDocs
spells headings' anchors; every path the text names under one of the repository's top-level folders
exists; and every page is in ``mkdocs.yml``'s nav and linked from the README.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify, unique

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
DOCUMENTS = [ROOT / "README.md", *PAGES]
#: The folders whose paths the text names as code; a code span starting with one of them is a path.
TOP_LEVEL = ("app/", "domain/", "projections/", "scripts/", "tests/", "examples/", "docs/", ".ci/")
TOP_FILES = {"Makefile", "pyproject.toml", "alembic.ini", "mkdocs.yml", "README.md"}

_FENCE = re.compile(r"^(```|~~~)")
_LINK = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`\n]+)`")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _prose(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks (a link or path inside one is an example)."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        lines.append("" if fenced else line)
    return lines


def _heading_text(markdown: str) -> str:
    """A heading's text as the table of contents sees it: links reduced to their text, emphasis and
    code marks dropped (the code's own text stays)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    return text.replace("`", "").replace("**", "").replace("*", "")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in ``path``, as MkDocs' table of contents makes them (Python-Markdown's
    ``slugify``, a repeated one suffixed ``_1``, ``_2``, …)."""
    found: set[str] = set()
    for line in _prose(path):
        match = _HEADING.match(line)
        if match:
            found.add(unique(slugify(_heading_text(match.group(2)), "-"), found))
    return found


def _links(path: Path) -> list[tuple[int, str]]:
    out = []
    for number, line in enumerate(_prose(path), 1):
        without_code = _CODE.sub("", line)
        out += [(number, target) for target in _LINK.findall(without_code)]
    return out


def _expanded(path: str) -> list[str]:
    """``a/{b,c}/`` as the shell expands it: ``a/b/`` and ``a/c/``."""
    parts = re.split(r"\{([^}]*)\}", path)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(combination) for combination in itertools.product(*choices)]


def _named_paths(path: Path) -> list[tuple[int, str]]:
    """The repository paths the text names as code: ``app/ledger/writer.py``, ``scripts/bench/``."""
    out = []
    for number, line in enumerate(_prose(path), 1):
        for span in _CODE.findall(line):
            candidate = span.strip()
            if candidate in TOP_FILES:
                out.append((number, candidate))
            elif (
                candidate.startswith(TOP_LEVEL)
                and not re.search(r"[\s*<>…|]|\.\.\.", candidate)
                and not candidate.endswith("_")
            ):
                out += [(number, p.split("::")[0]) for p in _expanded(candidate)]
    return out


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(document):
    broken = []
    own = anchors(document)
    for number, target in _links(document):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:: not this test's business
            continue
        file_part, _, anchor = target.partition("#")
        linked = (document.parent / file_part).resolve() if file_part else document
        if not linked.exists():
            broken.append(f"line {number}: {target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in (own if linked == document else anchors(linked)):
            broken.append(f"line {number}: {target}: no heading with that anchor in {linked.name}")
    assert not broken, f"{document.relative_to(ROOT)}:\n" + "\n".join(broken)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_named_exists(document):
    missing = [f"line {number}: {named}" for number, named in _named_paths(document) if not (ROOT / named).exists()]
    assert not missing, f"{document.relative_to(ROOT)} names paths that do not exist:\n" + "\n".join(missing)


def test_every_module_the_layout_names_exists():
    """The Layout page's tree names files by their folder (``app/store/  event_store.py …``): each name
    must be a file, or a folder when it ends in ``/``, somewhere under the folder whose lines it is on
    (or at the top of the repository: ``imports only domain/``, ``named by alembic.ini``)."""
    text = (DOCS / "layout.md").read_text(encoding="utf-8")
    tree = text.split("```")[1]
    missing, folder = [], None
    for line in filter(str.strip, tree.splitlines()):
        starts = re.match(r"^([\w./]+/)\s", line)
        if starts:
            folder = ROOT / starts.group(1)
            assert folder.is_dir(), f"layout.md: {starts.group(1)} is not a folder"
            line = line[len(starts.group(1)) :]
        assert folder is not None, "layout.md's tree must start with a folder"
        for name in re.findall(r"(?<![\w/.])([a-z_]\w*\.(?:py|toml|ini)|[a-z_]\w*/)(?![\w/])", line):
            if name.endswith("/"):
                found = (ROOT / name).is_dir() or any(p.is_dir() for p in folder.rglob(name.rstrip("/")))
            else:
                found = (ROOT / name).is_file() or any(folder.rglob(name))
            if not found:
                missing.append(f"{folder.relative_to(ROOT)}/ … {name}")
    assert not missing, "layout.md names what is not in the tree:\n" + "\n".join(missing)


def test_every_page_is_in_the_nav_and_linked_from_the_readme():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    in_nav = set(re.findall(r":\s*([\w-]+\.md)\s*$", config, re.MULTILINE))
    readme = {target.partition("#")[0] for _, target in _links(ROOT / "README.md")}
    for page in PAGES:
        assert page.name in in_nav, f"docs/{page.name} is not in mkdocs.yml's nav"
        if page.name != "index.md":  # the site's home page: the README is the repository's
            assert f"docs/{page.name}" in readme, f"the README does not link docs/{page.name}"


def test_the_checks_find_what_is_broken(tmp_path):
    """The checks above can fail: a missing file, a missing anchor and a missing path are found."""
    page = tmp_path / "page.md"
    page.write_text(
        "# A title\n\n## Two words\n\nSee [here](#two-words), [there](#nowhere), [gone](gone.md),\n"
        "`app/ledger/writer.py`, `app/no_such_module.py`, `app/translate/{chat,nothing}/`.\n\n"
        "```\n[inside a fence](nowhere.md)\n```\n",
        encoding="utf-8",
    )
    assert anchors(page) == {"a-title", "two-words"}
    assert [t for _, t in _links(page)] == ["#two-words", "#nowhere", "gone.md"]
    named = [p for _, p in _named_paths(page)]
    assert named == ["app/ledger/writer.py", "app/no_such_module.py", "app/translate/chat/", "app/translate/nothing/"]
    assert [p for p in named if not (ROOT / p).exists()] == ["app/no_such_module.py", "app/translate/nothing/"]
    assert unique(slugify("Two words", "-"), {"two-words"}) == "two-words_1"
