"""Reading a campaign back as it runs or after it ended: the event streams followed and
reduced to one state. Torch-free.
"""
