"""What the scheduler and its agents, submitters and jobs share on the wire: the message
protocol (protocol.py), how connections are secured (security.py) and the names of the example
workloads a launch may ask for (workloads.py). The bottom layer of live mode: it imports nothing
of Roundhouse but its errors, so that the live backend (runtime/) and the agents both stand on it."""
