"""The script that posts the pull request's comment (phasebench.gate.post), run against a fake GitHub REST API on
127.0.0.1: a first post, an update of its earlier comment found on a later page, a pull request whose head moved on,
and hostile artifacts (mentions, HTML and links in the verdict files, another pull request's number, another commit,
a huge body, a file too large to read)."""

from __future__ import annotations

import json
import re
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from phasebench.gate import comment, post
from phasebench.repository import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "gate-comment"
REPOSITORY, FORK, BRANCH = "owner/phasebench", "contributor/phasebench", "faster-loss"
SHA, NEWER = "a" * 40, "b" * 40
NUMBER = 17
PAGE = 2  # comments a page: the earlier comment lies on a later page


class FakeGitHub:
    """The pull request, its comments and every request made; a handler answers as GitHub's REST API does."""

    def __init__(self):
        self.pulls = {NUMBER: {"number": NUMBER, "head": {"sha": SHA, "ref": BRANCH, "repo": {"full_name": FORK}}},
                      3: {"number": 3, "head": {"sha": "c" * 40, "ref": "other", "repo": {"full_name": REPOSITORY}}}}
        self.comments: list[dict] = []
        self.requests: list[tuple[str, str]] = []

    def writes(self) -> list[tuple[str, str]]:
        return [(method, path) for method, path in self.requests if method != "GET"]

    def handler(self):
        github = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, status: int, body, headers: dict | None = None):
                data = json.dumps(body).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def handle_any(self):
                url = urlsplit(self.path)
                github.requests.append((self.command, url.path))
                assert self.headers["Authorization"] == "Bearer fake-token"
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                parts = url.path.strip("/").split("/")
                if self.command == "GET" and parts[:4] == ["repos", *REPOSITORY.split("/"), "pulls"]:
                    pull = github.pulls.get(int(parts[4]))
                    return self.answer(200, pull) if pull else self.answer(404, {"message": "Not Found"})
                if parts[:4] == ["repos", *REPOSITORY.split("/"), "issues"] and parts[-1] == "comments":
                    if self.command == "POST":
                        github.comments.append({"id": 1000 + len(github.comments), "body": body["body"],
                                                "user": {"login": "github-actions[bot]"}})
                        return self.answer(201, github.comments[-1])
                    page = int(parse_qs(url.query).get("page", ["1"])[0])
                    listed = github.comments[(page - 1) * PAGE:page * PAGE]
                    more = len(github.comments) > page * PAGE
                    link = {"Link": f'<http://{self.headers["Host"]}{url.path}?per_page={PAGE}&page={page + 1}>; '
                                    f'rel="next"'} if more else {}
                    return self.answer(200, listed, link)
                if self.command == "PATCH" and parts[-3:-1] == ["issues", "comments"]:
                    found = next(c for c in github.comments if c["id"] == int(parts[-1]))
                    found["body"] = body["body"]
                    return self.answer(200, found)
                return self.answer(404, {"message": "Not Found"})

            do_GET = do_POST = do_PATCH = handle_any

        return Handler


@pytest.fixture
def github(monkeypatch):
    fake = FakeGitHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), fake.handler())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    monkeypatch.setenv("GITHUB_API_URL", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("GH_TOKEN", "fake-token")
    yield fake
    server.shutdown()
    server.server_close()


def artifacts(tmp_path: Path, number: int = NUMBER, sha: str = SHA, outcome: str = "regression") -> Path:
    """What the pull request's run uploads: pr.json, and each device's gate-<device>/… gate.json."""
    (tmp_path / "pr").mkdir(parents=True, exist_ok=True)
    (tmp_path / "pr" / "pr.json").write_text(json.dumps({"number": number, "head_sha": sha}))
    for gate, folder in (("time", "benchmark"), ("instructions", "benchmark-count")):
        target = tmp_path / "gates" / "gate-cpu" / folder
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / outcome / f"{gate}.json", target / "gate.json")
    return tmp_path


def run(folder: Path, capsys, *extra: str) -> tuple[int, str]:
    status = post.main(["--pull-request", str(folder / "pr" / "pr.json"), "--gates", str(folder / "gates"),
                        "--repository", REPOSITORY, "--run-sha", SHA, "--run-repository", FORK, "--run-branch", BRANCH,
                        "--run-url", "https://github.com/owner/phasebench/actions/runs/1", *extra])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def test_a_first_post_then_an_update_of_the_same_comment(tmp_path, github, capsys):
    folder = artifacts(tmp_path)
    github.comments += [{"id": 1, "body": comment.MARKER + " quoted by someone", "user": {"login": "someone"}},
                        {"id": 2, "body": "looks good", "user": {"login": "github-actions[bot]"}}]
    status, log = run(folder, capsys)
    assert status == 0 and f"commented on #{NUMBER}" in log, log
    posted = github.comments[-1]
    assert posted["id"] == 1002 and posted["body"].startswith(comment.MARKER + "\n## phasebench: ❌ **FAILED**")
    github.comments += [{"id": 3, "body": "a reply", "user": {"login": "someone"}}]  # the bot's now on page 2

    artifacts(folder, outcome="pass")
    status, log = run(folder, capsys)
    assert status == 0 and f"updated comment 1002 on #{NUMBER}" in log, log
    assert len(github.comments) == 4 and "✅ **passed**" in github.comments[2]["body"]
    assert github.writes() == [("POST", f"/repos/{REPOSITORY}/issues/{NUMBER}/comments"),
                               ("PATCH", f"/repos/{REPOSITORY}/issues/comments/1002")]
    pages = [path for method, path in github.requests if method == "GET" and path.endswith("/comments")]
    assert len(pages) == 1 + 2  # every page read: one page, then two


