"""The README is what a newcomer reads in five minutes, and every link in it and in docs/ leads
somewhere: a file of the checkout, and a heading of it where the link names one."""

import re

from conftest import ROOT

LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lstrip("#").strip().lower())
    return text.replace(" ", "-")


def anchors(path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {slug(line) for line in text.splitlines() if line.startswith("#")}


def test_the_readme_is_short_and_points_to_docs():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    for name in ("cli", "cells", "stacks", "fit", "records", "runners", "troubleshooting", "testing", "benchmarks"):
        assert f"(docs/{name}.md)" in "\n".join(lines), name


def broken_links(pages) -> list[str]:
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"(https?|mailto):", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.name}: {target} (no such heading)")
    return broken


def test_every_link_of_the_readme_and_docs_leads_somewhere():
    broken = broken_links([ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    assert not broken, "\n".join(broken)


def test_the_check_sees_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\n## `compat explain`: what does this error mean?\n")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#compat-explain-what-does-this-error-mean) [gone](c.md) [no heading](a.md#nowhere)\n")
    assert broken_links([page]) == ["b.md: c.md (no such file)", "b.md: a.md#nowhere (no such heading)"]


def test_the_readmes_counts_are_the_datas():
    """Issue 43, item 12: the counts a newcomer reads are the ones the data has (the times beside
    them are measured and dated in the README itself)."""
    import tomllib

    from harness.catalog.matrix import MatrixData, load_matrix

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    data = MatrixData.load(ROOT / "matrix")
    cpu = {
        c.id
        for g in ("cpu", "cpu-dist", "cpu-quant", "cpu-qlora-dist")
        for c in load_matrix(ROOT / "matrix" / f"{g}.toml", data).cells
    }
    quick = load_matrix(ROOT / "matrix" / "quick.toml", data).cells
    issues = tomllib.loads((ROOT / "matrix" / "known_issues.toml").read_text(encoding="utf-8"))["issue"]
    public = [i for i in issues if not i.get("found_by")]
    assert f"`tox -e cpu-matrix` runs {len(cpu)} cells" in text
    assert f"{len(quick)} real tiny fine-tunes" in text
    assert f"The base has {len(public)} known issues from public reports" in text
