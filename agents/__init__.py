"""Live mode: node agents, the wire protocol, and the job-side client library (see DESIGN §7)."""