def test_a_pull_request_that_moved_on_is_left_to_its_newer_run(tmp_path, github, capsys):
    github.pulls[NUMBER]["head"]["sha"] = NEWER
    status, log = run(artifacts(tmp_path), capsys)
    assert status == 0 and f"moved on to {NEWER}" in log, log
    assert github.writes() == []


@pytest.mark.parametrize(("number", "sha", "why"), [
    (3, SHA, "pull request #3's head is owner/phasebench:other, not this run's contributor/phasebench:faster-loss"),
    (99, SHA, "GitHub answered GET /repos/owner/phasebench/pulls/99 with 404"),
    (NUMBER, NEWER, f"the artifact names commit {NEWER}, not this run's {SHA}"),
], ids=["another pull request", "no pull request", "another commit"])
def test_an_artifact_naming_another_pull_request_or_commit_posts_nothing(tmp_path, github, capsys, number, sha, why):
    status, log = run(artifacts(tmp_path, number, sha), capsys)
    assert status == 1 and why in log, log
    assert github.writes() == []


HOSTILE = ("@octocat <img src=x onerror=alert(1)> [click](https://evil.example/x) <!-- phasebench-gate --> "
           "#1 owner/phasebench#2 www.evil.example :+1: **bold** `code` | a|b \u202e deadbeefcafe1234 "
           "http://evil.example <script>alert(2)</script>\nsecond line")


def test_a_hostile_verdict_file_is_escaped_and_its_comment_capped(tmp_path, github, capsys):
    """Every string of a verdict file reaches the comment as plain text: no mention, link, reference, HTML or
    Markdown of it passes, and a body of too many rows is capped under GitHub's limit."""
    folder = artifacts(tmp_path)
    time_file = folder / "gates" / "gate-cpu" / "benchmark" / "gate.json"
    held = json.loads(time_file.read_text())
    for row in held["rows"]:
        row["case"], row["phase"], row["implementation"], row["device"] = HOSTILE, HOSTILE, HOSTILE, HOSTILE
        row["detail"] = HOSTILE
    held["device"] = HOSTILE
    many = [{"case": f"test_phase[phase{i}-python-cpu]", "verdict": "improved", "base": 2.0, "head": 1.0,
             "change_pct": -50.0} for i in range(3000)]
    held["rows"] += many
    time_file.write_text(json.dumps(held))
    count_file = folder / "gates" / "gate-cpu" / "benchmark-count" / "gate.json"
    counted = json.loads(count_file.read_text()) | {"note": HOSTILE, "accepted": HOSTILE}
    count_file.write_text(json.dumps(counted))

    status, log = run(folder, capsys)
    assert status == 0, log
    body = github.comments[-1]["body"]
    assert len(body) <= comment.MAX_COMMENT and "more line(s) left out: the comment is capped" in body
    assert body.count(comment.MARKER) == 1 and body.startswith(comment.MARKER)
    assert not re.search(r"@[A-Za-z0-9]", body)  # no mention
    assert not re.search(r"<(?!!-- phasebench-gate -->)", body)  # no HTML but the marker
    assert not re.search(r"(?<!\\)\[click", body) and "](https://evil" not in body  # no link
    assert not re.search(r"https?://evil|www\.evil|#[12]\b|deadbeefcafe", body)  # no autolink, reference, hash
    assert "\u202e" not in body and "second line" not in body.split("\n", 2)[1]
    assert "\\*\\*bold\\*\\*" in body and "\\`code\\`" in body and "a\\|b" in body
    assert "](https://github.com/owner/phasebench/actions/runs/1)" in body  # the run's own link stays


def test_a_verdict_file_too_large_or_of_the_wrong_shape_posts_nothing(tmp_path, github, capsys, monkeypatch):
    folder = artifacts(tmp_path)
    time_file = folder / "gates" / "gate-cpu" / "benchmark" / "gate.json"
    limit = comment.MAX_FILE_BYTES
    monkeypatch.setattr(comment, "MAX_FILE_BYTES", time_file.stat().st_size - 1)
    status, log = run(folder, capsys)
    assert status == 1 and "larger than" in log and "nothing posted" in log, log
    monkeypatch.setattr(comment, "MAX_FILE_BYTES", limit)
    held = json.loads(time_file.read_text())
    held["rows"][0]["base"] = "<b>1</b>"
    time_file.write_text(json.dumps(held))
    status, log = run(folder, capsys)
    assert status == 1 and "row 0's 'base' is str, not int or float or NoneType" in log, log
    assert github.writes() == []
