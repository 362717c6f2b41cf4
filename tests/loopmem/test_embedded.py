"""The embedded-server bootstrap's own rules (the servers themselves run every other test)."""

from __future__ import annotations

import json
import os

from loopmem.runtime import embedded


def test_dead_handle_pids_are_pruned(tmp_path):
    pgdata = tmp_path / "pgdata"
    pgdata.mkdir()
    handle_file = pgdata / ".handle_pids.json"
    dead_pid = 2**22 + 12345  # above pid_max on Linux: never a live process
    handle_file.write_text(json.dumps([os.getpid(), dead_pid]))
    embedded._prune_dead_handle_pids(pgdata)
    assert json.loads(handle_file.read_text()) == [os.getpid()]


def test_redis_socket_moves_to_tmp_when_the_path_is_too_long(tmp_path):
    deep = tmp_path / ("d" * 120)
    path = embedded.redis_socket_path(deep)
    assert len(str(path)) <= 100
    assert path.name == "redis.sock"
    assert embedded.redis_socket_path(deep) == path  # stable for the same data dir


def test_redis_is_shared_and_stopped_by_the_last_live_user(tmp_path):
    url = embedded.redis_url(tmp_path)
    socket_path = embedded.redis_socket_path(tmp_path)
    assert url == f"unix://{socket_path}?db=0"
    assert embedded._redis_alive(socket_path)

    # Another live user (pid 1 always runs) keeps it up when this process lets go.
    handles = tmp_path / "redis.handles.json"
    handles.write_text(json.dumps([1, os.getpid()]))
    embedded._release_redis(tmp_path, socket_path)
    assert embedded._redis_alive(socket_path)

    # A dead user (killed without cleaning up) does not: the last live one stops it.
    dead_pid = 2**22 + 12345
    handles.write_text(json.dumps([dead_pid, os.getpid()]))
    embedded._release_redis(tmp_path, socket_path)
    assert not embedded._redis_alive(socket_path)
