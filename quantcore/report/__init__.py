"""The report: the evaluation, the verification and the calibration of one model as one HTML page.

    data = data.merge(read_evaluation(E), read_verify(V), histograms.compute(model, document, calib))
    html.write("report.html", data)          # self-contained: inline CSS and SVG, no script, no network
    data.to_json(data)                       # the same figures as JSON

`fixpoint report` (quantcore/commands/report.py) is the command line; examples/fashion/run_example.py
writes one at the end of the example pipeline.
"""
