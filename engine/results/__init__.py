"""The results files: the CSV store (append, repair, read) and the analysis that derives
speedups from it. Torch-free.
"""
