"""`python -m phasebench.gate.post`: renders the pull request's one comment from the gates' verdict files and posts it,
or updates the one it posted before (.github/workflows/benchmark-comment.yml, docs/gating.md#on-a-pull-request).

    python -m phasebench.gate.post --pull-request PR.json --gates DIR --repository OWNER/NAME --run-sha SHA
        --run-repository OWNER/NAME --run-branch BRANCH [--history-url URL] [--run-url URL]

It runs from the default branch's checkout, with a token that may write to pull requests, on what a pull request's
run uploaded: data that its code may have written. So it trusts none of it. PR.json ({"number", "head_sha"}) must name
a pull request whose head is the run's (`--run-repository`'s branch `--run-branch`) and the commit that was
benchmarked (`--run-sha`): a pull request of another head is refused (exit 1) and one whose head moved on since is left
to its newer run (exit 0, nothing posted). Every gate.json under DIR is checked against the renderer's schema and its
strings are escaped (phasebench.gate.comment); one that is unreadable is refused (exit 1, nothing posted). The comment
is capped in size. The previous comment is the first of the bot's (`--bot-login`) that opens with the marker, found
over every page of the pull request's comments.

GitHub's REST API at GITHUB_API_URL (default https://api.github.com), with the token in GH_TOKEN or GITHUB_TOKEN.
Imports nothing of the suite but the renderer.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from phasebench.gate import comment

BOT_LOGIN = "github-actions[bot]"
MAX_PULL_REQUEST_FILE = 1024  # bytes: a number and a hash
NEXT_PAGE = re.compile(r'<([^>]+)>;\s*rel="next"')


class Refused(Exception):
    """Nothing is posted: the message says why; `status` is the exit status."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


class GitHub:
    """The few REST calls the comment needs, each with the token; pages followed only within the API's address."""

    def __init__(self, api: str, token: str | None):
        self.api, self.token = api.rstrip("/"), token

    def call(self, method: str, path_or_url: str, body: dict | None = None) -> tuple[object, dict]:
        url = path_or_url if path_or_url.startswith(self.api + "/") else f"{self.api}/{path_or_url.lstrip('/')}"
        request = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                         headers={"Accept": "application/vnd.github+json", "User-Agent": "phasebench",
                                                  "X-GitHub-Api-Version": "2022-11-28",
                                                  **({"Authorization": f"Bearer {self.token}"} if self.token else {}),
                                                  **({"Content-Type": "application/json"} if body is not None else {})})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read() or b"null"), dict(response.headers)
        except urllib.error.HTTPError as error:
            raise Refused(f"GitHub answered {method} {urllib.parse.urlsplit(url).path} with {error.code} "
                          f"{error.reason}") from None

    def pages(self, path: str) -> list:
        """Every item of a listing, page after page (its Link header's next page, while it lies within the API)."""
        items, url = [], f"{self.api}/{path.lstrip('/')}"
        while url:
            page, headers = self.call("GET", url)
            if not isinstance(page, list):
                raise Refused(f"GitHub's listing {path} is not a list")
            items += page
            found = NEXT_PAGE.search(headers.get("Link") or headers.get("link") or "")
            url = found.group(1) if found and found.group(1).startswith(self.api + "/") else None
        return items


def pull_request_of(path: Path) -> tuple[int, str]:
    """The pull request's number and head commit the artifact names; Refused where they are not what they must be."""
    try:
        if path.stat().st_size > MAX_PULL_REQUEST_FILE:
            raise Refused(f"{path}: larger than {MAX_PULL_REQUEST_FILE} bytes: nothing posted")
        held = json.loads(path.read_text(encoding="utf8"))
    except (OSError, ValueError) as error:
        raise Refused(f"{path}: unreadable ({type(error).__name__}): nothing posted") from None
    number, sha = (held.get("number"), held.get("head_sha")) if isinstance(held, dict) else (None, None)
    if not isinstance(number, int) or isinstance(number, bool) or number <= 0 or not isinstance(sha, str) \
            or not re.fullmatch(r"[0-9a-f]{40}", sha):
        raise Refused(f"{path}: not a pull request's number and head commit: nothing posted")
    return number, sha


def verdict_files(folder: Path) -> list[dict]:
    """Every gate.json under `folder` (none where it does not exist), checked; Refused naming one that is no verdict
    file or is a link."""
    files = []
    for path in sorted(folder.rglob("gate.json")) if folder.is_dir() else []:
        if path.is_symlink() or not path.is_file():
            raise Refused(f"{path}: not a plain file: nothing posted")
        try:
            files.append(comment.load(path))
        except comment.Unreadable as error:
            raise Refused(f"{error}: nothing posted") from None
    return files


def post(args, github: GitHub) -> str:
    """Posts or updates the comment; what was done, in a line. Refused where nothing may be posted."""
    number, sha = pull_request_of(args.pull_request)
    if sha != args.run_sha:
        raise Refused(f"the artifact names commit {sha}, not this run's {args.run_sha}: nothing posted")
    pull, _ = github.call("GET", f"repos/{args.repository}/pulls/{number}")
    head = (pull or {}).get("head") or {}
    owner = ((head.get("repo") or {}).get("full_name"), head.get("ref"))
    if owner != (args.run_repository, args.run_branch):
        raise Refused(f"pull request #{number}'s head is {owner[0]}:{owner[1]}, not this run's "
                      f"{args.run_repository}:{args.run_branch}: nothing posted")
    if head.get("sha") != args.run_sha:
        raise Refused(f"pull request #{number} moved on to {head.get('sha')} since {args.run_sha} was benchmarked: "
                      f"its own run comments", status=0)
    body = comment.render(verdict_files(args.gates), args.history_url, args.run_url)
    previous = next((c for c in github.pages(f"repos/{args.repository}/issues/{number}/comments?per_page=100")
                     if isinstance(c, dict) and (c.get("user") or {}).get("login") == args.bot_login
                     and str(c.get("body") or "").startswith(comment.MARKER)), None)
    if previous:
        github.call("PATCH", f"repos/{args.repository}/issues/comments/{previous['id']}", {"body": body})
        return f"updated comment {previous['id']} on #{number}"
    github.call("POST", f"repos/{args.repository}/issues/{number}/comments", {"body": body})
    return f"commented on #{number}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m phasebench.gate.post", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pull-request", type=Path, required=True,
                        help="the run's pr.json: the pull request's number and head commit")
    parser.add_argument("--gates", type=Path, required=True, help="the folder of the gates' verdict files (gate.json)")
    parser.add_argument("--repository", required=True, help="the base repository, OWNER/NAME")
    parser.add_argument("--run-sha", required=True, help="the head commit the run benchmarked")
    parser.add_argument("--run-repository", required=True, help="the repository of the run's head, OWNER/NAME")
    parser.add_argument("--run-branch", required=True, help="the run's head branch")
    parser.add_argument("--history-url", help="the history page's address, linked from the comment")
    parser.add_argument("--run-url", help="the workflow run's address, linked from the comment")
    parser.add_argument("--bot-login", default=BOT_LOGIN, help="whose comment is updated (default: %(default)s)")
    args = parser.parse_args(argv)
    github = GitHub(os.environ.get("GITHUB_API_URL") or "https://api.github.com",
                    os.environ.get("GH_TOKEN") or os.environ.get("GITHUB_TOKEN"))
    try:
        print(post(args, github))
    except Refused as refused:
        print(f"{parser.prog}: {refused}", file=sys.stderr)
        return refused.status
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
