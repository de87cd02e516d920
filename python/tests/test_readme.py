"""The README's Python examples run as written (from the repository root)."""

import os

import dynsim
from conftest import REPO


def readme_python_blocks():
    text = (REPO / "README.md").read_text()
    section = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
    return [b.split("```", 1)[0] for b in section.split("```python\n")[1:]]


def run_block(code):
    here = os.getcwd()
    os.chdir(REPO)
    try:
        scope = {}
        exec(compile(code, "README.md", "exec"), scope)
        return scope
    finally:
        os.chdir(here)


def test_the_readme_shows_a_one_shot_run_and_a_planner():
    blocks = readme_python_blocks()
    assert len(blocks) == 2
    assert len(blocks[1].splitlines()) <= 25


def test_the_one_shot_example_runs():
    scope = run_block(readme_python_blocks()[0])
    path = REPO / "scenarios" / "events-on.toml"
    assert scope["report"] == dynsim.run(path, set=["router.policy=rr"])


def test_the_planner_example_scales_an_hour_of_the_day():
    scope = run_block(readme_python_blocks()[1])
    report = scope["report"]
    assert report["requests"] > 1000
    assert len(report["scale_events"]) > 0
    assert {e["by"] for e in report["scale_events"]} == {"api"}
    assert 0 < report["sla_attainment"] <= 1
    # The same planner twice: the same day.
    again = scope["queue_planner"]("scenarios/planner-day.toml", set=scope["hour"])
    assert again == report
