"""The report wing: every report the zoo writes, one module per kind of run, on top of the
runs that produce the results (``base`` <- ``references`` <- ``judge`` <- ``records`` <-
``runs`` <- ``report``).

* ``compare_report.py``: a comparison (``zoo compare``): report.md, figures, InferenceData.
* ``sbc_report.py``: SBC and posterior SBC: the summary line, the rank and coverage figures,
  the markdown table of ``zoo sbc``.
* ``battery_report.py``: a defect battery's detections as a table and a figure.
* ``study_report.py``: a study's report.md from its cells (comparisons, SBC, defect batteries).

A runner returns its result and writes no report; whoever ran it (the command line, a
notebook, a study) hands the result to the report. So a stored result can be reported again
without running anything.
"""
