"""Stored results carry their format (validation/base/result_format.py): a result of a layout this
zoo reads is read, any other is refused with one line saying why - never half-read."""
from __future__ import annotations

import pytest

from zoo.validation.base.result_format import check_format, stamp
from zoo.validation.runs.results import COMPARISON_FORMAT, ComparisonResult


def test_a_format_this_zoo_reads_is_read_and_an_unstamped_result_is_format_1():
    assert check_format({"format": 2, "a": 1}, "thing", current=2, required=("a",)) == 2
    assert check_format({"a": 1}, "thing", current=2) == 1
    assert stamp({"a": 1, "format": 7}, 3) == {"format": 3, "a": 1}
    assert list(stamp({"a": 1}, 3)) == ["format", "a"]


@pytest.mark.parametrize("stored, says", [
    ({"format": 3}, "a stored thing of format 3, written by a newer zoo: this one reads formats 2 to 2; "
                    "update the zoo or run it again"),
    ({"format": 1}, "a stored thing of format 1, too old to read (this zoo reads formats 2 to 2); run it again"),
    ({"format": "2"}, "not a stored thing: its format is '2', not an integer"),
    ({"format": True}, "not a stored thing: its format is True, not an integer"),
    ([1, 2], "not a stored thing: a list, not a JSON object"),
    ({"format": 2, "a": 1}, "not a stored thing of format 2: it lacks 'b'"),
])
def test_any_other_is_refused_with_the_reason(stored, says):
    with pytest.raises(ValueError) as err:
        check_format(stored, "thing", current=2, oldest=2, required=("a", "b"))
    assert str(err.value) == says


def test_a_comparison_of_a_newer_format_or_missing_parts_is_refused_before_it_is_read():
    with pytest.raises(ValueError, match=f"newer zoo: this one reads formats 1 to {COMPARISON_FORMAT}"):
        ComparisonResult.from_json({"format": COMPARISON_FORMAT + 1})
    with pytest.raises(ValueError, match="not a stored comparison result of format 1: it lacks 'model', 'data'"):
        ComparisonResult.from_json({"results": {}})
