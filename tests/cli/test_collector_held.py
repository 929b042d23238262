"""A command's start-up runs without the cyclic garbage collector, which is back after."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from habakkuk.cli import main
from habakkuk.cli.common import collector_held
from tests.conftest import WriteConfig, mock_config


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


@pytest.mark.usefixtures("collector_on")
def test_start_up_runs_without_the_collector_and_the_work_with_it() -> None:
    with collector_held() as started:
        assert not gc.isenabled()
        started()
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0  # start-up's objects are not walked again
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0  # an in-process caller's are collectable again


@pytest.mark.usefixtures("collector_on")
def test_the_collector_is_back_when_start_up_fails() -> None:
    with pytest.raises(RuntimeError), collector_held():
        assert not gc.isenabled()
        raise RuntimeError("the config is bad")
    assert gc.isenabled()


def test_a_collector_someone_turned_off_stays_off() -> None:
    was = gc.isenabled()
    gc.disable()
    try:
        with collector_held() as started:
            started()
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.usefixtures("collector_on")
def test_a_run_in_process_leaves_the_collector_on_whether_it_answers_or_not(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config("- text: fine"))
    assert main(["run", "hi"]) == 0
    assert gc.isenabled()
    assert main(["run", "--session", "ses_missing", "hi"]) != 0
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
