"""The documentation holds together, checked without a network: README.md is a front door and
BENCHMARKS.md holds only the latest figures, every relative link of README.md and of docs/*.md
reaches a file of the repository and an anchor of that page, every alert's runbook link has its
section in docs/runbooks.md, every long page starts with its contents, every command a page shows
is written as it runs from a checkout (`.venv/bin/stream-app` or a `make` target, never a bare
`stream-app`), and no page points outside the repository (`../shared/`). External http(s) links
are not fetched."""

from __future__ import annotations

import fnmatch
import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

from tests.helpers import REPO

README = REPO / "README.md"
BENCHMARKS = REPO / "BENCHMARKS.md"
RUNBOOKS = REPO / "docs" / "runbooks.md"
RULES = REPO / "prometheus" / "rules" / "evalstream.rules.yml"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
README_MAX_LINES = 90
README_SAYS_WHAT_BY_LINE = 30  # its "## What evalstream is" heading
BENCHMARKS_MAX_LINES = 200  # the latest figures; earlier runs are in docs/benchmark-history.md
# Files of the repository root the README's documentation table links, besides every docs/*.md.
ROOT_PAGES = ["BENCHMARKS.md", "CHANGELOG.md"]
CONTENTS_FROM_LINES = 200  # a page longer than this starts with its contents

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1[`~]*[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
HTML_ANCHOR = re.compile(r"""<a\s+(?:[^>]*\s)?(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
SECTION = re.compile(r"""(?:<a\s+id="([^"]+)"></a>\s*\n)?^## +(.+?)[ \t]*$""", re.M)
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)
SHELL_FENCES = {"", "sh", "bash", "shell", "console", "zsh"}  # info strings of shell blocks
# `stream-app` where a shell would run it: at the start of a command (a line, or after a pipe,
# `;`, `&&`, `(` or `$(`), after a `$ ` prompt and environment assignments. `.venv/bin/stream-app`
# is not matched: a `/` is no command boundary.
BARE_STREAM_APP = re.compile(
    r"(?:^|[|;&(])[ \t]*(?:\$[ \t]+)?(?:(?:env|exec|nohup|time)[ \t]+)?"
    r"(?:[A-Za-z_]\w*=\S*[ \t]+)*stream-app(?![\w./-])",
    re.M,
)
OUTSIDE_REPO = re.compile(r"(?:\.\./)+shared/|(?<![\w./-])shared/data\b")


def _prose(text: str) -> str:
    """The page without its fenced code blocks (kept as blank lines, so line numbers hold)."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def _heading_text(raw: str) -> str:
    """What a heading shows: links as their text, HTML tags and code-span backticks dropped."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    return re.sub(r"<[^>]+>", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation other than '-' and '_' dropped,
    each space a '-'."""
    return re.sub(r"[^\w\- ]", "", _heading_text(heading).strip().lower()).replace(" ", "-")


def headings(text: str) -> list[tuple[int, str]]:
    """(level, text) of every heading outside code blocks, in order."""
    return [(len(m.group(1)), m.group(2)) for m in HEADING.finditer(_prose(text))]


def anchors(text: str) -> set[str]:
    """Every anchor a page has: its headings' slugs (a repeated one gets -1, -2, …) and its
    explicit `<a id="…">` tags."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, heading in headings(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    found |= set(HTML_ANCHOR.findall(CODE_SPAN.sub("", _prose(text))))
    return found


def links(text: str) -> list[tuple[int, str]]:
    """(line, target) of every Markdown link outside code, images included."""
    prose = _prose(text)
    prose = CODE_SPAN.sub(lambda m: "\n" * m.group(0).count("\n"), prose)
    return [(prose.count("\n", 0, m.start()) + 1, m.group(2)) for m in LINK.finditer(prose)]


def _blank(text: str) -> str:
    """`text` as blank lines: what is cut from a page keeps its line numbers."""
    return "\n" * text.count("\n")


def _fence_info(block: str) -> str:
    """The language of a fenced block: the first word after its opening fence."""
    opening = block.split("\n", 1)[0].strip().lstrip("`~")
    return opening.split()[0].lower() if opening.split() else ""


def bare_commands(text: str) -> list[tuple[int, str]]:
    """(line, code) of every bare `stream-app` a reader would paste into a shell: in a shell
    block (```sh, ```console, or a block with no language), at the start of a command; in a code
    span of the prose, invoked with arguments (`stream-app worker`). They fail after `make demo`,
    which installs `stream-app` into `.venv/bin`, not onto PATH. Not counted: headings and link
    texts (they name a section, such as `stream-app replay`), the program's bare name
    (`stream-app`), and blocks of another language."""
    found = []
    for block in FENCE.finditer(text):
        if _fence_info(block.group(0)) not in SHELL_FENCES:
            continue
        first = text.count("\n", 0, block.start()) + 1
        for offset, line in enumerate(block.group(0).splitlines()[1:-1], start=1):
            if BARE_STREAM_APP.search(line):
                found.append((first + offset, line.strip()))
    prose = HEADING.sub(lambda m: _blank(m.group(0)), _prose(text))
    prose = LINK.sub(lambda m: _blank(m.group(0)), prose)
    for span in CODE_SPAN.finditer(prose):
        code = " ".join(span.group(0).strip("`").split())
        match = BARE_STREAM_APP.search(code)
        if match and code[match.end() :].strip():
            found.append((prose.count("\n", 0, span.start()) + 1, code))
    return sorted(found)


def outside_paths(text: str) -> list[tuple[int, str]]:
    """(line, the line) of every place a page points outside the repository (`../shared/...`):
    the bundled runs are `stream_app/data/scylla-runs.jsonl`."""
    lines = text.splitlines()
    return [
        (number, lines[number - 1].strip())
        for number in sorted(
            {text.count("\n", 0, m.start()) + 1 for m in OUTSIDE_REPO.finditer(text)}
        )
    ]


def broken_links(page: Path, root: Path = REPO) -> list[str]:
    """What is wrong with each relative link of `page`: a missing file (or one outside `root`),
    or a missing anchor."""
    problems = []
    for line, target in links(page.read_text(encoding="utf-8")):
        where = f"{page.relative_to(root)}:{line}: ({target})"
        if not target:
            problems.append(f"{where} an empty link")
            continue
        if SCHEME.match(target) or target.startswith("//"):
            continue  # external: not fetched
        path, _, anchor = target.partition("#")
        dest = page if not path else (page.parent / unquote(path)).resolve()
        if not dest.is_relative_to(root):
            problems.append(f"{where} leaves the repository")
            continue
        if not dest.exists():
            problems.append(f"{where} no such file")
            continue
        if anchor:
            if dest.suffix != ".md" or not dest.is_file():
                problems.append(f"{where} an anchor into a page that is not Markdown")
            elif unquote(anchor) not in anchors(dest.read_text(encoding="utf-8")):
                problems.append(f"{where} no anchor #{anchor} in {dest.relative_to(root)}")
    return problems


# The checker itself, on the cases the pages rely on.


def test_slugs_follow_githubs_rules() -> None:
    assert slug("The event: `RunCompleted`") == "the-event-runcompleted"
    assert slug("Alerts without Docker: `make observe`") == "alerts-without-docker-make-observe"
    assert slug("pass@k — `stream_app/metrics/pass_at_k.py`") == (
        "passk--stream_appmetricspass_at_kpy"
    )
    assert slug("Prometheus metrics (`/metrics` on `web_bind:web_port`)") == (
        "prometheus-metrics-metrics-on-web_bindweb_port"
    )
    assert slug("Grade of *tier* [see](x.md)") == "grade-of-tier-see"


def test_anchors_count_repeated_headings_and_skip_code() -> None:
    text = (
        "# A\n\n## Notes\n\n```sh\n# not a heading\n```\n\n## Notes\n\n### Notes\n\n"
        '<a id="runbook-x"></a>\n\n`<a id="in-code"></a>`\n'
    )
    assert anchors(text) == {"a", "notes", "notes-1", "notes-2", "runbook-x"}


def test_links_are_found_across_lines_and_not_in_code() -> None:
    text = (
        "See [the\nsection](#b) and [`X`](x.md#y).\n\n```\n[no](z.md)\n```\n"
        "`[no](w.md)` ![img](i.png) [ext](https://example.org/a#b)\n"
    )
    assert links(text) == [(1, "#b"), (2, "x.md#y"), (7, "i.png"), (7, "https://example.org/a#b")]


def test_broken_links_are_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "other.md").write_text("# Other\n\n## A section\n")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "# Page\n\n[ok](#page) [ok](../other.md#a-section) [ok](../other.md) "
        "[ok](https://example.org/x#y)\n"
        "[a](#nowhere) [b](no-such-file.md) [c](../other.md#nowhere) [d](../../outside.md)\n"
    )
    assert broken_links(page, tmp_path) == [
        "docs/page.md:4: (#nowhere) no anchor #nowhere in docs/page.md",
        "docs/page.md:4: (no-such-file.md) no such file",
        "docs/page.md:4: (../other.md#nowhere) no anchor #nowhere in other.md",
        "docs/page.md:4: (../../outside.md) leaves the repository",
    ]


def test_bare_commands_are_found_where_a_shell_runs_them() -> None:
    text = (
        "# `stream-app replay`\n\n"
        "Run `stream-app worker`, or `.venv/bin/stream-app worker`, or `make demo`; the\n"
        "`stream-app` commands; [`stream-app replay`](#stream-app-replay); `stream-app\n"
        "status EXPERIMENT`.\n\n"
        "```sh\n"
        "stream-app replay runs.jsonl        # bare\n"
        ".venv/bin/stream-app replay runs.jsonl\n"
        "X=1 stream-app backtest runs.jsonl | jq .pages\n"
        "cat runs.jsonl | stream-app replay -\n"
        "# stream-app in a comment\n"
        "```\n\n"
        "```\n$ stream-app status\nstream-app-replay is no command\n```\n\n"
        '```json\n{"stream-app": 1}\n```\n'
    )
    assert bare_commands(text) == [
        (3, "stream-app worker"),
        (4, "stream-app status EXPERIMENT"),
        (8, "stream-app replay runs.jsonl        # bare"),
        (10, "X=1 stream-app backtest runs.jsonl | jq .pages"),
        (11, "cat runs.jsonl | stream-app replay -"),
        (16, "$ stream-app status"),
    ]


def test_paths_outside_the_repository_are_found() -> None:
    text = (
        "make replay DATA=../shared/data/x.jsonl\nthe runs in `shared/data`\n`stream_app/data/`\n"
    )
    assert outside_paths(text) == [
        (1, "make replay DATA=../shared/data/x.jsonl"),
        (2, "the runs in `shared/data`"),
    ]


# The pages.


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    problems = broken_links(page)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_a_long_page_starts_with_its_contents(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    lines = text.count("\n")
    if lines <= CONTENTS_FROM_LINES:
        return
    sections = SECTION.findall(_prose(text))  # (explicit anchor or "", title) of each "## "
    assert sections, f"{page.name} ({lines} lines) has no sections"
    assert sections[0][1] == "Contents", f"{page.name} ({lines} lines) must start with its Contents"
    start = text.index("## Contents")
    end = text.find("\n## ", start + 1)
    listed = {target for _, target in links(text[start:end])}
    for anchor, title in sections[1:]:
        assert {f"#{slug(title)}", f"#{anchor}"} & listed, (
            f"{page.name}: '## {title}' is not in its Contents"
        )


def test_readme_is_a_front_door() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES})"
    # It is evalstream's, and says early what evalstream is and for whom.
    assert text.splitlines()[0] == "# evalstream", "README.md must start with '# evalstream'"
    prose = _prose(text)
    what = re.search(r"^## What evalstream is[ \t]*$", prose, re.M)
    assert what is not None, "README.md has no '## What evalstream is'"
    at = prose.count("\n", 0, what.start()) + 1
    assert at <= README_SAYS_WHAT_BY_LINE, (
        f"README.md says what evalstream is at line {at} (by line {README_SAYS_WHAT_BY_LINE})"
    )
    # Its first code block: the two commands that work on a fresh machine.
    first = FENCE.search(text)
    assert first is not None
    commands = [line.split("#")[0].strip() for line in first.group(0).splitlines()[1:-1]]
    assert commands == ["make demo", "make test"]
    # Its commands are `.venv/bin/stream-app …` (test_every_command_a_page_shows_runs_when_pasted);
    # it says once how to type the bare name instead.
    assert text.count(". .venv/bin/activate") == 1
    # It leads into every page of docs/, the benchmark's figures and the changelog.
    linked = {target.partition("#")[0] for _, target in links(text)}
    for name in [f"docs/{page.name}" for page in PAGES[1:]] + ROOT_PAGES:
        assert name in linked, f"README.md does not link {name}"


