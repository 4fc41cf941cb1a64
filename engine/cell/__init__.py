"""One cell: ``python -m engine.cell SPEC.json`` trains one group under one executor, with
its monitor beside it, and appends its rows.
"""
