"""One job's training: the loop every executor shares (``train_job``), the data on the device
and the built-in networks. Imports torch.
"""
