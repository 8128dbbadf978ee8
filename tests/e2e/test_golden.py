"""Golden predictions (tests/golden.py): the figures of a fixed set of queries stay exactly as recorded unless the
estimate formula or calibration version changes. A figure that changes with the versions unchanged is a behaviour
change nobody declared; a version bump without re-recording is reported (re-record with `tests/golden.py record`)."""

import json

import pytest

import golden


@pytest.fixture(scope="module")
def recorded():
    return json.loads(golden.GOLDEN.read_text(encoding="utf-8"))


def test_versions_match_the_recording(recorded):
    now = golden.versions()
    if now != recorded["versions"]:
        pytest.fail(f"figure versions changed {recorded['versions']} -> {now}: re-record the golden figures "
                    f"(`python tests/golden.py record`) in the same commit")


@pytest.mark.parametrize("name", sorted(golden.QUERIES))
def test_figures_are_the_recorded_ones(recorded, name):
    if golden.versions() != recorded["versions"]:
        pytest.skip("versions changed: see test_versions_match_the_recording")
    want = recorded["queries"][name]
    assert want["args"] == golden.QUERIES[name]
    got = golden.figures(golden.run_query(golden.QUERIES[name]))
    assert sorted(got) == sorted(want["figures"]), "a different set of candidates"
    for key, figs in want["figures"].items():
        for fig, rec in figs.items():
            assert got[key].get(fig) == rec, f"{name}: {key} {fig}: {got[key].get(fig)} != recorded {rec}"
