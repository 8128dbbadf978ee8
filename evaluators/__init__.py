"""Layer 2, the child side of a probe: one module per engine behind the protocol in evaluators.base, the worker processes
that run them (worker, accuracy_worker) and the records passed to them (base, runner, accuracy_job). Every figure a
child needs comes in its job; of the project it imports only recommender.core."""
