"""The demo (``make demo``): the failover story on the sandbox, and its engine shared with the tests.

``story`` runs a pair's real DAGs against the sandbox; ``live`` prints the status line; ``report`` builds
the timeline, the figures and the plot; ``__main__`` is the command.
"""