def test_benchmarks_holds_the_latest_figures_only() -> None:
    """BENCHMARKS.md is the latest run's figures and profile; earlier runs move to
    docs/benchmark-history.md."""
    lines = BENCHMARKS.read_text(encoding="utf-8").count("\n")
    assert lines <= BENCHMARKS_MAX_LINES, (
        f"BENCHMARKS.md has {lines} lines (at most {BENCHMARKS_MAX_LINES}): "
        "move earlier runs to docs/benchmark-history.md"
    )


def stream_app_commands(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The commands `stream-app --help` lists (the entry point pyproject.toml names)."""
    import importlib
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["stream-app"].partition(":")
    with pytest.raises(SystemExit):
        getattr(importlib.import_module(module), function)(["--help"])
    usage = capsys.readouterr().out
    listed = usage.split("positional arguments:")[1].split("options:")[0]
    return re.findall(r"^ {4}([a-z][a-z-]*)\b", listed, re.M)


def test_every_stream_app_command_is_listed_in_the_readme(
    capsys: pytest.CaptureFixture[str],
) -> None:
    commands = stream_app_commands(capsys)
    assert "worker" in commands
    assert "demo" in commands
    text = README.read_text(encoding="utf-8")
    for command in commands:
        assert f"`.venv/bin/stream-app {command}" in text, (
            f"README.md does not list .venv/bin/stream-app {command}"
        )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_command_a_page_shows_runs_when_pasted(page: Path) -> None:
    """`make demo` installs `stream-app` into `.venv/bin`, not onto PATH: a page shows
    `.venv/bin/stream-app` (the README says once how `. .venv/bin/activate` adds it to PATH)."""
    bare = bare_commands(page.read_text(encoding="utf-8"))
    assert not bare, f"{page.relative_to(REPO)}: bare stream-app, write .venv/bin/stream-app: " + (
        "; ".join(f"line {line}: {code}" for line, code in bare)
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_page_points_outside_the_repository(page: Path) -> None:
    """A clone has no `../shared/`: the bundled runs are `stream_app/data/scylla-runs.jsonl`."""
    outside = outside_paths(page.read_text(encoding="utf-8"))
    assert not outside, f"{page.relative_to(REPO)} points outside the repository: " + (
        "; ".join(f"line {line}: {text}" for line, text in outside)
    )


def test_every_alert_has_its_runbook_section() -> None:
    rules = yaml.safe_load(RULES.read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    assert alerts
    assert RUNBOOKS.exists(), "docs/runbooks.md is missing"
    have = anchors(RUNBOOKS.read_text(encoding="utf-8"))
    for alert in alerts:
        base, anchor = alert["annotations"]["runbook_url"].split("#", 1)
        assert base == '{{ or $externalLabels.runbook_base_url "docs/runbooks.md" }}'
        assert anchor in have, f"docs/runbooks.md has no #{anchor} for {alert['alert']}"


NAMED_PATH = re.compile(
    r"`((?:stream_app|schemas|tests|bench|scripts|grafana|prometheus)/[\w./-]+)`"
)
NAMED_MODULE = re.compile(r"`(stream_app(?:\.\w+)+)`")


def named_paths(text: str) -> set[str]:
    """The repository paths a page names in code spans (`stream_app/...`, `tests/...`), and the
    modules it names as dotted paths (`stream_app.core.replay`)."""
    paths = set(NAMED_PATH.findall(text))
    for dotted in NAMED_MODULE.findall(text):
        parts = dotted.split(".")
        # the longest prefix that is a module or package; the rest names something inside it
        for cut in range(len(parts), 1, -1):
            base = REPO / Path(*parts[:cut])
            if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
                break
        else:
            paths.add(dotted.replace(".", "/") + ".py")
    return paths


def _tracked_files() -> list[str]:
    """The files a fresh clone has: a path that exists only in this checkout (a virtualenv, a
    build product) must not count, or the test passes here and fails in CI."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    return [name for name in listed.split("\0") if name]


def _is_tracked(path: str, tracked: list[str]) -> bool:
    """A tracked file, a folder holding one, or a glob matching one."""
    return any(
        name == path or name.startswith(path + "/") or fnmatch.fnmatchcase(name, path)
        for name in tracked
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_path_a_page_names_exists(page: Path) -> None:
    """Code moves; the docs that name it must move with it."""
    tracked = _tracked_files()
    missing = sorted(
        path
        for path in named_paths(page.read_text())
        if not _is_tracked(path.split("#")[0].rstrip("/"), tracked)
    )
    assert not missing, f"{page.relative_to(REPO)} names paths that do not exist: {missing}"
