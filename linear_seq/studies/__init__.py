"""Study tooling: the sweep runner, results collection, report, plots, the speed study and the op benchmark.

The training library (everything outside this package) never imports it."""
