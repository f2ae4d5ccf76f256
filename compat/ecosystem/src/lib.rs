//! Nothing here: the checks are in `tests/`. This package builds
//! `minitrace-opentelemetry` and `minitrace-datadog` 0.6.7, as published,
//! against this workspace's `minitrace`.
