"""Tables, charts and text for people: pandas tables, matplotlib charts, REPORT.md,
and the end-of-run summary text. No TensorFlow; pandas and matplotlib load only
in ``tables``, ``files`` and ``charts``, so ``summary_text`` stays cheap.
"""
