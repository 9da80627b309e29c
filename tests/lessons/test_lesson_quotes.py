"""zoo.lessons: the values a lesson's prose quotes (notebooks/refresh.py writes them into the prose)."""
import pytest

from zoo import lessons


def test_quote_records_text_and_refuses_what_prose_cannot_show():
    lessons.forget_quotes()
    lessons.quote(worst=f"{0.6812:+.0%}", chains=2)
    assert lessons.quoted() == {"worst": "+68%", "chains": "2"}
    lessons.quote(worst="+70%")  # a cell run again replaces its value
    assert lessons.quoted()["worst"] == "+70%"
    for bad in ({"x": ""}, {"x": "a\nb"}, {"x": "1<!--=y-->"}):
        with pytest.raises(ValueError, match="quoted value"):
            lessons.quote(**bad)
    lessons.forget_quotes()
    assert lessons.quoted() == {}


def test_the_mark_syntax_is_the_one_refresh_reads():
    import importlib.util

    from repository import REPO

    import sys

    name = "zoo_notebooks_refresh"  # the name tests/lessons/test_notebooks.py loads it under
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "notebooks" / "refresh.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its dataclasses look their module up while it executes
        spec.loader.exec_module(module)
    module = sys.modules[name]
    assert module.QUOTE_MARK.pattern == lessons.QUOTE_MARK.pattern


def test_a_claim_the_run_does_not_support_stops_the_lesson():
    lessons.claim(2 > 1, "two is more than one")
    with pytest.raises(lessons.ClaimNotSupported, match="both engines differ"):
        lessons.claim(False, "both engines differ")
