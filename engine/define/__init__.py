"""What to run: the catalogue, workload types, campaign files, ad-hoc experiments and the
cell matrix with its keys. Torch-free.
"""
