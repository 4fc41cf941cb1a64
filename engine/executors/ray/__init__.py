"""The ``ray`` strategy: Ray actors (``actors``), Ray Tune trials (``tune``), their workers
and the private Ray runtime (``runtime``).
"""
