"""What the saved-result page says of keys that are no record's field: the keys older formats saved, and what
phasebench adds to pytest-benchmark's commit_info. Each record's own keys carry their unit and meaning in their
field (phasebench/record.py saved_field), where docs/reference/saved-results.md reads them."""

from __future__ import annotations

# Keys the current format no longer has (phasebench/saved.py RETIRED), with what they held.
RETIRED = {
    "setup_holds": "a sentence saying what the training run's set-up held; the method says it now",
    "test_slow_phase": "the phase a testing run slowed; now in `testing`",
}

# What the plugin adds to pytest-benchmark's commit_info (phasebench/provenance.py commit_info).
COMMIT_INFO = {
    "dirty": ("flag", "whether `git status` lists anything, untracked files included; null without git"),
    "porcelain": ("list of text", "`git status --porcelain`'s lines, the first 50"),
    "sources_hash": ("text", "a hash of the sources that ran (phasebench/, bench/, cpp/, the pytest files)"),
    "commit_source": ("text", "present where the commit came from PHASEBENCH_COMMIT: a copy without git history"),
}
