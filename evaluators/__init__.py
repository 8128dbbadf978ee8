"""Engine adapters and probes: one module per engine behind the protocol in evaluators.base."""
