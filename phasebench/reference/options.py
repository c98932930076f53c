"""docs/reference/options.md, written from the plugin's own option definitions: every module the plugin loads
(phasebench.plugin.pytest_plugins) declares its options on a fresh pytest parser, as pytest does, and each option's
name, argument, default and help text are read back from the parser, the help text expanded as `pytest --help`
expands it (%(default)s)."""

from __future__ import annotations

import argparse
import importlib
import re
from dataclasses import dataclass

from _pytest.config.argparsing import Parser

import phasebench.plugin
from phasebench.reference.markdown import link_docs

GROUP = "phasebench"
BENCHMARK_OPTIONS = "https://pytest-benchmark.readthedocs.io/en/latest/usage.html#commandline-options"
DEFAULT_CLAUSE = re.compile(r"\(default: ")


@dataclass(frozen=True)
class Option:
    """One option as the page shows it."""
    name: str  # its long form, --run-rounds
    argument: str  # what follows it on the command line ('' for a flag)
    default: str  # what a run without it does
    help: str  # its help text, expanded as --help expands it
    raw_help: str  # as declared, before the expansion
    value: object  # the parser's default value

    @property
    def anchor(self) -> str:
        """The page's anchor for it, as GitHub makes it from the heading `--run-rounds`."""
        return self.name


def plugin_parser() -> Parser:
    """A pytest parser holding every option the plugin's modules declare."""
    parser = Parser(_ispytest=True)
    for name in phasebench.plugin.pytest_plugins:
        hook = getattr(importlib.import_module(name), "pytest_addoption", None)
        if hook is not None:
            hook(parser)
    return parser


def _argument(attrs: dict, dest: str) -> str:
    if attrs.get("nargs") == 0:  # a flag: store_true, store_const
        return ""
    if attrs.get("metavar"):
        return str(attrs["metavar"])
    if attrs.get("choices"):
        return "|".join(map(str, attrs["choices"]))
    return dest.upper()


def _expand(help_text: str, attrs: dict, dest: str) -> str:
    """The help text as argparse prints it: %(default)s and the other %(name)s replaced, %% made %."""
    params = {"dest": dest, "default": None, "metavar": None} | {
        key: value for key, value in attrs.items() if value is not argparse.SUPPRESS}
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    params = {key: getattr(value, "__name__", value) for key, value in params.items()}
    return help_text % params if "%" in help_text else help_text


def stated_default(help_text: str) -> str | None:
    """What the help text's '(default: …)' clause says, up to its first ';' or its closing parenthesis."""
    match = DEFAULT_CLAUSE.search(help_text)
    if match is None:
        return None
    depth, start = 0, match.end()
    for index in range(start, len(help_text)):
        char = help_text[index]
        if char == "(":
            depth += 1
        elif char == ")" and depth:
            depth -= 1
        elif depth == 0 and (char == ";" or char == ")"):
            return help_text[start:index].strip()
    return help_text[start:].strip()


def options(parser: Parser | None = None) -> list[Option]:
    """Every option of the plugin's group, in the order declared. pytest keeps each as an argparse action
    (Argument.attrs(): the action's attributes), which says whether it takes a value (nargs 0: a flag)."""
    parser = parser or plugin_parser()
    found = []
    for argument in parser.getgroup(GROUP).options:
        attrs = argument.attrs()
        names = argument.names()
        name = max(names, key=len)
        dest = attrs.get("dest") or name.lstrip("-").replace("-", "_")
        raw = attrs.get("help") or ""
        expanded = _expand(raw, attrs, dest)
        default = "off" if attrs.get("nargs") == 0 else stated_default(expanded) or "not given"
        found.append(Option(name, _argument(attrs, dest), default, expanded, raw, attrs.get("default")))
    return found


def problems(found: list[Option]) -> list[str]:
    """Where a default could be stated twice or not at all: an option that takes a value and says nothing of its
    default, or one whose parser default is a value while its help text writes that value out instead of citing
    it (%(default)s)."""
    found_problems = []
    for option in found:
        if option.argument and stated_default(option.help) is None:
            found_problems.append(f"{option.name}: its help text states no '(default: …)'")
        if option.argument and option.value is not None and "%(default)" not in option.raw_help:
            found_problems.append(f"{option.name}: its parser default is {option.value!r}, so its help text must "
                                  f"cite it as %(default)s")
    return found_problems


OPTION_NAME = re.compile(r"(?<![\w`-])(--[a-z][a-z0-9-]*)")


def _prose(text: str) -> str:
    """A help text in Markdown: option names as code, a cited page (docs/method.md#...) a link from this page's
    folder, docs/reference/."""
    text = OPTION_NAME.sub(r"`\1`", text.replace("<", "&lt;"))
    return link_docs(text)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def page(found: list[Option] | None = None) -> str:
    """The Markdown page."""
    found = options() if found is None else found
    lines = [
        "# Options reference",
        "",
        "<!-- Generated by `python -m phasebench.reference` from the plugin's option definitions: edit the help",
        "     texts in phasebench/plugin/, never this page. tests/test_reference_pages.py checks that they agree. -->",
        "",
        "phasebench's own options, as `pytest --help` lists them under \"phasebench\". Every default on this page",
        "comes from the option's definition. Each option has a section of its own, so that other pages link to it",
        "(`docs/reference/options.md#--run-rounds`) rather than state its default again.",
        "",
        f"pytest-benchmark's options (`--benchmark-*`) are documented on [its usage page]({BENCHMARK_OPTIONS});",
        "phasebench honours those that save, compare and display results, and refuses with one line those that",
        "shape the timing, since every phase is timed inside its worker process.",
        "",
        "| option | argument | default |",
        "|---|---|---|",
    ]
    lines += [f"| [`{option.name}`](#{option.anchor}) | {_cell(_code(option.argument))} | "
              f"{_cell(_prose(option.default))} |" for option in found]
    for option in found:
        usage = f"{option.name} {option.argument}".strip()
        lines += ["", f"## `{option.name}`", "", f"`{usage}`", "", f"Default: {_prose(option.default)}.", "",
                  _prose(option.help)]
    return "\n".join(lines) + "\n"
