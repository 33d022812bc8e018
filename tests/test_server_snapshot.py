"""The copies of the rules a service with several workers serves (server/snapshot.py)."""

from __future__ import annotations

import asyncio
import os
import shutil

import pytest

import hma_policy

from hma_policy.core.errors import PolicyError
from hma_policy.server import snapshot
from hma_policy.server.snapshot import Snapshots
from hma_policy.server.state import PolicyHolder
from rulecopy import copy_rules, lmcache_supported


def test_a_copy_holds_what_the_loader_reads_and_a_link_out_stays_a_link(tmp_path):
    rules = tmp_path / "rules"
    (rules / "epochs" / "E1").mkdir(parents=True)
    (rules / "nodes.yaml").write_text("kind: rules\n", encoding="utf-8")
    (rules / "epochs" / "E1" / "decision.yaml").write_text("kind: rules\n", encoding="utf-8")
    (rules / ".git").mkdir()
    (rules / ".git" / "HEAD").write_text("ref\n", encoding="utf-8")
    (tmp_path / "secret.yaml").write_text("not a rule file\n", encoding="utf-8")
    os.symlink("nodes.yaml", rules / "alias.yaml")  # inside: copied as the file it names
    os.symlink(tmp_path / "secret.yaml", rules / "out.yaml")  # out of the folder: the link, which the loader refuses
    os.symlink(".", rules / "loop")  # a directory: the link, never followed
    os.mkfifo(rules / "pipe.yaml")  # neither a file nor a directory: left out (a copy of it would never end)

    copy = Snapshots(tmp_path / "served").copy(rules)
    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*")) == [
        "alias.yaml", "epochs", "epochs/E1", "epochs/E1/decision.yaml", "loop", "nodes.yaml", "out.yaml"]
    assert not (copy / "alias.yaml").is_symlink() and (copy / "alias.yaml").read_text(encoding="utf-8") == "kind: rules\n"
    assert os.readlink(copy / "out.yaml") == str(tmp_path / "secret.yaml")
    assert os.readlink(copy / "loop") == "."


def test_the_copy_published_last_is_current_and_keeps_its_own_path(tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "nodes.yaml").write_text("one\n", encoding="utf-8")
    snapshots = Snapshots(tmp_path / "served")
    assert snapshots.current() is None
    first = snapshots.copy(rules)
    snapshots.publish(first)
    (rules / "nodes.yaml").write_text("two\n", encoding="utf-8")
    second = snapshots.copy(rules)
    assert snapshots.current() == first  # not yet published
    snapshots.publish(second)
    assert snapshots.current() == second and second != first
    assert (first / "nodes.yaml").read_text(encoding="utf-8") == "one\n"  # a policy read from it may still need it
    unpublished = snapshots.copy(rules)
    snapshots.discard(unpublished)
    assert not unpublished.exists() and snapshots.current() == second


def test_a_directory_nested_too_deep_is_refused_and_nothing_is_left(tmp_path):
    rules = tmp_path / "rules"
    rules.joinpath(*["d"] * (snapshot.MAX_SNAPSHOT_DEPTH + 1)).mkdir(parents=True)
    rules.joinpath(*["d"] * snapshot.MAX_SNAPSHOT_DEPTH, "x.yaml").write_text("deep\n", encoding="utf-8")
    served = tmp_path / "served"
    Snapshots(served).copy(rules.joinpath("d"))  # as deep as allowed: copied
    with pytest.raises(PolicyError) as raised:
        Snapshots(served).copy(rules)
    [problem] = raised.value.problems
    assert problem.code == "rules.read" and "nests folders more than 32 deep" in problem.message
    assert len(list(served.iterdir())) == 1


def test_a_directory_too_large_to_copy_is_refused_and_nothing_is_left(tmp_path, monkeypatch):
    monkeypatch.setattr(snapshot, "MAX_SNAPSHOT_BYTES", 10)
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "nodes.yaml").write_text("x" * 11, encoding="utf-8")
    snapshots = Snapshots(tmp_path / "served")
    with pytest.raises(PolicyError) as raised:
        snapshots.copy(rules)
    [problem] = raised.value.problems
    assert problem.code == "rules.read" and "holds more than 0 MiB of files" in problem.message
    assert list((tmp_path / "served").iterdir()) == []


def test_a_reload_of_the_same_rules_keeps_the_policy_and_no_copy_and_an_edit_is_published(tmp_path):
    rules = copy_rules(tmp_path / "rules")
    served = tmp_path / "served"
    PolicyHolder(str(rules), snapshots=str(served)).publish_first()  # as the first process does
    holder = PolicyHolder(str(rules), snapshots=str(served))  # a worker
    policy = holder.load()
    assert policy.rules_dir == Snapshots(served).current() and holder.source == str(rules)
    copies = sorted(served.iterdir())
    try:
        # A reload on a timer: nothing changed, nothing new is kept.
        assert asyncio.run(holder.reload()) is True
        assert holder.policy is policy and sorted(served.iterdir()) == copies
        # An edit: read from a new copy, which a worker started from now on reads too.
        lmcache_supported(tmp_path / "better")
        shutil.copy(tmp_path / "better" / "connectors.yaml", rules / "connectors.yaml")
        assert asyncio.run(holder.reload()) is True
        assert holder.policy.digest == hma_policy.load_policy(rules).digest != policy.digest
        assert holder.policy.rules_dir == Snapshots(served).current() not in copies
        assert len(list(served.iterdir())) == len(copies) + 1 and holder.source == str(rules)
    finally:
        holder.policy.close()
