"""The README and docs/ read as one manual: every relative link names a file of the repository,
and every #anchor a heading of the page it points to (GitHub's heading slugs)."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from coordinator.config import Config

from tests.support.process import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def links():
    for page in PAGES:
        for target in LINK.findall(FENCE.sub("", page.read_text())):
            if not re.match(r"[a-z]+:", target):
                yield pytest.param(page, target, id=f"{page.name}->{target}")


@pytest.mark.parametrize(("page", "target"), list(links()))
def test_link_resolves(page, target):
    file, _, anchor = target.partition("#")
    path = (page.parent / file).resolve() if file else page
    assert path.exists(), f"{page.relative_to(ROOT)} links to {target}: no such file"
    if anchor and path.suffix == ".md":
        assert anchor in anchors(path), f"{page.relative_to(ROOT)} links to {target}: no such heading"


def test_no_history_in_the_manual():
    """The manual describes the software as it is: no sessions, rounds or issue numbers."""
    history = re.compile(
        r"\b(first|second|third|fourth|fifth|tenth|this|last|next|earlier|previous) "
        r"sessions?\b|\bissue #?[0-9]+|\bround [0-9]+",
        re.I,
    )
    found = [f"{page.name}: {m.group(0)}" for page in PAGES for m in history.finditer(page.read_text())]
    assert not found


def test_readme_links_every_page():
    """A newcomer finds every page of docs/ from the README."""
    readme = (ROOT / "README.md").read_text()
    assert [p.name for p in PAGES[1:] if f"(docs/{p.name}" not in readme] == []


def flag_tables():
    """Rows of the tables headed `| flag | default |`: (page, flags, defaults)."""
    for page in PAGES:
        in_table = False
        for line in page.read_text().splitlines():
            if re.match(r"\|\s*flag[^|]*\|\s*default\s*\|", line):
                in_table = True
            elif not line.startswith("|"):
                in_table = False
            elif in_table and not line.startswith("|---"):
                cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip("|"))]
                flags = re.findall(r"`(--[a-z][a-z-]*[a-z])", cells[0])
                if flags:
                    yield pytest.param(page, flags, cells[1], id=f"{page.name}:{flags[0]}")


@pytest.mark.parametrize(("page", "flags", "defaults"), list(flag_tables()))
def test_flag_tables_say_what_the_server_takes(page, flags, defaults):
    """Every flag a settings table names is one `python -m coordinator` takes, and a default
    given per flag (comma-separated, in order) is the server's."""
    config = {"--" + f.name.replace("_", "-"): f.default for f in fields(Config)}
    config |= {"--no-" + flag[2:]: not default for flag, default in config.items() if isinstance(default, bool)}
    unknown = [f for f in flags if f not in config and not re.search(r"-(min|max)$", f)]
    assert not unknown, f"{page.name} names flags the server does not take: {unknown}"
    values = [re.sub(r"\(.*\)|`", "", v).strip() for v in defaults.split(", ")]
    if len(values) != len(flags):
        return  # a default said in words ("Kafka's", "see above")
    for flag, value in zip(flags, values):
        default = config.get(flag)
        if value in ("", "on", "off") or default is None or isinstance(default, bool):
            continue
        expect = Path(value) if isinstance(default, Path) else type(default)(value)
        assert expect == default, f"{page.name}: {flag} defaults to {default!r}, not {value!r}"


SH_BLOCK = re.compile(r"^```(?:sh|bash|console)\n(.*?)^```", re.S | re.M)


def shell_lines():
    """The commands of the pages' shell blocks: continuation lines joined, comments dropped."""
    for page in PAGES:
        for block in SH_BLOCK.findall(page.read_text()):
            for line in block.replace("\\\n", " ").splitlines():
                line = re.split(r"(?:^|\s)#", line, maxsplit=1)[0].strip()
                if line:
                    yield page, line


def kcoord_lines():
    for page, line in shell_lines():
        for command in re.split(r"[|;]|&&", line):
            words = command.split()
            if "kcoord" in words:
                yield pytest.param(page, words[words.index("kcoord") + 1 :], id=f"{page.name}:{command.strip()}")


@pytest.mark.parametrize(("page", "words"), list(kcoord_lines()))
def test_kcoord_lines_name_its_commands_and_options(page, words):
    """Every `kcoord ...` a page shows names a subcommand kcoord has, with options it takes."""
    import click

    from coordinator.admin.cli import main

    command, unknown, value_next = main, [], False
    for word in words:
        if value_next:
            value_next = False
        elif isinstance(command, click.Group) and not word.startswith(("-", "[")):
            assert word in command.commands, f"{page.name}: kcoord has no subcommand {word!r} here: {words}"
            command = command.commands[word]
        elif word.strip("[").startswith("--"):  # (an option goes to the (sub)command it follows)
            flag = word.strip("[]").split("=")[0]
            option = next((p for p in command.params if flag in p.opts + p.secondary_opts), None)
            if option is None:
                unknown.append(flag)
            value_next = option is not None and not getattr(option, "is_flag", False) and "=" not in word
    assert not isinstance(command, click.Group) or words == [], f"{page.name}: kcoord {' '.join(words)}: no command"
    assert not unknown, f"{page.name}: kcoord {' '.join(words)}: no such options {unknown}"


def server_lines():
    for page, line in shell_lines():
        found = re.search(r"-m coordinator(\s.*)?$", line)
        if found:
            yield pytest.param(page, (found.group(1) or "").split(), id=f"{page.name}:{line}")


@pytest.mark.parametrize(("page", "words"), list(server_lines()))
def test_server_lines_name_its_flags(page, words):
    """Every `python -m coordinator ...` a page shows names flags the server takes."""
    config = {"--" + f.name.replace("_", "-") for f in fields(Config)} | {"--help", "-h"}
    config |= {"--no-" + f.name.replace("_", "-") for f in fields(Config) if isinstance(f.default, bool)}
    flags = {w.strip("[]").split("=")[0] for w in words if w.strip("[").startswith("--")}
    assert not flags - config, f"{page.name}: python -m coordinator takes no {sorted(flags - config)}"


def test_every_kcoord_command_and_option_says_what_it_does():
    """`kcoord ... --help` is the manual at hand: every command and option has a help line."""
    import click

    from coordinator.admin.cli import main

    silent, stack = [], [(["kcoord"], main)]
    while stack:
        path, command = stack.pop()
        if not (command.help or "").strip():
            silent.append(" ".join(path))
        for p in command.params:
            if isinstance(p, click.Option) and not (p.help or "").strip():
                silent.append(f"{' '.join(path)} {p.opts[0]}")
        if isinstance(command, click.Group):
            stack += [([*path, name], sub) for name, sub in command.commands.items()]
    assert silent == []


def test_make_targets_named_are_the_makefiles():
    """Every `make TARGET` the manual names (in code, or a shell line of its own) is a target
    of this repository's Makefile."""
    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.M))
    named = {(page.name, t) for page in PAGES for t in re.findall(r"`make ([a-z][a-z-]*)", page.read_text())}
    named |= {(page.name, line.split()[1]) for page, line in shell_lines() if re.match(r"make [a-z]", line)}
    assert sorted(n for n in named if n[1] not in targets) == []
